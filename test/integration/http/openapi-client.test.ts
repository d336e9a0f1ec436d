// The OpenAPI document drives a generated client (issue 17 acceptance): openapi-typescript turns it
// into types, and a small client written against them — a chat completion, a video quote, agent/me —
// compiles with the TypeScript compiler; a wrong field does not.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { afterAll, expect, test } from "vitest";
import { buildOpenApiDocument } from "../../../src/contract/openapi.js";

const EXAMPLE = `
import type { paths } from "./api.js";

type Json<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  requestBody: { content: { "application/json": infer B } };
}
  ? B
  : never;
type Ok<P extends keyof paths, M extends keyof paths[P], S extends number = 200> = paths[P][M] extends {
  responses: { [K in S]: { content: { "application/json": infer R } } };
}
  ? R
  : never;

declare function post<P extends keyof paths>(path: P, body: Json<P, "post" & keyof paths[P]>): Promise<Ok<P, "post" & keyof paths[P]>>;
declare function get<P extends keyof paths>(path: P): Promise<Ok<P, "get" & keyof paths[P]>>;

export async function agentPath(): Promise<string> {
  const me = await get("/v1/agent/me");
  const ceiling: number = me.maxPriceCentsPerDollar;
  const confirmed: string = me.confirmedUsdc;
  const blocks: number = me.confirmationBlocks;

  const completion = await post("/v1/chat/completions", {
    model: "zai-org-glm-5-1",
    messages: [{ role: "user", content: "hello" }],
    max_tokens: 64,
  });
  const text: string | null | undefined = completion.choices[0]?.message.content;

  const quote = await post("/v1/video/quote", { model: "wan-2.6-text-to-video", prompt: "a fox", duration: "5s" });
  const clears: boolean = quote.clears_now;
  const usdc: string = quote.estimated_usdc;

  const failed: paths["/v1/agent/me"]["get"]["responses"][401]["content"]["application/json"] = {
    error: { code: "authentication_failed", message: "no key" },
  };
  // the types are real, not \`never\`: each of these must fail to compile
  // @ts-expect-error confirmedUsdc is a six-decimal string, not a number
  const notNumber: number = me.confirmedUsdc;
  // @ts-expect-error clears_now is a boolean
  const notString: string = quote.clears_now;
  // @ts-expect-error messages is required
  await post("/v1/chat/completions", { model: "zai-org-glm-5-1" });
  // @ts-expect-error maxPriceCentsPerDollar is an integer, not a string
  const wrong: Json<"/v1/agent/max-price", "patch"> = { maxPriceCentsPerDollar: "60" };
  return [ceiling, confirmed, blocks, text, clears, usdc, failed.error.code, wrong, notNumber, notString].join(" ");
}
`;

let dir: string | undefined;
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

test("openapi-typescript types from the document compile a chat completion, a video quote and agent/me", async () => {
  const doc = buildOpenApiDocument({
    base: "http://127.0.0.1:8080",
    mcp: "http://127.0.0.1:8080",
    docs: "http://127.0.0.1:8080/docs",
  });
  const types = astToString(await openapiTS(doc as never));
  dir = await mkdtemp(join(tmpdir(), "svc-openapi-"));
  await writeFile(join(dir, "api.ts"), types);
  await writeFile(join(dir, "example.ts"), EXAMPLE);

  const program = ts.createProgram([join(dir, "example.ts")], {
    strict: true,
    noEmit: true,
    noUncheckedIndexedAccess: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
    types: [],
  });
  const diagnostics = ts
    .getPreEmitDiagnostics(program)
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
  expect(diagnostics).toEqual([]);
}, 30_000);
