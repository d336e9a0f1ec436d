import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, vi } from "vitest";
import { type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { type Browser, FIRST_LOAD_MS, LIVE_MS, launchBrowser, useSession } from "../../../testkit/browser.js";
import { type Receiver, startReceiver, verifies, webhookFor } from "../../../testkit/webhooks.js";

/**
 * Issue 30 deliverable 5, webhooks in the web app, in chromium against the real app in local mode
 * (loopback receivers allowed: WEBHOOK_ALLOW_PRIVATE is on there) with the BullMQ workers: the buyer
 * registers an endpoint and sees its secret once, a test event reaches a receiver started here and
 * verifies with that secret (`standardwebhooks`), and the delivery log moves live — a failed attempt
 * (500), then the retry delivered — with no reload. The supplier view offers the supplier's events,
 * shows an endpoint disabled after repeated failure with its reason, and re-enables and deletes it.
 */

// two attempts in all, 3 s apart: long enough to see the failed attempt on the page first
test.override("appOptions", { workers: true, env: { WEBHOOK_RETRY_SCHEDULE_MS: "3000" } });
const world = fileWorld(test);
vi.setConfig({ hookTimeout: 180_000 });

let browser: Browser;
let receiver: Receiver;
let failing: Receiver;
let user: SignedInUser;
let page: Page;
beforeAll(async () => {
  [receiver, failing] = await Promise.all([startReceiver(), startReceiver()]);
  failing.answer = () => 500;
  browser = await launchBrowser(world.app);
  user = await signIn(world.app);
  await useSession(browser, world.app, user.cookie);
});
afterAll(async () => {
  await browser?.close();
  await Promise.all([receiver?.close(), failing?.close()]);
});

const panel = () => page.getByRole("region", { name: "Webhooks" });
const row = (url: string) => page.getByTestId("webhooks").locator("tr", { hasText: url });
const logRow = (id: string) => page.locator(`tr[data-delivery-id="${id}"]`);
const alertText = () => panel().getByRole("alert").first().textContent();

describe("webhooks in the web app", () => {
  test(
    "a buyer adds an endpoint (secret shown once), sends a test event; the receiver verifies it and the log turns delivered live",
    async () => {
      page = await browser.open("/app/buyer");
      await panel().getByText("No endpoints yet").waitFor({ timeout: FIRST_LOAD_MS });
      const form = panel().getByTestId("webhook-form");
      // the buyer's events, not the supplier's
      for (const e of [
        "credit.confirmed",
        "balance.low",
        "key.budget_exhausted",
        "video.completed",
        "webhook.disabled",
      ]) {
        expect(await form.getByRole("checkbox", { name: new RegExp(`^${e} `) }).count(), e).toBe(1);
      }
      expect(await form.getByRole("checkbox", { name: /^offer\.depleted / }).count()).toBe(0);

      // the server's refusals, naming the field, inline
      await form.getByLabel("Endpoint URL").fill("https://169.254.169.254/hook");
      await form.getByRole("checkbox", { name: /^credit\.confirmed / }).check();
      await form.getByRole("button", { name: "Add endpoint" }).click();
      await expect.poll(alertText, { timeout: LIVE_MS }).toMatch(/^url.*169\.254\.169\.254.*\(invalid_request\)$/);
      await form.getByLabel("Endpoint URL").fill(receiver.url);
      await form.getByRole("checkbox", { name: /^balance\.low / }).check();
      await form.getByRole("button", { name: "Add endpoint" }).click();
      await expect.poll(alertText, { timeout: LIVE_MS }).toContain("balanceLowThresholdUsdc is required");
      expect(await page.getByTestId("webhooks").count()).toBe(0);

      await form.getByLabel(/^balance\.low threshold/).fill("5");
      await form.getByLabel("Description (optional)").fill("billing alerts");
      await form.getByRole("button", { name: "Add endpoint" }).click();
      const shown = panel().getByTestId("webhook-secret");
      await shown.waitFor({ timeout: LIVE_MS });
      expect(await shown.textContent()).toContain("it is shown once");
      const secret = (await shown.getByTestId("webhook-secret-value").textContent()) ?? "";
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      await row(receiver.url).waitFor({ timeout: LIVE_MS });
      const text = (await row(receiver.url).textContent()) ?? "";
      expect(text).toContain("billing alerts");
      expect(text).toContain("credit.confirmed");
      expect(text).toContain("balance.low below 5.000000 USDC");
      expect(await row(receiver.url).getByTestId("webhook-status").textContent()).toBe("active");
      await browser.shoot(page, "web-buyer-webhook-secret");
      await shown.getByRole("button", { name: "I stored it" }).click();
      expect(await page.locator("body").textContent()).not.toContain(secret);

      // the log (opened for the new endpoint) is empty; the first attempt fails, the retry delivers
      const log = panel().getByTestId("webhook-deliveries");
      await log.getByText("No deliveries yet").waitFor({ timeout: LIVE_MS });
      receiver.answer = (n) => (n === 0 ? 500 : 200);
      await panel()
        .getByRole("button", { name: `Send a test event to ${receiver.url}` })
        .click();
      const first = await receiver.waitFor((h) => h.json.type === "webhook.test", LIVE_MS);
      const id = first.headers["webhook-id"] ?? "";
      const entry = logRow(id);
      await expect
        .poll(() => entry.getByTestId("delivery-response").textContent(), { timeout: LIVE_MS })
        .toMatch(/^500/);
      expect(await entry.getByTestId("delivery-status").textContent()).toBe("pending");
      expect(await entry.getByTestId("delivery-attempts").textContent()).toBe("1");
      await browser.shoot(page, "web-buyer-webhook-retrying");
      await expect
        .poll(() => entry.getByTestId("delivery-status").textContent(), { timeout: LIVE_MS })
        .toBe("delivered");
      expect(await entry.getByTestId("delivery-attempts").textContent()).toBe("2");
      expect(await entry.getByTestId("delivery-response").textContent()).toBe("200");

      // what the receiver got: twice the same webhook-id, signed with the secret the page showed once
      const got = receiver.all((h) => h.headers["webhook-id"] === id);
      expect(got.map((h) => h.status)).toEqual([500, 200]);
      expect(got.every((h) => verifies(secret, h))).toBe(true);
      expect(got[1]?.json).toMatchObject({ type: "webhook.test", data: { webhookId: expect.any(String) } });
      await browser.shoot(page, "web-buyer-webhooks");

      // rotating shows a new secret once; the old one no longer verifies
      await panel()
        .getByRole("button", { name: `Rotate the secret of ${receiver.url}` })
        .click();
      await panel()
        .getByRole("button", { name: `Confirm rotating the secret of ${receiver.url}` })
        .click();
      const rotated = panel().getByTestId("webhook-secret");
      await expect.poll(() => rotated.textContent(), { timeout: LIVE_MS }).toContain("The old secret stopped working");
      const secret2 = (await rotated.getByTestId("webhook-secret-value").textContent()) ?? "";
      expect(secret2).toMatch(/^whsec_/);
      expect(secret2).not.toBe(secret);
      await panel()
        .getByRole("button", { name: `Send a test event to ${receiver.url}` })
        .click();
      const next = await receiver.waitFor(
        (h) => h.json.type === "webhook.test" && h.headers["webhook-id"] !== id,
        LIVE_MS,
      );
      expect(verifies(secret2, next)).toBe(true);
      expect(verifies(secret, next)).toBe(false);
    },
    FIRST_LOAD_MS + 120_000,
  );

  test("the account's cap (409 webhook_limit_reached) shows inline", async () => {
    // nine more through the API: supplier events, so the buyer page lists none of them
    for (let i = 0; i < 9; i++) {
      await webhookFor(
        world.app,
        { cookie: user.cookie },
        { url: `${failing.url}?n=${i}`, events: ["offer.depleted"] },
      );
    }
    const form = panel().getByTestId("webhook-form");
    await form.getByLabel("Endpoint URL").fill(receiver.url);
    await form.getByRole("checkbox", { name: /^video\.completed / }).check();
    await form.getByRole("button", { name: "Add endpoint" }).click();
    await expect
      .poll(alertText, { timeout: LIVE_MS })
      .toMatch(/at most 10 webhook endpoints.*\(webhook_limit_reached\)$/);
    await page.reload();
    await panel().getByText("9 more endpoints of this account, for supplier events").waitFor({ timeout: LIVE_MS });
    await page.close();
  }, 120_000);

  test(
    "the supplier view: its own events; an endpoint disabled after repeated failure, live, re-enabled, deleted",
    async () => {
      page = await browser.open("/app/supplier");
      const form = panel().getByTestId("webhook-form");
      await form.waitFor({ timeout: FIRST_LOAD_MS });
      const boxes = await form
        .getByRole("checkbox")
        .evaluateAll((els) => els.map((e) => (e as HTMLInputElement).value));
      expect(boxes).toEqual([
        "OFFER_DEPLETED",
        "OFFER_EXPIRED",
        "OFFER_REPOSTED",
        "OFFER_PRICE_STEPPED",
        "UPSTREAM_KEY_UNHEALTHY",
        "PAYOUT_SENT",
        "WEBHOOK_DISABLED",
      ]);
      expect(await form.getByLabel(/^balance\.low threshold/).count()).toBe(0);
      // the nine supplier endpoints, not the buyer's
      await expect.poll(() => page.getByTestId("webhooks").locator("tbody tr").count(), { timeout: LIVE_MS }).toBe(9);
      expect(await page.getByTestId("webhooks").textContent()).not.toContain(receiver.url);
      await panel().getByText("1 more endpoint of this account, for buyer events").waitFor();

      // every attempt of a test event fails: the endpoint turns disabled with its reason, no reload
      const url = `${failing.url}?n=0`;
      await panel()
        .getByRole("button", { name: `Send a test event to ${url}` })
        .click();
      const status = row(url).getByTestId("webhook-status");
      await expect.poll(() => status.textContent(), { timeout: LIVE_MS }).toMatch(/^disabled/);
      expect(await panel().getByTestId("webhook-disabled-reason").textContent()).toContain(
        "Every attempt to deliver webhook.test",
      );
      expect(await panel().getByRole("alert").first().textContent()).toContain("webhook.disabled");
      await expect
        .poll(() => panel().getByTestId("webhook-delivery-log").locator("tbody tr").first().textContent(), {
          timeout: LIVE_MS,
        })
        .toContain("failed");
      await browser.shoot(page, "web-supplier-webhook-disabled");
      await row(url).getByRole("button", { name: "Re-enable" }).click();
      await expect.poll(() => status.textContent(), { timeout: LIVE_MS }).toBe("active");

      await panel()
        .getByRole("button", { name: `Delete ${url}` })
        .click();
      await panel()
        .getByRole("button", { name: `Confirm deleting ${url}` })
        .click();
      await expect.poll(() => page.getByTestId("webhooks").locator("tbody tr").count(), { timeout: LIVE_MS }).toBe(8);
      await browser.shoot(page, "web-supplier-webhooks");
      // at phone width nothing is wider than the screen: the tables scroll inside their own region
      await page.setViewportSize({ width: 390, height: 844 });
      expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(
        0,
      );
      await page.close();
    },
    FIRST_LOAD_MS + 60_000,
  );
});
