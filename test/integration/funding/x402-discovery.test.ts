// Issue 29 deliver 4 and issue 41: GET /.well-known/x402 lists the paid routes with absolute URLs
// under BASE_URL, and each listed funding URL is a route of this app that answers the x402
// challenge; GET /.well-known/x402.json is the x402 draft per-site manifest of the same routes.

import { decodePaymentRequiredHeader } from "@x402/core/http";
import { describe, expect } from "vitest";
import { x402DiscoveryDocument, x402Manifest } from "../../../src/contract/discovery.js";
import { PAID_ROUTES } from "../../../src/contract/paid-routes.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { type FundingCall, post } from "../../../testkit/funding.js";

test.override("appOptions", { env: { PAY_TO: "0x00000000000000000000000000000000000000aa" } });

async function discovery(baseUrl: string) {
  const res = await fetch(`${baseUrl}/.well-known/x402`);
  return { res, body: (await res.json()) as unknown };
}

describe("GET /.well-known/x402", () => {
  test("public JSON, cacheable briefly: version 1, the paid routes, instructions", async ({ app }) => {
    const base = app.rt.config.urls.base;
    const { res, body } = await discovery(app.baseUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    const doc = x402DiscoveryDocument.strict().parse(body);
    expect(doc.version).toBe(1);
    expect(doc.resources).toEqual([
      `POST ${base}/v1/x402/signup`,
      `POST ${base}/v1/x402/top-up`,
      `POST ${base}/v1/x402/refill`,
      `POST ${base}/x402/v1/chat/completions`,
      `POST ${base}/x402/v1/responses`,
      `POST ${base}/x402/v1/messages`,
      `POST ${base}/x402/v1/image/generate`,
      `POST ${base}/x402/v1/images/generations`,
    ]);
    for (const r of doc.resources) {
      const url = new URL(r.replace(/^POST /, ""));
      expect(url.origin, r).toBe(new URL(base).origin);
    }
    expect(doc.instructions).toContain(`${base}/v1 `);
    expect(doc.instructions).toContain(`POST ${base}/v1/x402/refill`);
    expect(doc.instructions).toContain(`${base}/SKILL.md`);
    // the guide it points to is served where it says
    const skill = await fetch(`${app.baseUrl}/SKILL.md`);
    expect(skill.status).toBe(200);
  });

  test("each funding resource is a route of this app: its challenge names the same URL", async ({ app, agent }) => {
    const { body } = await discovery(app.baseUrl);
    const listed = x402DiscoveryDocument
      .parse(body)
      .resources.map((r) => r.replace(/^POST /, ""))
      .filter((url) => new URL(url).pathname.startsWith("/v1/x402/"));
    expect(listed).toHaveLength(3);
    const origin = new URL(app.rt.config.urls.base).origin;
    const credentials: Record<FundingCall["path"], Record<string, string>> = {
      "/v1/x402/signup": {},
      "/v1/x402/top-up": { cookie: agent.user.cookie, origin },
      "/v1/x402/refill": { authorization: `Bearer ${agent.apiKey}` },
    };
    for (const url of listed) {
      const path = new URL(url).pathname as FundingCall["path"];
      expect(Object.keys(credentials)).toContain(path);
      const r = await post(app, { path, body: { amountMicroUsdc: 5_000_000 }, headers: credentials[path] });
      expect(r.status, path).toBe(402);
      expect((r.body.accepts as { resource: string }[])[0]?.resource, path).toBe(url);
    }
  });
});

describe("GET /.well-known/x402.json", () => {
  test("the x402 draft manifest: public JSON, every paid route with its resource, accepts, input and output", async ({
    app,
  }) => {
    const base = app.rt.config.urls.base;
    const res = await fetch(`${app.baseUrl}/.well-known/x402.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    const manifest = x402Manifest.strict().parse(await res.json());
    expect(manifest.x402Version).toBe(2);
    expect(manifest.items.map((i) => i.resource.url)).toEqual(PAID_ROUTES.map((r) => `${base}${r.path}`));
    for (const item of manifest.items) {
      expect(item.accepts[0], item.resource.url).toMatchObject({
        network: "eip155:8453",
        payTo: "0x00000000000000000000000000000000000000aa",
        asset: app.rt.config.chain.usdcAddress,
      });
      // the service metadata; no icon: the docs site is on 127.0.0.1 here
      expect(item.resource).toMatchObject({ serviceName: "svc inference marketplace" });
      expect(item.resource).not.toHaveProperty("iconUrl");
    }
    // the signup item's advisory requirement is what its live 402 asks for the least amount
    const signup = await post(app, { path: "/v1/x402/signup", body: { amountMicroUsdc: 1_000_000 } });
    const live = decodePaymentRequiredHeader(signup.headers.get("payment-required") ?? "");
    expect(manifest.items[0]?.accepts).toEqual(live.accepts);
    expect(manifest.items[0]?.resource).toEqual(live.resource);
  });
});
