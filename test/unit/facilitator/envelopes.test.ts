import {
  PaymentPayloadV1Schema,
  PaymentPayloadV2Schema,
  PaymentRequirementsV1Schema,
  PaymentRequirementsV2Schema,
} from "@x402/core/schemas";
import { describe, expect, test } from "vitest";
import {
  v1Network,
  v1Payload,
  v1Requirements,
  v2Network,
  v2Payload,
  v2Requirements,
} from "../../../src/adapters/facilitator/envelopes.js";
import type { ExactPayment, ExactRequirements } from "../../../src/adapters/facilitator/types.js";
import { buildRequirements } from "../../../src/domain/funding/x402.js";

const USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
const PAY_TO = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

const requirements: ExactRequirements = {
  chainId: 8453,
  amountMicroUsdc: 2_500_000n,
  payTo: PAY_TO,
  asset: USDC,
  resource: "https://svc.example/v1/x402/signup",
  description: "svc signup",
  mimeType: "application/json",
  maxTimeoutSeconds: 300,
  extra: { name: "USD Coin", version: "2" },
};

const payment: ExactPayment = {
  x402Version: 2,
  authorization: {
    from: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    to: PAY_TO,
    value: "2500000",
    validAfter: "0",
    validBefore: "1900000000",
    nonce: `0x${"11".repeat(32)}`,
  },
  signature: `0x${"22".repeat(65)}`,
  requirements,
};

describe("x402 envelopes of one payment", () => {
  test("v2: requirements and payload validate against @x402/core's v2 schemas, from the same values", () => {
    const r = v2Requirements(requirements);
    expect(PaymentRequirementsV2Schema.parse(r)).toEqual(r);
    expect(r).toEqual({
      scheme: "exact",
      network: "eip155:8453",
      amount: "2500000",
      asset: USDC,
      payTo: PAY_TO,
      maxTimeoutSeconds: 300,
      extra: { name: "USD Coin", version: "2" },
    });
    const p = v2Payload(payment);
    expect(PaymentPayloadV2Schema.parse(p)).toEqual(p);
    expect(p).toEqual({
      x402Version: 2,
      resource: { url: requirements.resource, description: "svc signup", mimeType: "application/json" },
      accepted: r,
      payload: { signature: payment.signature, authorization: payment.authorization },
    });
  });

  test("v1: the spec's challenge requirement and X-PAYMENT payload, validating against the v1 schemas", () => {
    const r = v1Requirements(requirements);
    expect(PaymentRequirementsV1Schema.parse(r)).toEqual(r);
    expect(r).toMatchObject({ network: "base", maxAmountRequired: "2500000", resource: requirements.resource });
    const p = v1Payload({ ...payment, x402Version: 1 });
    expect(PaymentPayloadV1Schema.parse(p)).toEqual(p);
    expect(p).toEqual({
      x402Version: 1,
      scheme: "exact",
      network: "base",
      payload: { signature: payment.signature, authorization: payment.authorization },
    });
  });

  test("v1 requirements are byte for byte the spec's challenge (the funding 402 writes them)", () => {
    const domain = buildRequirements({
      amountMicroUsdc: requirements.amountMicroUsdc,
      resource: requirements.resource,
      description: requirements.description,
      payTo: PAY_TO,
      asset: USDC,
      usdcName: "USD Coin",
      usdcVersion: "2",
      chainId: 8453,
    });
    expect(JSON.stringify(domain)).toBe(
      JSON.stringify({
        scheme: "exact",
        network: "base",
        maxAmountRequired: requirements.amountMicroUsdc.toString(),
        resource: requirements.resource,
        description: requirements.description,
        mimeType: "application/json",
        payTo: PAY_TO,
        maxTimeoutSeconds: 300,
        asset: USDC,
        extra: { name: "USD Coin", version: "2" },
      }),
    );
    expect(JSON.stringify(v1Requirements(requirements))).toBe(JSON.stringify(domain));
  });

  test("networks: v1 names Base and Base Sepolia only; v2 is CAIP-2", () => {
    expect([v1Network(8453), v1Network(84532), v1Network(1)]).toEqual(["base", "base-sepolia", undefined]);
    expect(v2Network(84532)).toBe("eip155:84532");
    expect(v1Requirements({ ...requirements, chainId: 84532 }).network).toBe("base-sepolia");
    expect(() => v1Requirements({ ...requirements, chainId: 1 })).toThrow(/no network name for chain 1/);
  });
});
