import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, vi } from "vitest";
import { type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { type Browser, FIRST_LOAD_MS, LIVE_MS, launchBrowser, useSession } from "../../../testkit/browser.js";
import { registerKey, simKey } from "../../../testkit/supply.js";

/**
 * Issue 30 deliverable 5, standing offers and price schedules in the web app, in chromium against
 * the real app in local mode with the upstream simulator: the supplier posts a standing offer with
 * a two-step schedule through the form and sees the day's prices in the preview, the row stores the
 * schedule, the table shows the server's effective price and the standing badge; the edit dialog
 * removes a step, and a schedule whose times do not increase is refused inline with the server's
 * message naming the field, changing nothing.
 */

test.override("appOptions", { sim: {} });
const world = fileWorld(test);
vi.setConfig({ hookTimeout: 180_000 });

let browser: Browser;
let user: SignedInUser;
let page: Page;
beforeAll(async () => {
  browser = await launchBrowser(world.app);
  user = await signIn(world.app);
  await registerKey(world.app, user, simKey(world.sim, 50_000_000n), "sched key");
  await useSession(browser, world.app, user.cookie);
});
afterAll(async () => {
  await browser?.close();
});

const offers = () => page.getByTestId("offers");
const offerRow = () => offers().locator("tr", { hasText: "sched key" });
const storedOffer = () => world.app.rt.db.offer.findFirstOrThrow({ where: { accountId: user.accountId } });

/** The schedule's price at this instant, by the rule of docs/decisions.md "Price schedules". */
function priceNow(base: number, steps: { fromUtc: string; priceCentsPerDollar: number }[]): number {
  const now = new Date();
  const minute = now.getUTCHours() * 60 + now.getUTCMinutes();
  let price = base;
  for (const s of steps) {
    if (Number(s.fromUtc.slice(0, 2)) * 60 + Number(s.fromUtc.slice(3)) > minute) break;
    price = s.priceCentsPerDollar;
  }
  return price;
}

describe("standing offers and price schedules in the web app", () => {
  test(
    "a supplier posts a standing offer with a two-step schedule, sees the day's prices, removes a step and is refused a bad one inline",
    async () => {
      page = await browser.open("/app/supplier");
      const form = page.locator("form", { has: page.getByRole("button", { name: "Post offer" }) });
      await form.waitFor({ timeout: FIRST_LOAD_MS });
      await form.getByLabel("Price (¢ per $1, 1–80)").fill("45");
      await form.getByLabel("Quantity (DIEM)").fill("10");
      await form.getByLabel(/^Repost daily/).check();
      await form.getByLabel(/^Daily quantity cap/).fill("8");

      // steps typed out of order are sent (and previewed) in time order
      await form.getByRole("button", { name: "Add step" }).click();
      await form.getByLabel("Step 1 from (UTC)").fill("18:00");
      await form.getByLabel("Step 1 price (¢ per $1)").fill("30");
      await form.getByRole("button", { name: "Add step" }).click();
      await form.getByLabel("Step 2 from (UTC)").fill("06:00");
      await form.getByLabel("Step 2 price (¢ per $1)").fill("40");

      const preview = form.getByTestId("price-preview");
      await expect
        .poll(() => preview.locator("li").allTextContents())
        .toEqual(["00:00–06:00 45¢", "06:00–18:00 40¢", "18:00–24:00 30¢"]);
      const steps = [
        { fromUtc: "06:00", priceCentsPerDollar: 40 },
        { fromUtc: "18:00", priceCentsPerDollar: 30 },
      ];
      const expected = priceNow(45, steps);
      expect(await preview.locator('li[aria-current="time"]').count()).toBe(1);
      expect(await preview.locator('li[aria-current="time"] strong').textContent()).toBe(`${expected}¢`);

      await form.getByRole("button", { name: "Post offer" }).click();
      await offerRow().waitFor({ timeout: LIVE_MS });
      const stored = await storedOffer();
      expect(stored.schedule).toEqual(steps);
      expect(stored.repostDaily).toBe(true);
      expect(stored.dailyQuantityMicroDiem).toBe(8_000_000n);
      expect(stored.priceCentsPerDollar).toBe(45);

      // the table: the server's effective price (the base beside it when they differ), the badge
      expect(await offerRow().getByTestId("offer-price").locator("strong").textContent()).toBe(`${expected}¢`);
      if (expected !== 45) expect(await offerRow().getByTestId("offer-price").textContent()).toContain("base 45¢");
      expect(await offerRow().textContent()).toContain("standing");
      // the form is back to no schedule for the next offer
      expect(
        await page
          .getByTestId("schedule-steps")
          .first()
          .getByRole("button", { name: /^Remove/ })
          .count(),
      ).toBe(0);

      // the dialog: the stored settings, a step removed
      await offerRow().getByRole("button", { name: "Edit schedule of the offer on sched key" }).click();
      const dialog = page.getByRole("dialog", { name: "Offer on sched key" });
      const edit = dialog.getByTestId("standing-form");
      await edit.waitFor();
      expect(await edit.getByLabel(/^Repost daily/).isChecked()).toBe(true);
      expect(await edit.getByLabel(/^Daily quantity cap/).inputValue()).toBe("8.000000");
      expect(await edit.getByLabel("Step 1 from (UTC)").inputValue()).toBe("06:00");
      expect(await edit.getByTestId("price-preview").locator("li").count()).toBe(3);
      await edit.getByRole("button", { name: "Remove step 1" }).click();
      expect(await edit.getByTestId("price-preview").locator("li").allTextContents()).toEqual([
        "00:00–18:00 45¢",
        "18:00–24:00 30¢",
      ]);
      await edit.getByRole("button", { name: "Save" }).click();
      await edit.waitFor({ state: "detached", timeout: LIVE_MS });
      await expect
        .poll(async () => (await storedOffer()).schedule, { timeout: LIVE_MS })
        .toEqual([{ fromUtc: "18:00", priceCentsPerDollar: 30 }]);
      const after = priceNow(45, [{ fromUtc: "18:00", priceCentsPerDollar: 30 }]);
      await expect
        .poll(() => offerRow().getByTestId("offer-price").locator("strong").textContent(), { timeout: LIVE_MS })
        .toBe(`${after}¢`);

      // a second step at the same minute: the server's 400, naming the field, inline; nothing changes
      await offerRow().getByRole("button", { name: "Edit schedule of the offer on sched key" }).click();
      await edit.waitFor();
      await edit.getByRole("button", { name: "Add step" }).click();
      await edit.getByLabel("Step 2 from (UTC)").fill("18:00");
      await edit.getByLabel("Step 2 price (¢ per $1)").fill("20");
      await edit.getByRole("button", { name: "Save" }).click();
      await expect
        .poll(() => edit.getByRole("alert").textContent(), { timeout: LIVE_MS })
        .toMatch(/^schedule\.1\.fromUtc must be later than schedule\.0\.fromUtc \(18:00\).*\(invalid_request\)$/);
      expect(await dialog.isVisible()).toBe(true);
      expect((await storedOffer()).schedule).toEqual([{ fromUtc: "18:00", priceCentsPerDollar: 30 }]);

      await browser.shoot(page, "web-supplier-schedule");
    },
    FIRST_LOAD_MS + 120_000,
  );
});
