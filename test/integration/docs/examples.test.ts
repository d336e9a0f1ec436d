import { beforeAll, describe, expect } from "vitest";
import { PUBLIC_DOCUMENTS } from "../../../src/http/docs-site.js";
import { signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import {
  type CurlCall,
  exampleAnnotation,
  fencedBlocks,
  isCurlCommand,
  parseCurl,
  shellCommands,
} from "../../../testkit/doc-examples.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";

/**
 * Every example request in the served documents runs against the local world (upstream simulator
 * + app): each `curl` of every ```sh block, in document order, with the documented variables, must
 * answer 2xx or the status its block is annotated with. A document cannot show a request the
 * service no longer answers that way. Paid x402 calls are TypeScript blocks, run by the agent-path
 * test; a ```sh block marked `<!-- example: skip=… -->` would be listed, not run.
 */

// a settlement address makes the funding routes answer their 402 challenge (no chain is needed for it)
test.override("appOptions", {
  sim: {},
  syncCatalog: true,
  env: { PAY_TO: "0x00000000000000000000000000000000000000aa" },
});
const world = fileWorld(test);

beforeAll(async () => {
  await addSupply(world.app, world.sim, [
    { priceCents: 40, quantityMicroDiem: 200_000_000n },
    { priceCents: 40, quantityMicroDiem: 200_000_000n },
    { priceCents: 55, quantityMicroDiem: 100_000_000n },
    { priceCents: 70, quantityMicroDiem: 100_000_000n },
  ]);
});

/** The variables the documents use, for a fresh buyer and supplier. */
async function documentEnv(): Promise<Record<string, string>> {
  const { app, sim } = world;
  const { apiKey } = await fundedBuyerKey(app, 50_000_000n);
  // a reference that exists before the document's own chat example runs
  const first = await fetch(`${app.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hello" }] }),
  });
  expect(first.status).toBe(200);
  const supplier = await signIn(app);
  const upstreamKey = `VENICE_INFERENCE_KEY_docs_${crypto.randomUUID().replaceAll("-", "")}`;
  sim.state.addKey({ key: upstreamKey, diemMicro: 50_000_000n });
  return {
    SVC_API_KEY: apiKey,
    SUPPORT_REFERENCE: first.headers.get("x-svc-support-reference") ?? "",
    SVC_SESSION: supplier.cookie.replace(/^svc_session=/, ""),
    UPSTREAM_API_KEY: upstreamKey,
    // the reader's webhook endpoint (SKILL.md section 9): loopback is allowed in local mode
    WEBHOOK_URL: "http://127.0.0.1:9/svc-hook",
  };
}

function field(body: unknown, path: string[]): unknown {
  let v = body;
  for (const p of path) v = v !== null && typeof v === "object" ? (v as Record<string, unknown>)[p] : undefined;
  return v;
}

async function run(call: CurlCall): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(call.url, { method: call.method, headers: call.headers, body: call.body });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** Documents without an example request of their own (MCP.md: client configuration only). */
const NO_REQUESTS = new Set(["MCP.md"]);

describe("the example requests in the documents", () => {
  test.each(PUBLIC_DOCUMENTS.map((d) => ({ file: d.file, path: d.paths[0] as string })))(
    "$file: each runs and answers as documented",
    async ({ file, path }) => {
      const { app } = world;
      const doc = await fetch(`${app.baseUrl}${path}`);
      expect(doc.status).toBe(200);
      const env = await documentEnv();
      let executed = 0;
      for (const block of fencedBlocks(await doc.text())) {
        if (!["sh", "bash", "shell"].includes(block.lang)) continue;
        const note = exampleAnnotation(block);
        const curls = shellCommands(block.code).filter(isCurlCommand);
        if (note.skip !== undefined) continue;
        for (const command of curls) {
          const call = parseCurl(command, env);
          const where = `${file}:${block.line} ${call.method} ${call.url}`;
          expect(new URL(call.url).origin, where).toBe(new URL(app.baseUrl).origin);
          const res = await run(call);
          const said = `${where} → ${res.status} ${res.text.slice(0, 400)}`;
          if (note.expectStatus !== undefined) expect(res.status, said).toBe(note.expectStatus);
          else expect(res.status >= 200 && res.status < 300, said).toBe(true);
          // the documents take $SUPPORT_REFERENCE from the last answer that carried one
          const ref = res.headers.get("x-svc-support-reference");
          if (ref) env.SUPPORT_REFERENCE = ref;
          if (call.capture) {
            const value = field(JSON.parse(res.text), call.capture.path);
            expect(typeof value === "string" || typeof value === "number", `${said}: no ${call.capture.path}`).toBe(
              true,
            );
            env[call.capture.variable] = String(value);
          }
          executed++;
        }
      }
      if (NO_REQUESTS.has(file)) expect(executed).toBe(0);
      else expect(executed, `${file} shows no example request`).toBeGreaterThan(0);
    },
  );
});
