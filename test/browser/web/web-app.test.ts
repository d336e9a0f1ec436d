import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, vi } from "vitest";
import type { LocalChain } from "../../../src/local/chain/index.js";
import { newWallet, signIn } from "../../../testkit/actors.js";
import { appTest, fileWorld } from "../../../testkit/app-test.js";
import { launchChromium } from "../../../testkit/browser.js";
import { chainEnv, startLocalChain } from "../../../testkit/funding.js";
import { fundConfirmed } from "../../../testkit/market.js";

/**
 * The web app at {web_url} end to end, in Debian's chromium driven by playwright-core (no browser
 * download; .ci/run installs the package), against the real app in local mode (Vite's dev server in
 * the API process) with the upstream simulator. Every number on the page comes from GraphQL and
 * moves through subscriptions: nothing here reloads a page to see a change. Screenshots of each view
 * go to artifacts/screenshots/ (CI keeps it), each checked for a blank page and an error overlay.
 */

const SCREENSHOTS = join(process.cwd(), "artifacts", "screenshots");
const MODEL = "zai-org-glm-5-1";
/** the first page load compiles the app and pre-bundles its dependencies */
const FIRST_LOAD_MS = 60_000;
/** how long a change may take to reach an open page (the suite shares two cores with everything else) */
const LIVE_MS = 30_000;

// the whole suite shares two cores: a database clone, anvil's boot and two chromiums can be slow
vi.setConfig({ hookTimeout: 180_000 });

// a local chain (anvil, chain id 8453, EIP-3009 USDC) and the in-process facilitator, for the top-up
// (a fixture the world's options read: it starts before the app and stops after it)
let chain: LocalChain;
const test = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("chain", { scope: "file" }, async ({}, { onCleanup }) => {
    chain = await startLocalChain({ readyTimeoutMs: 60_000 });
    onCleanup(() => chain.stop());
    return chain;
  })
  .override("appOptions", ({ chain }) => ({ sim: {}, syncCatalog: true, env: chainEnv(chain) }));
const world = fileWorld(test);
const profiles: string[] = [];
let context: BrowserContext;
let supplierContext: BrowserContext;

async function launch(): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), "svc-web-browser-"));
  profiles.push(profile);
  return launchChromium(profile);
}
/** console errors, page errors and failed requests of every page, by page */
const problems = new Map<Page, string[]>();

beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  // two browsers with profiles of their own: the supplier's session and the buyer's never share a
  // cookie jar (a persistent context is how playwright takes a fresh --user-data-dir)
  [context, supplierContext] = await Promise.all([launch(), launch()]);
}, 180_000);

afterAll(async () => {
  await Promise.all([context?.close(), supplierContext?.close()]);
  for (const p of profiles) rmSync(p, { recursive: true, force: true });
});

async function open(path: string, opts: { context?: BrowserContext } = {}): Promise<Page> {
  const page = await (opts.context ?? context).newPage();
  const list: string[] = [];
  problems.set(page, list);
  page.on("console", (m) => {
    // the x402 challenge is a 402 by design (the top-up asks for it, then pays); chromium logs it
    if (m.type() === "error" && !/status of 402 \(Payment Required\)/.test(m.text())) list.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => {
    list.push(`page error: ${e.message}`);
  });
  page.on("requestfailed", (r) => {
    // a request the app itself abandoned (a refetch superseding another, a stream closed with its
    // page) is not a failure
    const error = r.failure()?.errorText ?? "";
    if (error !== "net::ERR_ABORTED") list.push(`request failed: ${r.url()} ${error}`);
  });
  const res = await page.goto(`${world.app.baseUrl}${path}`, { waitUntil: "load" });
  expect(res?.status(), path).toBe(200);
  await page.locator("main#main").waitFor({ timeout: FIRST_LOAD_MS });
  return page;
}

/** A screenshot that is not blank, with no Vite error overlay and no console or page error. */
async function shoot(page: Page, name: string) {
  expect(await page.locator("vite-error-overlay").count(), `${name}: error overlay`).toBe(0);
  const text = (await page.locator("body").textContent()) ?? "";
  expect(text.length, `${name}: page text`).toBeGreaterThan(80);
  const png = await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  // a uniform (blank) page compresses to a few KB at this size
  expect(png.length, `${name}: screenshot size`).toBeGreaterThan(15_000);
  expect(problems.get(page) ?? [], `${name}: console and page errors`).toEqual([]);
}

/** Signs a wallet in through the identity provider's form; the buyer dashboard opens. */
async function idpSignIn(wallet: { address: string }): Promise<Page> {
  const page = await open("/app/sign-in");
  const tokens = await world.app.idp.mintTokens(wallet.address);
  const idp = page.getByRole("region", { name: "Identity provider" });
  await idp.getByLabel("Wallet address").fill(wallet.address);
  await idp.getByLabel("Access token").fill(tokens.accessToken);
  await idp.getByLabel("Identity token").fill(tokens.identityToken);
  await idp.getByRole("button", { name: "Sign in with identity provider" }).click();
  await page.waitForURL(/\/app\/buyer$/);
  return page;
}

/** A chat completion with `apiKey`, from outside the browser; its cost in micro-USDC. */
async function chat(apiKey: string): Promise<{ res: Response; costMicro: bigint }> {
  const res = await fetch(`${world.app.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "hello from a test [[sim:tokens=30]]" }],
    }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  const cost = res.headers.get("x-svc-cost-usdc") ?? "";
  expect(cost).toMatch(/^\d+\.\d{6}$/);
  return { res, costMicro: BigInt(cost.replace(".", "")) };
}

function ladderRow(page: Page, cents: number) {
  return page.getByTestId("ladder-table").locator("tr", { hasText: `${cents}¢` });
}

describe("the web app in chromium", () => {
  let market: Page;
  /** the supplier's dashboard, left open so the buyer test can watch its fills arrive */
  let supplier: Page;

  test(
    "the market view: the ladder, the figures, the countdown and the live-clears panel, keyboard first",
    async () => {
      market = await open("/app/");
      await market.getByTestId("cheapest-posted").waitFor();
      await expect.poll(() => market.getByTestId("cheapest-posted").textContent()).toBe("nothing posted");
      expect(await market.locator("html").getAttribute("lang")).toBe("en");
      expect(await market.title()).toBe("Market · svc inference market");
      expect(await market.getByRole("heading", { level: 1 }).textContent()).toBe("Market");
      expect(await market.getByTestId("depth-chart").count()).toBe(1);
      expect(await market.getByTestId("expiry-countdown").textContent()).toMatch(/^\d\d:\d\d:\d\d$/);
      await market.getByText("No clears yet today").waitFor();
      // the first Tab reaches the skip link, which leads to the content
      await market.keyboard.press("Tab");
      expect(await market.evaluate(() => document.activeElement?.textContent)).toBe("Skip to content");
      // the navigation marks the current page
      expect(await market.locator('nav a[aria-current="page"]').textContent()).toBe("Market");
      await shoot(market, "web-market-empty");
    },
    FIRST_LOAD_MS + 60_000,
  );

  test("a supplier signs in with the dev wallet, registers a key and posts an offer; the open market page shows it live", async () => {
    supplier = await open("/app/sign-in", { context: supplierContext });
    await supplier.getByTestId("dev-wallet-supplier").click();
    await supplier.waitForURL(/\/app\/supplier$/);
    await supplier.getByRole("heading", { level: 1, name: "Supplier" }).waitFor();
    expect(await supplier.getByTestId("signed-in-wallet").textContent()).toMatch(/^0x90F7/i);
    await supplier.getByText("No upstream keys yet").waitFor();

    const secret = `VENICE_INFERENCE_KEY_web_${randomUUID().replaceAll("-", "")}`;
    world.sim.state.addKey({ key: secret, diemMicro: 100_000_000n });
    await supplier.getByLabel("Label", { exact: true }).fill("web key");
    await supplier.getByLabel("Upstream API key").fill(secret);
    await supplier.getByRole("button", { name: "Register key" }).click();
    const keys = supplier.getByTestId("upstream-keys");
    await keys.locator("tr", { hasText: "web key" }).waitFor({ timeout: LIVE_MS });
    // never shown back: only the masked form
    expect(await keys.textContent()).not.toContain(secret);
    expect(await keys.textContent()).toContain(`…${secret.slice(-4)}`);
    expect(await supplier.getByLabel("Upstream API key").inputValue()).toBe("");

    await supplier.getByLabel("Price (¢ per $1, 1–80)").fill("47");
    await supplier.getByLabel("Quantity (DIEM)").fill("20");
    expect(await ladderRow(market, 47).count()).toBe(0);
    await supplier.getByRole("button", { name: "Post offer" }).click();
    const offers = supplier.getByTestId("offers");
    await offers.locator("tr", { hasText: "web key" }).waitFor({ timeout: LIVE_MS });
    await expect.poll(() => offers.locator("tr", { hasText: "web key" }).textContent()).toContain("active");

    // the market page, open all along, learns of it through capacityChanged: no reload
    await ladderRow(market, 47).waitFor({ timeout: LIVE_MS });
    await expect.poll(() => market.getByTestId("cheapest-posted").textContent(), { timeout: LIVE_MS }).toBe("47¢");
    expect(await ladderRow(market, 47).textContent()).toContain("20.00");

    // pause and unpause, live in both pages
    await offers.getByRole("button", { name: "Pause" }).click();
    await expect
      .poll(() => offers.locator("tr", { hasText: "web key" }).textContent(), { timeout: LIVE_MS })
      .toContain("paused");
    await expect.poll(() => ladderRow(market, 47).count(), { timeout: LIVE_MS }).toBe(0);
    await offers.getByRole("button", { name: "Unpause" }).click();
    await ladderRow(market, 47).waitFor({ timeout: LIVE_MS });

    await shoot(supplier, "web-supplier");
    await shoot(market, "web-market");
  }, 180_000);

  test("a buyer signs in through the identity provider, sets the ceiling, creates a key; a completion made outside the browser moves the balance and the clears feed live", async () => {
    // the account exists and holds 5 confirmed USDC before the browser signs in (same wallet)
    const wallet = newWallet();
    const seeded = await signIn(world.app, wallet);
    await fundConfirmed(world.app, seeded.accountId, 5_000_000n);

    const buyer = await idpSignIn(wallet);
    await expect.poll(() => buyer.getByTestId("buyer-confirmed").textContent(), { timeout: LIVE_MS }).toBe("5.000000");
    expect(await buyer.getByTestId("buyer-pending").textContent()).toBe("0.000000");

    // a ceiling under every posted price: the empty state says what to raise it to
    await buyer.getByLabel("Ceiling (cents per $1 of face, 30–80)").fill("30");
    await buyer.getByRole("button", { name: "Save ceiling" }).click();
    const empty = buyer.getByTestId("ceiling-empty");
    await empty.waitFor({ timeout: LIVE_MS });
    expect(await empty.textContent()).toContain("Nothing posted at your ceiling — raise it to 47¢");
    await empty.getByRole("button", { name: "Raise to 47¢" }).click();
    await expect.poll(() => buyer.getByTestId("current-ceiling").textContent(), { timeout: LIVE_MS }).toBe("47¢");

    await buyer.getByLabel("New key name").fill("from the browser");
    await buyer.getByRole("button", { name: "Create key" }).click();
    const apiKey = await buyer.getByTestId("new-api-key-value").textContent();
    expect(apiKey).toMatch(/^svc_/);
    await buyer.getByTestId("api-keys").locator("tr", { hasText: "from the browser" }).waitFor({ timeout: LIVE_MS });
    await buyer.getByText("No requests yet").waitFor();
    const feedBefore = await market.getByTestId("clears-feed").count();
    expect(feedBefore).toBe(0);

    // a chat completion with that key, from outside the browser
    const { res } = await chat(apiKey ?? "");
    expect(res.headers.get("x-svc-clearing-price-cents")).toBe("47");
    const remaining = res.headers.get("x-balance-remaining") ?? "";
    const cost = res.headers.get("x-svc-cost-usdc") ?? "";
    const reference = res.headers.get("x-svc-support-reference") ?? "";
    expect(remaining).toMatch(/^4\.\d{6}$/);

    // the buyer's balance and history move without a reload
    await expect.poll(() => buyer.getByTestId("buyer-confirmed").textContent(), { timeout: LIVE_MS }).toBe(remaining);
    const row = buyer.getByTestId("history").locator("tr", { hasText: MODEL });
    await row.waitFor({ timeout: LIVE_MS });
    expect(await row.textContent()).toContain(cost);
    expect(await row.textContent()).toContain("47¢");
    // the public feed gets the clear, anonymised: price, modality, model, time
    const feed = market.getByTestId("clears-feed");
    await feed.waitFor({ timeout: LIVE_MS });
    const item = await feed.locator("li").first().textContent();
    // one completion, one line in the feed (the live event and the recent list never show it twice)
    expect(await feed.locator("li").count()).toBe(1);
    expect(item).toContain(MODEL);
    expect(item).toContain("47¢");
    expect(item).toContain("text");
    expect(item).not.toContain(wallet.address.slice(2, 10));
    await expect.poll(() => market.getByTestId("today-volume").textContent(), { timeout: LIVE_MS }).not.toBe("$0.00");

    // the support reference opens its detail
    await buyer.getByRole("button", { name: `Details of request ${reference}` }).click();
    const detail = buyer.getByTestId("request-detail");
    await detail.waitFor({ timeout: LIVE_MS });
    expect(await detail.textContent()).toContain(reference);
    expect(await detail.textContent()).toContain(`${cost} USDC`);
    await shoot(buyer, "web-buyer-request-detail");
    await buyer.getByRole("dialog").getByRole("button", { name: "Close" }).click();
    await shoot(buyer, "web-buyer");
    await shoot(market, "web-market-live");
    // the supplier's open dashboard: the fill, the remaining DIEM and the earnings move (earningsChanged)
    const offer = supplier.getByTestId("offers").locator("tr", { hasText: "web key" });
    await expect.poll(() => offer.getByTestId("offer-sold").textContent(), { timeout: LIVE_MS }).not.toBe("0.000000");
    expect(await offer.getByTestId("offer-remaining").textContent()).not.toMatch(/^20\.000000/);
    await supplier.getByTestId("fills").locator("tr", { hasText: MODEL }).waitFor({ timeout: LIVE_MS });
    await expect
      .poll(() => supplier.getByTestId("supplier-payable").textContent(), { timeout: LIVE_MS })
      .not.toBe("$0.00");
    await shoot(supplier, "web-supplier-filled");
    await supplier.close();
    await buyer.close();
  }, 180_000);

  test("a buyer's key table: a key made with a limit, its policy edited, its spend bar moving live", async () => {
    const wallet = newWallet();
    const seeded = await signIn(world.app, wallet);
    await fundConfirmed(world.app, seeded.accountId, 5_000_000n);
    const buyer = await idpSignIn(wallet);
    await expect.poll(() => buyer.getByTestId("buyer-confirmed").textContent(), { timeout: LIVE_MS }).toBe("5.000000");

    await buyer.getByLabel("New key name").fill("budgeted");
    await buyer.getByLabel("Spending limit (USDC, optional)").fill("1");
    await buyer.getByLabel("Limit resets").selectOption("DAILY");
    await buyer.getByRole("button", { name: "Create key" }).click();
    const apiKey = (await buyer.getByTestId("new-api-key-value").textContent()) ?? "";
    expect(apiKey).toMatch(/^svc_/);
    const row = buyer.getByTestId("api-keys").locator("tr", { hasText: "budgeted" });
    await row.waitFor({ timeout: LIVE_MS });
    expect(await row.getByTestId("key-policy").textContent()).toContain("Limit 1.000000 USDC a day");
    // a key minted with a policy holds inference alone (docs/decisions.md "Key scopes and the key tree")
    expect(await row.getByTestId("key-scopes").textContent()).toBe("Scopes: inference");
    expect(await row.getByTestId("key-spent").textContent()).toBe("0.000000 of 1.000000 USDC");
    expect(await row.getByTestId("key-remaining").textContent()).toBe("1.000000 USDC left");
    expect(await row.textContent()).toContain("resets ");
    expect(await row.getByTestId("key-spend-bar").getAttribute("value")).toBe("0");

    // the server's refusal is shown in the form, and nothing changes
    await buyer.getByRole("button", { name: "Edit policy of key budgeted" }).click();
    const dialog = buyer.getByRole("dialog");
    await dialog.getByLabel("Spending limit (USDC; empty: no limit)").fill("0");
    await dialog.getByRole("button", { name: "Save policy" }).click();
    await expect
      .poll(() => dialog.getByRole("alert").textContent(), { timeout: LIVE_MS })
      .toContain("limitUsdc must be a decimal string with six decimals, above 0");
    await shoot(buyer, "web-buyer-key-edit");
    // a weekly limit, the key's own ceiling and one model
    await dialog.getByLabel("Spending limit (USDC; empty: no limit)").fill("0.5");
    await dialog.getByLabel("Resets").selectOption("WEEKLY");
    await dialog.getByLabel(/^Key ceiling/).fill("50");
    await dialog.getByLabel(/^Models/).fill(MODEL);
    await dialog.getByRole("button", { name: "Save policy" }).click();
    await expect.poll(() => dialog.isVisible(), { timeout: LIVE_MS }).toBe(false);
    const policy = row.getByTestId("key-policy");
    await expect.poll(() => policy.textContent(), { timeout: LIVE_MS }).toContain("Limit 0.500000 USDC a week");
    expect(await policy.textContent()).toContain("Key ceiling 50¢");
    expect(await policy.textContent()).toContain(`Models: ${MODEL}`);
    expect(await row.getByTestId("key-spent").textContent()).toBe("0.000000 of 0.500000 USDC");
    const stored = await world.app.rt.db.apiKey.findFirstOrThrow({
      where: { accountId: seeded.accountId, name: "budgeted" },
    });
    expect(stored).toMatchObject({
      limitMicroUsdc: 500_000n,
      limitReset: "weekly",
      maxPriceCentsPerDollar: 50,
      models: [MODEL],
    });

    // a completion with that key, from outside the browser: the bar moves with no reload
    const { costMicro } = await chat(apiKey);
    const spent = `${(costMicro / 1_000_000n).toString()}.${(costMicro % 1_000_000n).toString().padStart(6, "0")}`;
    const left = 500_000n - costMicro;
    await expect
      .poll(() => row.getByTestId("key-spent").textContent(), { timeout: LIVE_MS })
      .toBe(`${spent} of 0.500000 USDC`);
    expect(await row.getByTestId("key-remaining").textContent()).toContain(
      `${(left / 1_000_000n).toString()}.${(left % 1_000_000n).toString().padStart(6, "0")} USDC left`,
    );
    expect(await row.getByTestId("key-spend-bar").getAttribute("value")).toBe(String((costMicro * 10_000n) / 500_000n));
    await shoot(buyer, "web-buyer-key-policy");

    // an emptied limit is removed (null): no bar, only what the key spent
    await buyer.getByRole("button", { name: "Edit policy of key budgeted" }).click();
    await dialog.getByLabel("Spending limit (USDC; empty: no limit)").fill("");
    await dialog.getByRole("button", { name: "Save policy" }).click();
    await expect.poll(() => policy.textContent(), { timeout: LIVE_MS }).toContain("No spending limit");
    expect(await row.getByTestId("key-spend-bar").count()).toBe(0);
    expect(await row.getByTestId("key-spent").textContent()).toBe(`${spent} USDC`);
    await buyer.close();
  }, 180_000);

  test("a dev buyer tops up with x402 from the browser; pending turns confirmed live when the blocks land", async () => {
    const page = await open("/app/sign-in");
    const button = page.getByTestId("dev-wallet-buyer").first();
    await button.waitFor();
    const wallets = (await (await fetch(`${world.app.baseUrl}/app/dev/wallets`)).json()) as {
      wallets: { role: string; address: `0x${string}` }[];
    };
    const devBuyer = wallets.wallets.find((w) => w.role === "buyer");
    if (!devBuyer) throw new Error("no dev buyer");
    await chain.mintUsdc(devBuyer.address, 50_000_000n);
    await button.click();
    await page.waitForURL(/\/app\/buyer$/);
    await expect.poll(() => page.getByTestId("buyer-pending").textContent(), { timeout: LIVE_MS }).toBe("0.000000");

    // the top-up pays in the newest version the 402 offers: v2, PAYMENT-SIGNATURE, never X-PAYMENT
    const paid: { signature: string | undefined; xPayment: string | undefined; receipt: string | null }[] = [];
    page.on("response", async (res) => {
      if (!res.url().endsWith("/v1/x402/top-up") || res.status() !== 200) return;
      const sent = await res.request().allHeaders();
      paid.push({
        signature: sent["payment-signature"],
        xPayment: sent["x-payment"],
        receipt: await res.headerValue("payment-response"),
      });
    });
    await page.getByLabel("Amount (USDC)").fill("2.5");
    await page.getByRole("button", { name: "Top up" }).click();
    await page.getByText("Paid 2.500000 USDC").waitFor({ timeout: LIVE_MS });
    await expect.poll(() => paid.length).toBe(1);
    expect(paid[0]?.signature).toEqual(expect.any(String));
    expect(paid[0]?.xPayment).toBeUndefined();
    expect(JSON.parse(Buffer.from(paid[0]?.receipt ?? "", "base64").toString())).toMatchObject({
      success: true,
      network: "eip155:8453",
    });
    await expect.poll(() => page.getByTestId("buyer-pending").textContent(), { timeout: LIVE_MS }).toBe("2.500000");
    expect(await page.getByTestId("buyer-confirmed").textContent()).toBe("0.000000");
    await expect.poll(() => page.getByTestId("payments").textContent(), { timeout: LIVE_MS }).toContain("pending");
    await shoot(page, "web-buyer-top-up-pending");

    // the confirmation depth (CONFIRMATION_BLOCKS=5 here) lands; the worker's sweep confirms it
    await chain.mine(6);
    await expect
      .poll(async () => (await world.app.rt.services.payments.confirmPending()).confirmed, { timeout: LIVE_MS })
      .toBe(1);
    await expect.poll(() => page.getByTestId("buyer-confirmed").textContent(), { timeout: LIVE_MS }).toBe("2.500000");
    expect(await page.getByTestId("buyer-pending").textContent()).toBe("0.000000");
    await expect.poll(() => page.getByTestId("payments").textContent(), { timeout: LIVE_MS }).toContain("confirmed");
    await shoot(page, "web-buyer-top-up-confirmed");
    await page.close();
  }, 180_000);

  test("the sign-in view and the market at phone width", async () => {
    const signInPage = await open("/app/sign-in");
    await signInPage.getByTestId("dev-wallet-buyer").first().waitFor();
    expect(await signInPage.getByRole("button", { name: "Sign in with identity provider" }).count()).toBe(1);
    await shoot(signInPage, "web-sign-in");
    await signInPage.setViewportSize({ width: 390, height: 844 });
    await signInPage.goto(`${world.app.baseUrl}/app/`);
    await signInPage.getByTestId("depth-chart").waitFor({ timeout: LIVE_MS });
    // nothing wider than the screen: the tables scroll inside their own region
    const overflow = await signInPage.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await shoot(signInPage, "web-market-phone");
    await signInPage.close();
  }, 120_000);
});
