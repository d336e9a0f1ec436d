import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { createHttpApp } from "../../../src/app.js";
import { loadConfig } from "../../../src/config.js";
import { createRuntime, type Runtime } from "../../../src/runtime.js";
import { buildWebApp, builtStampOf, webBuildStamp, webMountPath } from "../../../src/web/vite.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { REDIS_URL } from "../../../testkit/db.js";
import { freePort, isolatedWorld } from "../../../testkit/harness.js";

/**
 * How the process serves the web app at {web_url}: its config.json, the local-mode dev sign-in
 * helpers (and their absence in production), and in production the built assets with the SPA
 * fallback and the security headers. The views themselves are tested in chromium (test/browser/web).
 */

test.override("appOptions", {});
const world = fileWorld(test);

describe("local mode", () => {
  test("the mount path redirects to its slash; config.json says what the browser needs and no secret", async () => {
    const r = await fetch(`${world.app.baseUrl}/app?x=1`, { redirect: "manual" });
    expect(r.status).toBe(302);
    expect(r.headers.get("location")).toBe("/app/?x=1");
    const c = await fetch(`${world.app.baseUrl}/app/config.json`);
    expect(c.status).toBe(200);
    const body = (await c.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      mode: "local",
      baseUrl: world.app.baseUrl,
      webUrl: `${world.app.baseUrl}/app`,
      graphqlUrl: `${world.app.baseUrl}/graphql`,
      chainId: 8453,
      confirmationBlocks: 20,
      devSignIn: true,
      idpConfigured: true,
    });
    const text = JSON.stringify(body);
    expect(text).not.toContain(world.app.rt.config.secrets.sessionSecret);
    expect(text).not.toContain("PRIVATE");
  });

  test("the dev wallets are anvil's seeded supplier (account 3) and buyers (4-7), keys matching addresses", async () => {
    const r = await fetch(`${world.app.baseUrl}/app/dev/wallets`);
    expect(r.status).toBe(200);
    const body = (await r.json()) as {
      wallets: { role: string; address: string; privateKey: `0x${string}` }[];
      idpTokens: boolean;
    };
    expect(body.wallets.map((w) => w.role)).toEqual(["supplier", "buyer", "buyer", "buyer", "buyer"]);
    expect(body.wallets[0]?.address).toBe("0x90F79bf6EB2c4f870365E785982E1f101E93b906");
    expect(body.wallets[1]?.address).toBe("0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65");
    for (const w of body.wallets) expect(privateKeyToAccount(w.privateKey).address).toBe(w.address);
    // this test app's identity provider lives in the test, not in .dev-state: no minting here
    expect(body.idpTokens).toBe(false);
  });

  test("minting local IdP tokens: refused without the dev key, cross-origin, or with a bad wallet", async () => {
    const post = (body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${world.app.baseUrl}/app/dev/idp-tokens`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });
    const wallet = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65";
    const missing = await post({ walletAddress: wallet });
    expect(missing.status).toBe(503);
    expect(missing.headers.get("x-svc-error-code")).toBe("not_configured");
    expect((await post({ walletAddress: wallet }, { origin: "https://evil.example" })).status).toBe(403);
    const bad = await post({ walletAddress: "0x12" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { field?: string } }).error.field).toBe("walletAddress");
  });

  test("an unknown dev path is the API's 404, not the app", async () => {
    const r = await fetch(`${world.app.baseUrl}/app/dev/nothing`);
    expect(r.status).toBe(404);
    expect(r.headers.get("x-svc-error-code")).toBe("not_found");
  });
});

describe("webMountPath", () => {
  test.each([
    { label: "the default", url: "http://127.0.0.1:8080/app", path: "/app" },
    { label: "a trailing slash", url: "https://example.com/dash/", path: "/dash" },
    { label: "a nested path", url: "https://example.com/x/app", path: "/x/app" },
    { label: "a host of its own (no path)", url: "https://app.example.com", path: "/app" },
  ])("$label", ({ url, path }) => {
    expect(webMountPath(url)).toBe(path);
  });
});

describe("production mode: the built app", () => {
  let rt: Runtime;
  let server: Server;
  let base: string;
  let drop: () => Promise<void>;
  const outDir = join(tmpdir(), `svc-web-build-${randomUUID().slice(0, 8)}`);

  beforeAll(async () => {
    // the same build `npm run build` runs, into a directory of this test's own
    await buildWebApp({ mountPath: "/app", outDir });
    const w = await isolatedWorld();
    drop = w.drop;
    const port = await freePort();
    const r = loadConfig(
      {
        DATABASE_URL: w.databaseUrl,
        REDIS_URL,
        PORT: String(port),
        PAY_TO: "0x000000000000000000000000000000000000dEaD",
        SESSION_SECRET: "a-production-session-secret-of-at-least-32-chars",
        KEY_ENCRYPTION_KEY: "11".repeat(32),
        LOG_LEVEL: "silent",
        CHAIN_RPC_URL: "http://127.0.0.1:9",
      },
      { mode: "production", redisPrefix: w.prefix },
    );
    if (!r.ok) throw new Error(r.errors.join("\n"));
    rt = await createRuntime(r.config);
    server = createHttpApp(rt, { web: { distDir: outDir } }).server;
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", () => resolve()));
    base = `http://127.0.0.1:${port}`;
  }, 180_000);

  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    await rt?.close();
    await drop?.();
    rmSync(outDir, { recursive: true, force: true });
  });

  test("the build is stamped with its sources, and a second build of the same sources is skipped", async () => {
    expect(builtStampOf(outDir)).toBe(webBuildStamp("/app"));
    expect((await buildWebApp({ mountPath: "/app", outDir })).built).toBe(false);
    expect(webBuildStamp("/app")).not.toBe(webBuildStamp("/dash"));
  });

  test("every app path answers index.html with the security headers; hashed assets are immutable; a missing file is 404", async () => {
    const page: Response | undefined = await fetch(`${base}/app/buyer`);
    expect(page?.status).toBe(200);
    const html = (await page?.text()) ?? "";
    expect(html).toContain('<div id="root"></div>');
    expect(page?.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(page?.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(page?.headers.get("x-frame-options")).toBe("DENY");
    const script = /src="(\/app\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const asset = await fetch(`${base}${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("cache-control")).toContain("immutable");
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
    expect((await fetch(`${base}/app/assets/missing-file.js`)).status).toBe(404);
    const root = await fetch(`${base}/app/`);
    expect(root.status).toBe(200);
    expect(root.headers.get("cache-control")).toBe("no-cache");
  }, 180_000);

  test("a server whose app is not built answers its routes 503 not_configured, and the rest of the API serves", async () => {
    const bare = createHttpApp(rt, { web: { distDir: join(tmpdir(), `svc-web-none-${randomUUID().slice(0, 8)}`) } });
    const p = await freePort();
    await new Promise<void>((resolve) => bare.server.listen(p, "127.0.0.1", () => resolve()));
    try {
      const r = await fetch(`http://127.0.0.1:${p}/app/buyer`);
      expect(r.status).toBe(503);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe("not_configured");
      expect((await fetch(`http://127.0.0.1:${p}/app/config.json`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${p}/healthz`)).status).toBe(200);
    } finally {
      bare.server.closeAllConnections();
      await new Promise<void>((r) => bare.server.close(() => r()));
    }
  });

  test("no dev sign-in in production: the helpers are 404 and config.json says so", async () => {
    expect((await fetch(`${base}/app/dev/wallets`)).status).toBe(404);
    const c = (await (await fetch(`${base}/app/config.json`)).json()) as { mode: string; devSignIn: boolean };
    expect(c).toMatchObject({ mode: "production", devSignIn: false });
  });
});
