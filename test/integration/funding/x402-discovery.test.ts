// Issue 29 deliver 4: GET /.well-known/x402 lists the three funding routes with absolute URLs under
// BASE_URL, and each listed URL is a route of this app that answers the x402 challenge.
import { describe, expect } from "vitest";
import { x402DiscoveryDocument } from "../../../src/contract/discovery.js";
import { appTest as test } from "../../../testkit/app-test.js";
import { type FundingCall, post } from "../../../testkit/funding.js";

test.override("appOptions", { env: { PAY_TO: "0x00000000000000000000000000000000000000aa" } });

async function discovery(baseUrl: string) {
  const res = await fetch(`${baseUrl}/.well-known/x402`);
  return { res, body: (await res.json()) as unknown };
}

describe("GET /.well-known/x402", () => {
  test("public JSON, cacheable briefly: version 1, the three funding routes, instructions", async ({ app }) => {
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

  test("each resource is a funding route of this app: its challenge names the same URL", async ({ app, agent }) => {
    const { body } = await discovery(app.baseUrl);
    const listed = x402DiscoveryDocument.parse(body).resources.map((r) => r.replace(/^POST /, ""));
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
