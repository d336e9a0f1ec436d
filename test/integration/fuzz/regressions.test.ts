import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { isolatedWorld, startTestApp, type TestApp } from "../../../testkit/harness.js";

/**
 * What the fuzz tests (rest.fuzz.test.ts, graphql.fuzz.test.ts) found, one focused case each, so a
 * regression fails here by name rather than as a random counterexample there.
 */

let app: TestApp;
let drop: () => Promise<void>;

beforeAll(async () => {
  const w = await isolatedWorld();
  drop = w.drop;
  app = await startTestApp({ databaseUrl: w.databaseUrl, prefix: w.prefix });
});
afterAll(async () => {
  await app?.close();
  await drop?.();
});

async function send(method: string, path: string, headers: Record<string, string>, body?: string) {
  const res = await fetch(`${app.baseUrl}${path}`, { method, headers, body });
  const text = await res.text();
  let json: { error?: { code?: string; message?: string } } | undefined;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

function expectErrorBody(a: Awaited<ReturnType<typeof send>>, status: number, code: string) {
  expect(a.status, a.text.slice(0, 300)).toBe(status);
  expect(a.headers.get("content-type") ?? "").toMatch(/^application\/json/);
  expect(a.headers.get("x-svc-error-code")).toBe(code);
  expect(a.json?.error?.code).toBe(code);
  expect(a.json?.error?.message).toBeTypeOf("string");
}

describe("/graphql: an Accept header it cannot answer", () => {
  test.each([
    ["POST", "image/png"],
    ["GET", "image/png"],
  ])("%s with Accept: %s → 406 with the error body (yoga's own 406 had no body)", async (method, accept) => {
    const query = "{ apiVersion }";
    const a =
      method === "POST"
        ? await send("POST", "/graphql", { "content-type": "application/json", accept }, JSON.stringify({ query }))
        : await send("GET", `/graphql?query=${encodeURIComponent(query)}`, { accept });
    expectErrorBody(a, 406, "not_acceptable");
  });

  test("an Accept header it can answer still gets the result", async () => {
    const a = await send(
      "POST",
      "/graphql",
      { "content-type": "application/json", accept: "application/json" },
      JSON.stringify({ query: "{ apiVersion }" }),
    );
    expect(a.status).toBe(200);
    expect(a.text).toContain("apiVersion");
  });
});
