import {
  PaymentPayloadV1Schema,
  PaymentPayloadV2Schema,
  PaymentRequirementsV1Schema,
  PaymentRequirementsV2Schema,
} from "@x402/core/schemas";
import { describe, expect, test } from "vitest";
import {
  uptoAuthorizationOf,
  uptoRequirementsV2,
  v1Network,
  v1Payload,
  v1Requirements,
  v2Network,
  v2Payload,
  v2Requirements,
} from "../../../src/adapters/facilitator/envelopes.js";
import type { ExactPayment, ExactRequirements, UptoRequirements } from "../../../src/adapters/facilitator/types.js";
import { checkUpto } from "../../../src/adapters/facilitator/upto.js";
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

const FACILITATOR = "0x90F79bf6EB2c4f870365E785982E1f101E93b906";
const BUYER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const PROXY = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002";

const upto: UptoRequirements = {
  chainId: 8453,
  maxAmountMicroUsdc: 4_000_000n,
  payTo: PAY_TO,
  asset: USDC,
  resource: "https://svc.example/x402/v1/chat/completions",
  description: "svc pay-per-request inference",
  mimeType: "application/json",
  maxTimeoutSeconds: 300,
  extra: { name: "USD Coin", version: "2", facilitatorAddress: FACILITATOR },
};

/** A v2 upto payload as @x402/evm's client writes it (the signature is not checked here). */
const uptoPayload = (over: { amount?: string; nonce?: string } = {}) =>
  PaymentPayloadV2Schema.parse({
    x402Version: 2,
    resource: { url: upto.resource, description: upto.description, mimeType: upto.mimeType },
    accepted: uptoRequirementsV2(upto),
    payload: {
      signature: `0x${"33".repeat(65)}`,
      permit2Authorization: {
        from: BUYER.toLowerCase(),
        permitted: { token: USDC, amount: over.amount ?? "4000000" },
        spender: PROXY,
        nonce: over.nonce ?? "115792089237316195423570985008687907853269984665640564039457584007913129639935",
        deadline: "1900000000",
        witness: { to: PAY_TO, facilitator: FACILITATOR, validAfter: "0" },
      },
    },
  });

describe("x402 upto envelopes", () => {
  test("the v2 requirement: scheme upto, CAIP-2 network, the maximum as amount, extra as given", () => {
    const r = uptoRequirementsV2(upto);
    expect(PaymentRequirementsV2Schema.parse(r)).toEqual(r);
    expect(r).toEqual({
      scheme: "upto",
      network: "eip155:8453",
      amount: "4000000",
      asset: USDC,
      payTo: PAY_TO,
      maxTimeoutSeconds: 300,
      extra: { name: "USD Coin", version: "2", facilitatorAddress: FACILITATOR },
    });
  });

  test("the payer (checksummed) and the Permit2 nonce (up to 2^256 - 1) come out of the payload", () => {
    expect(uptoAuthorizationOf(uptoPayload())).toMatchObject({
      payer: BUYER,
      nonce: 2n ** 256n - 1n,
      maxAmount: 4_000_000n,
      payTo: PAY_TO,
      facilitator: FACILITATOR,
    });
    expect(uptoAuthorizationOf({ payload: { signature: "0x00", authorization: {} } })).toBeUndefined();
    expect(uptoAuthorizationOf(uptoPayload({ nonce: "-1" }))).toBeUndefined();
    expect(uptoAuthorizationOf(uptoPayload({ nonce: (2n ** 256n).toString() }))).toBeUndefined();
  });

  test("checkUpto: the settle requirement carries the amount to settle; outside 0..max is refused", () => {
    const p = { payload: uptoPayload(), requirements: upto };
    const verify = checkUpto(p);
    expect(verify.ok && verify.requirements.amount).toBe("4000000");
    const settle = checkUpto(p, 1_234n);
    expect(settle.ok && settle.requirements.amount).toBe("1234");
    const full = checkUpto(p, 4_000_000n);
    expect(full.ok && full.requirements.amount).toBe("4000000");
    for (const amount of [4_000_001n, -1n]) {
      expect(checkUpto(p, amount)).toMatchObject({
        ok: false,
        failure: { kind: "invalid", reason: "invalid_upto_evm_payload_settlement_exceeds_amount", payer: BUYER },
      });
    }
    expect(checkUpto({ payload: uptoPayload({ amount: "5000000" }), requirements: upto })).toMatchObject({
      ok: false,
      failure: { reason: "permit2_amount_mismatch" },
    });
    expect(checkUpto({ ...p, requirements: { ...upto, chainId: 84532 } })).toMatchObject({
      ok: false,
      failure: { reason: "invalid_upto_evm_network_mismatch" },
    });
  });
});
