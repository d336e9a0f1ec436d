// Issue 29 deliver 4: the Bazaar discovery extension of the funding 402s is what @x402/extensions'
// own facilitator-side functions accept, and its schemas are the ones /openapi.json documents.
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  extractDiscoveryInfo,
  validateDiscoveryExtension,
  validateDiscoveryExtensionSpec,
} from "@x402/extensions/bazaar";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { FUNDING_ROUTES } from "../../../src/contract/discovery.js";
import type { FundingKind } from "../../../src/contract/funding.js";
import { inlineRefs, type JsonSchema } from "../../../src/contract/json-schema.js";
import { buildOpenApiDocument } from "../../../src/contract/openapi.js";
import { bazaarExtension, x402Discovery } from "../../../src/domain/funding/discovery.js";

const URLS = { base: "https://svc.example", mcp: "https://svc.example", docs: "https://svc.example/docs" };
const KINDS: FundingKind[] = ["signup", "top_up", "refill"];

interface MediaSchema {
  content: Record<string, { schema: unknown }>;
}
const doc = buildOpenApiDocument(URLS) as unknown as {
  paths: Record<string, { post: { requestBody: MediaSchema; responses: Record<string, MediaSchema> } }>;
  components: { schemas: Record<string, unknown> };
};

/** An OpenAPI 3.0 schema in JSON Schema 2020-12's words: `nullable: true` becomes a `null` in `type`. */
function as2020(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(as2020);
  if (node === null || typeof node !== "object") return node;
  const { nullable, ...rest } = node as JsonSchema;
  const out: JsonSchema = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, as2020(v)]));
  if (nullable === true) out.type = [out.type, "null"];
  return out;
}

/** What /openapi.json says of a funding route: its JSON request body and 200 body, refs inlined. */
function documented(kind: FundingKind): { body: unknown; ok: unknown } {
  const op = doc.paths[FUNDING_ROUTES[kind].path]?.post;
  const json = (m: MediaSchema | undefined) =>
    inlineRefs(m?.content["application/json"]?.schema, doc.components.schemas);
  return { body: json(op?.requestBody), ok: json(op?.responses["200"]) };
}

describe("bazaarExtension", () => {
  // the package's validator (ajv, not strict) warns of each `format` it has no checker for: OpenAPI's
  // `int64` and `uuid` (ajv-formats is not loaded). Those notices, and nothing else, are expected.
  let warn: ReturnType<typeof vi.spyOn>;
  beforeEach(() => {
    warn = vi.spyOn(console, "warn").mockImplementation(() => {});
  });
  afterEach(() => {
    for (const [message] of warn.mock.calls) expect(String(message)).toMatch(/^unknown format "(int64|uuid)" ignored/);
    warn.mockRestore();
  });

  test.each(KINDS)("%s: @x402/extensions validates it, as a facilitator and against the Bazaar spec", (kind) => {
    const { bazaar } = bazaarExtension(kind);
    expect(validateDiscoveryExtension(bazaar)).toEqual({ valid: true });
    expect(validateDiscoveryExtensionSpec(bazaar as unknown as Record<string, unknown>)).toEqual({ valid: true });
    expect(bazaar.info.input).toMatchObject({ type: "http", method: "POST", bodyType: "json" });
    expect(bazaar.schema.properties.input.properties.method).toEqual({ type: "string", enum: ["POST"] });

    // what a facilitator catalogs from a v2 payment that echoes the 402's extensions
    const url = `${URLS.base}${FUNDING_ROUTES[kind].path}`;
    const accepted = {
      scheme: "exact",
      network: "eip155:8453",
      amount: "5000000",
      asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      payTo: "0x00000000000000000000000000000000000000aa",
      maxTimeoutSeconds: 60,
      extra: { name: "USD Coin", version: "2" },
    } satisfies PaymentRequirements;
    const payload: PaymentPayload = {
      x402Version: 2,
      resource: { url, description: "funding", mimeType: "application/json" },
      accepted,
      payload: {},
      extensions: bazaarExtension(kind),
    };
    const found = extractDiscoveryInfo(payload, accepted);
    expect(found).toMatchObject({ resourceUrl: url, method: "POST", x402Version: 2 });
    expect(found?.discoveryInfo).toEqual(bazaar.info);
  });

  test.each(KINDS)("%s: the input and output schemas are /openapi.json's body and 200 schemas", (kind) => {
    const { bazaar } = bazaarExtension(kind);
    const { body, ok } = documented(kind);
    expect(body).toMatchObject({ type: "object", required: ["amountMicroUsdc"] });
    // the request body has no nullable field: the same schema word for word
    expect(bazaar.schema.properties.input.properties.body).toEqual(body);
    // the 200 body: the same, with OpenAPI 3.0's `nullable` in JSON Schema's words
    expect(bazaar.schema.properties.output?.properties?.example).toEqual(as2020(ok));
    expect(JSON.stringify(ok)).toContain('"nullable":true'); // `transaction`: the rewrite was exercised
  });

  test("the input fields are the route's body fields", () => {
    const fields = (kind: FundingKind) =>
      Object.keys(
        (bazaarExtension(kind).bazaar.schema.properties.input.properties.body as { properties: object }).properties,
      );
    expect(fields("signup")).toEqual(["amountMicroUsdc", "keyName", "maxPriceCentsPerDollar"]);
    expect(fields("top_up")).toEqual(["amountMicroUsdc"]);
    expect(fields("refill")).toEqual(["amountMicroUsdc"]);
  });

  test.each(KINDS)("%s: the examples satisfy the contract the route parses and answers with", (kind) => {
    const { bazaar } = bazaarExtension(kind);
    const route = FUNDING_ROUTES[kind];
    expect(route.body.safeParse(bazaar.info.input.body).success).toBe(true);
    expect(route.ok.safeParse(bazaar.info.output?.example).success).toBe(true);
  });

  test("the schema is enforced: an example outside it does not validate", () => {
    const { bazaar } = bazaarExtension("signup");
    const bad = structuredClone(bazaar);
    bad.info.input.body = { amountMicroUsdc: 1, keyName: "x".repeat(65) };
    const result = validateDiscoveryExtension(bad);
    expect(result.valid).toBe(false);
    expect(result.errors?.join(" ")).toContain("/input/body/amountMicroUsdc");
    const noTransaction = structuredClone(bazaar);
    (noTransaction.info.output?.example as Record<string, unknown>).transaction = null;
    expect(validateDiscoveryExtension(noTransaction)).toEqual({ valid: true }); // nullable, as the 200 says
  });
});

describe("x402Discovery", () => {
  test("lists the three funding routes as POST <absolute url> and tells an agent what to do", () => {
    const d = x402Discovery(URLS.base);
    expect(d.version).toBe(1);
    expect(d.resources).toEqual([
      "POST https://svc.example/v1/x402/signup",
      "POST https://svc.example/v1/x402/top-up",
      "POST https://svc.example/v1/x402/refill",
    ]);
    expect(d.instructions).toContain("https://svc.example/v1 ");
    expect(d.instructions).toContain("https://svc.example/SKILL.md");
    expect(d.instructions).toContain("apiKey");
  });
});
