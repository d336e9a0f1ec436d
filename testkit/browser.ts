import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { expect } from "vitest";
import type { TestApp } from "./harness.js";

/**
 * The web app in Debian's chromium driven by playwright-core (no browser download), for the tests
 * in test/browser/web/: a browser with a profile of its own, pages that record every console
 * error, page error and failed request, and screenshots checked for a blank page and errors.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const SCREENSHOTS = join(process.cwd(), "artifacts", "screenshots");
/** the first page load compiles the app and pre-bundles its dependencies */
export const FIRST_LOAD_MS = 60_000;
/** how long a change may take to reach an open page (the suite shares two cores with everything else) */
export const LIVE_MS = 30_000;

export interface Browser {
  context: BrowserContext;
  /** opens `path` of the app; its problems are kept for `shoot` */
  open(path: string): Promise<Page>;
  /** a screenshot that is not blank, with no error overlay and no console or page error */
  shoot(page: Page, name: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Debian's chromium, headless, on the profile directory `profile` (a persistent context is how
 * playwright takes a --user-data-dir of our own: a cookie jar per browser). Every browser test
 * launches through this.
 */
export function launchChromium(profile: string): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** A headless chromium with a fresh profile (a cookie jar of its own) on `app`. */
export async function launchBrowser(app: TestApp): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), "svc-web-browser-"));
  const context = await launchChromium(profile);
  const problems = new Map<Page, string[]>();
  return {
    context,
    async open(path) {
      const page = await context.newPage();
      const list: string[] = [];
      problems.set(page, list);
      page.on("console", (m) => {
        if (m.type() === "error") list.push(`console: ${m.text()}`);
      });
      page.on("pageerror", (e) => void list.push(`page error: ${e.message}`));
      page.on("requestfailed", (r) => {
        // a request the app itself abandoned (a superseded refetch, a stream closed with its page)
        const error = r.failure()?.errorText ?? "";
        if (error !== "net::ERR_ABORTED") list.push(`request failed: ${r.url()} ${error}`);
      });
      const res = await page.goto(`${app.baseUrl}${path}`, { waitUntil: "load" });
      expect(res?.status(), path).toBe(200);
      await page.locator("main#main").waitFor({ timeout: FIRST_LOAD_MS });
      return page;
    },
    async shoot(page, name) {
      expect(await page.locator("vite-error-overlay").count(), `${name}: error overlay`).toBe(0);
      const text = (await page.locator("body").textContent()) ?? "";
      expect(text.length, `${name}: page text`).toBeGreaterThan(80);
      const png = await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
      // a uniform (blank) page compresses to a few KB at this size
      expect(png.length, `${name}: screenshot size`).toBeGreaterThan(15_000);
      expect(problems.get(page) ?? [], `${name}: console and page errors`).toEqual([]);
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Gives the browser the session `cookie` (`svc_session=…`, from `signIn`) for `app`. */
export async function useSession(browser: Browser, app: TestApp, cookie: string): Promise<void> {
  const at = cookie.indexOf("=");
  const [name, value] = [cookie.slice(0, at), cookie.slice(at + 1)];
  await browser.context.addCookies([{ name, value, url: app.baseUrl, httpOnly: true, sameSite: "Lax" }]);
}
