// Issues 29 and 41: the Bazaar discovery extension of every paid route's 402 is what @x402/extensions'
// own facilitator-side functions accept, its schemas are the ones /openapi.json documents, the
// service metadata survives the Bazaar's sanitizer, and the v1 challenge's `outputSchema` is what
// x402 v1 discovery reads.
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  extractDiscoveryInfo,
  extractDiscoveryInfoV1,
  sanitizeResourceServiceMetadata,
  validateDiscoveryExtension,
  validateDiscoveryExtensionSpec,
} from "@x402/extensions/bazaar";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { inlineRefs, type JsonSchema } from "../../../src/contract/json-schema.js";
import { buildOpenApiDocument } from "../../../src/contract/openapi.js";
import {
  PAID_ROUTES,
  PAY_PER_REQUEST_ROUTES,
  type PaidRouteId,
  paidRoute,
  SERVICE_TAGS,
} from "../../../src/contract/paid-routes.js";
import {
  bazaarExtension,
  resourceOf,
  serviceMetadata,
  v1OutputSchema,
  x402Discovery,
} from "../../../src/domain/funding/discovery.js";

const URLS = { base: "https://svc.example", mcp: "https://svc.example", docs: "https://svc.example/docs" };
const IDS = PAID_ROUTES.map((r) => r.id);
const FUNDING = PAID_ROUTES.filter((r) => r.scheme === "exact").map((r) => r.id);
const PAY_PER_REQUEST = PAY_PER_REQUEST_ROUTES.map((r) => r.id);

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

/** What /openapi.json says of a paid route: its JSON request body and 200 body, refs inlined. */
function documented(id: PaidRouteId): { body: unknown; ok: unknown } {
  const op = doc.paths[paidRoute(id).path]?.post;
  const json = (m: MediaSchema | undefined) =>
    inlineRefs(m?.content["application/json"]?.schema, doc.components.schemas);
  return { body: json(op?.requestBody), ok: json(op?.responses["200"]) };
}

describe("bazaarExtension", () => {
  // the package's validator (ajv, not strict) warns of each `format` it has no checker for (OpenAPI's
  // `int64`, `uuid`…; ajv-formats is not loaded). Those notices, and nothing else, are expected.
  let warn: ReturnType<typeof vi.spyOn>;
  beforeEach(() => {
    warn = vi.spyOn(console, "warn").mockImplementation(() => {});
  });
  afterEach(() => {
    for (const [message] of warn.mock.calls) expect(String(message)).toMatch(/^unknown format "[\w-]+" ignored/);
    warn.mockRestore();
  });

  test.each(IDS)("%s: @x402/extensions validates it, as a facilitator and against the Bazaar spec", (id) => {
    const { bazaar } = bazaarExtension(id);
    expect(validateDiscoveryExtension(bazaar)).toEqual({ valid: true });
    expect(validateDiscoveryExtensionSpec(bazaar as unknown as Record<string, unknown>)).toEqual({ valid: true });
    expect(bazaar.info.input).toMatchObject({ type: "http", method: "POST", bodyType: "json" });
    expect(bazaar.schema.properties.input.properties.method).toEqual({ type: "string", enum: ["POST"] });

    // what a facilitator catalogs from a v2 payment that echoes the 402's resource and extensions
    const route = paidRoute(id);
    const resource = resourceOf(route, URLS.base, serviceMetadata(URLS.docs));
    const accepted = {
      scheme: route.scheme,
      network: "eip155:8453",
      amount: "5000000",
      asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      payTo: "0x00000000000000000000000000000000000000aa",
      maxTimeoutSeconds: 60,
      extra: { name: "USD Coin", version: "2" },
    } satisfies PaymentRequirements;
    const payload: PaymentPayload = {
      x402Version: 2,
      resource,
      accepted,
      payload: {},
      extensions: bazaarExtension(id),
    };
    const found = extractDiscoveryInfo(payload, accepted);
    expect(found).toMatchObject({
      resourceUrl: `${URLS.base}${route.path}`,
      method: "POST",
      x402Version: 2,
      serviceName: "svc inference marketplace",
      tags: [...SERVICE_TAGS],
      iconUrl: "https://svc.example/docs/assets/favicon.svg",
    });
    expect(found?.discoveryInfo).toEqual(bazaar.info);
  });

  test.each(FUNDING)("%s: the input and output schemas are /openapi.json's body and 200 schemas", (id) => {
    const { bazaar } = bazaarExtension(id);
    const { body, ok } = documented(id);
    expect(body).toMatchObject({ type: "object", required: ["amountMicroUsdc"] });
    // the request body has no nullable field: the same schema word for word
    expect(bazaar.schema.properties.input.properties.body).toEqual(body);
    // the 200 body: the same, with OpenAPI 3.0's `nullable` in JSON Schema's words
    expect(bazaar.schema.properties.output?.properties?.example).toEqual(as2020(ok));
  });

  // the inference schemas use more of OpenAPI 3.0's `nullable` than `as2020` rewrites (bare
  // `{nullable: true}`): the same fields, the same required ones, the same 200 fields
  test.each(PAY_PER_REQUEST)("%s: the input and output fields are /openapi.json's body and 200 fields", (id) => {
    const { bazaar } = bazaarExtension(id);
    const { body, ok } = documented(id) as { body: JsonSchema; ok: JsonSchema };
    const input = bazaar.schema.properties.input.properties.body as JsonSchema;
    const output = bazaar.schema.properties.output?.properties?.example as JsonSchema;
    expect(Object.keys(input.properties as object)).toEqual(Object.keys(body.properties as object));
    expect(input.required).toEqual(body.required);
    expect(Object.keys(output.properties as object)).toEqual(Object.keys(ok.properties as object));
    expect(output.required).toEqual(ok.required);
  });

  test("the funding input fields are the route's body fields; the 200's nullable field is rewritten", () => {
    const fields = (id: PaidRouteId) =>
      Object.keys(
        (bazaarExtension(id).bazaar.schema.properties.input.properties.body as { properties: object }).properties,
      );
    expect(fields("signup")).toEqual(["amountMicroUsdc", "keyName", "maxPriceCentsPerDollar"]);
    expect(fields("top_up")).toEqual(["amountMicroUsdc"]);
    expect(fields("refill")).toEqual(["amountMicroUsdc"]);
    expect(JSON.stringify(documented("signup").ok)).toContain('"nullable":true'); // `transaction`
  });

  test.each(IDS)("%s: the examples satisfy the contract the route parses and answers with", (id) => {
    const { bazaar } = bazaarExtension(id);
    const route = paidRoute(id);
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

describe("service metadata on `resource`", () => {
  test("name, tags and icon survive the Bazaar's own sanitizer unchanged", () => {
    const service = serviceMetadata(URLS.docs);
    expect(service.iconUrl).toBe("https://svc.example/docs/assets/favicon.svg");
    const resource = resourceOf(paidRoute("signup"), URLS.base, service);
    expect(sanitizeResourceServiceMetadata(resource)).toEqual(service);
  });

  test("a docs site on a loopback or IP address publishes no icon (the Bazaar would drop it)", () => {
    for (const docs of ["http://127.0.0.1:8080/docs", "http://localhost:8080/docs"]) {
      const service = serviceMetadata(docs);
      expect(service).not.toHaveProperty("iconUrl");
      expect(sanitizeResourceServiceMetadata({ url: docs, ...service })).toEqual(service);
    }
  });
});

describe("v1OutputSchema", () => {
  test.each(IDS)("%s: x402 v1 discovery reads the POST, its JSON body fields and the 200's schema", (id) => {
    const route = paidRoute(id);
    const requirement = {
      scheme: "exact",
      network: "base",
      maxAmountRequired: "5000000",
      resource: `${URLS.base}${route.path}`,
      description: route.description,
      mimeType: "application/json",
      payTo: "0x00000000000000000000000000000000000000aa",
      maxTimeoutSeconds: 300,
      asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      outputSchema: v1OutputSchema(id),
      extra: { name: "USD Coin", version: "2" },
    };
    const info = extractDiscoveryInfoV1(requirement as never);
    if (!info) throw new Error("not discoverable");
    const body = bazaarExtension(id).bazaar.schema.properties.input.properties.body as {
      properties: Record<string, unknown>;
      required?: string[];
    };
    expect(info.input).toMatchObject({ type: "http", method: "POST", bodyType: "json" });
    const fields = (info.input as { body: Record<string, { required: boolean }> }).body;
    expect(Object.keys(fields)).toEqual(Object.keys(body.properties));
    for (const [name, field] of Object.entries(fields)) {
      expect(field.required, name).toBe((body.required ?? []).includes(name));
    }
    expect(info.output).toEqual({
      type: "json",
      example: bazaarExtension(id).bazaar.schema.properties.output?.properties?.example,
    });
  });
});

describe("x402Discovery", () => {
  test("lists every paid route as POST <absolute url> and tells an agent both ways to pay", () => {
    const d = x402Discovery(URLS.base);
    expect(d.version).toBe(1);
    expect(d.resources).toEqual([
      "POST https://svc.example/v1/x402/signup",
      "POST https://svc.example/v1/x402/top-up",
      "POST https://svc.example/v1/x402/refill",
      "POST https://svc.example/x402/v1/chat/completions",
      "POST https://svc.example/x402/v1/responses",
      "POST https://svc.example/x402/v1/messages",
      "POST https://svc.example/x402/v1/image/generate",
      "POST https://svc.example/x402/v1/images/generations",
    ]);
    expect(d.instructions).toContain("https://svc.example/v1 ");
    expect(d.instructions).toContain("https://svc.example/x402/v1 ");
    expect(d.instructions).toContain("scheme upto");
    expect(d.instructions).toContain("https://svc.example/SKILL.md");
    expect(d.instructions).toContain("apiKey");
  });
});
