// Issue 41 deliver 3: one catalog of paid routes feeds /openapi.json's `x-payment-info` (the shape
// x402scan's DISCOVERY.md and @agentcash/discovery read), its 402 responses and payment headers, and
// the /.well-known/x402.json manifest.
import { PaymentInfoSchema } from "@agentcash/discovery";
import { PaymentRequirementsV2Schema } from "@x402/core/schemas";
import { describe, expect, test } from "vitest";
import { x402Manifest as manifestSchema } from "../../../src/contract/discovery.js";
import { buildOpenApiDocument } from "../../../src/contract/openapi.js";
import {
  PAID_ROUTES,
  PAY_PER_REQUEST_MAX_MICRO_USDC,
  PAY_PER_REQUEST_ROUTES,
  paymentInfo,
} from "../../../src/contract/paid-routes.js";
import { x402Manifest } from "../../../src/domain/funding/manifest.js";

const URLS = { base: "https://svc.example", mcp: "https://svc.example", docs: "https://svc.example/docs" };
const NETWORK = { chainId: 84532, asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e" };

interface Operation {
  security?: Record<string, string[]>[];
  parameters?: { $ref: string }[];
  responses: Record<string, { headers?: Record<string, unknown> }>;
  "x-payment-info"?: unknown;
}
const doc = buildOpenApiDocument(URLS, NETWORK) as unknown as {
  info: { contact?: { url?: string }; "x-guidance"?: string };
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown>; parameters: Record<string, { name: string; in: string }> };
};

describe("/openapi.json: every paid operation", () => {
  test.each(PAID_ROUTES.map((r) => [r.id, r] as const))(
    "%s: x-payment-info, a 402, the payment headers",
    (_id, route) => {
      const op = doc.paths[route.path]?.post;
      expect(op, route.path).toBeDefined();
      const info = op?.["x-payment-info"];
      expect(info).toEqual(paymentInfo(route, NETWORK));
      // the structured shape @agentcash/discovery parses (not its legacy flat one)
      const parsed = PaymentInfoSchema.parse(info);
      expect(parsed.price).toEqual({
        mode: "dynamic",
        currency: "USD",
        min: route.scheme === "exact" ? "1.000000" : "0.000000",
        max: "1000.000000",
      });
      expect(parsed.protocols).toEqual([
        {
          x402: {
            scheme: route.scheme,
            x402Versions: route.scheme === "exact" ? [1, 2] : [2],
            network: "eip155:84532",
            asset: NETWORK.asset,
          },
        },
      ]);
      expect(op?.responses["402"]?.headers).toHaveProperty("PAYMENT-REQUIRED");
      // the payment headers are parameters; the security is the caller's credential only
      const params = (op?.parameters ?? []).map((p) => doc.components.parameters[p.$ref.split("/").pop() ?? ""]);
      const names = params.map((p) => `${p?.in} ${p?.name}`);
      expect(names).toEqual(
        route.x402Versions.includes(1)
          ? ["header X-PAYMENT", "header PAYMENT-SIGNATURE"]
          : ["header PAYMENT-SIGNATURE"],
      );
      const security = { anyone: [], session: [{ cookieAuth: [] }], bearer: [{ bearerAuth: [] }] }[route.caller];
      expect(op?.security).toEqual(security);
    },
  );

  test("no payment header is a security scheme; only bearer, cookie and Anthropic's x-api-key are", () => {
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(["anthropicApiKey", "bearerAuth", "cookieAuth"]);
    expect(JSON.stringify(doc)).not.toContain("x402Payment");
  });

  test("no other operation is priced", () => {
    const priced = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => op["x-payment-info"] !== undefined)
        .map(([m]) => `${m} ${path}`),
    );
    expect(priced.sort()).toEqual(PAID_ROUTES.map((r) => `post ${r.path}`).sort());
  });

  test("pay per request: the keyed twin's body, a receipt on the 200, no 401", () => {
    for (const route of PAY_PER_REQUEST_ROUTES) {
      const op = doc.paths[route.path]?.post as Operation & { requestBody: unknown };
      const twin = doc.paths[route.twin ?? ""]?.post as Operation & { requestBody: unknown };
      expect(op.requestBody, route.path).toEqual(twin.requestBody);
      expect(op.responses["200"]?.headers).toHaveProperty("PAYMENT-RESPONSE");
      expect(op.responses["200"]?.headers).not.toHaveProperty("X-Balance-Remaining");
      expect(op.responses).not.toHaveProperty("401");
      expect(op.responses["409"]?.headers).toHaveProperty("PAYMENT-RESPONSE");
    }
  });

  test("info names a contact and carries short guidance for agents", () => {
    expect(doc.info.contact?.url).toBe(URLS.docs);
    expect(doc.info["x-guidance"]?.length).toBeLessThan(4000);
    expect(doc.info["x-guidance"]).toContain("/x402/v1/chat/completions");
  });
});

describe("/.well-known/x402.json", () => {
  const deployment = {
    urls: URLS,
    chain: {
      id: 8453,
      usdcAddress: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      usdcName: "USD Coin",
      usdcVersion: "2",
      payTo: "0x00000000000000000000000000000000000000aa",
    },
  };

  test("x402Version 2, lastUpdated, one item per paid route with advisory accepts and the contract's schemas", () => {
    const m = manifestSchema.strict().parse(x402Manifest(deployment, new Date("2026-12-05T00:00:00Z")));
    expect(m.lastUpdated).toBe(1_796_428_800);
    expect(m.items.map((i) => i.resource.url)).toEqual(PAID_ROUTES.map((r) => `${URLS.base}${r.path}`));
    for (const [i, item] of m.items.entries()) {
      const route = PAID_ROUTES[i];
      if (!route) throw new Error("no route");
      expect(item.resource).toMatchObject({
        description: route.description,
        mimeType: "application/json",
        serviceName: "svc inference marketplace",
        iconUrl: "https://svc.example/docs/assets/favicon.svg",
      });
      expect(item.input).toMatchObject({ method: "POST", bodyType: "json", body: { type: "object" } });
      expect(route.ok.safeParse(item.output.example).success).toBe(true);
      expect(item.accepts).toHaveLength(1);
      const accepted = PaymentRequirementsV2Schema.parse(item.accepts[0]);
      expect(accepted).toMatchObject({ scheme: route.scheme, network: "eip155:8453", payTo: deployment.chain.payTo });
      expect(accepted.amount).toBe(route.scheme === "exact" ? "1000000" : String(PAY_PER_REQUEST_MAX_MICRO_USDC));
    }
  });

  test("without PAY_TO nothing can be paid: the items say how to call, and accept nothing", () => {
    const m = x402Manifest({ ...deployment, chain: { ...deployment.chain, payTo: undefined } }, new Date());
    expect(m.items).toHaveLength(PAID_ROUTES.length);
    for (const item of m.items) expect(item.accepts).toEqual([]);
  });
});
