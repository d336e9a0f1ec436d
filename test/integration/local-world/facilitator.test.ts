import { createPublicKey, generateKeyPairSync } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { PaymentPayloadV2Schema, PaymentRequirementsV2Schema } from "@x402/core/schemas";
import { jwtVerify } from "jose";
import { type Address, createTestClient, type Hex, http } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { exact } from "x402/schemes";
import { decodeXPaymentResponse } from "x402/shared";
import { settleResponseHeader } from "x402/types";
import { wrapFetchWithPayment } from "x402-fetch";
import { createCdpAuthHeaders } from "../../../src/adapters/facilitator/cdp-auth.js";
import { v1Requirements } from "../../../src/adapters/facilitator/envelopes.js";
import { createHttpFacilitator } from "../../../src/adapters/facilitator/http.js";
import { createFacilitator } from "../../../src/adapters/facilitator/index.js";
import { createLocalFacilitator, type LocalFacilitator } from "../../../src/adapters/facilitator/local.js";
import type { ExactPayment, ExactRequirements, Facilitator } from "../../../src/adapters/facilitator/types.js";
import { type LocalChain, startLocalChain } from "../../../src/local/chain/index.js";
import { exactPaymentFromWire, exactRequirements, signExactPayment } from "../../../testkit/exact-payment.js";
import { chainGateway, usdcBalance } from "../../../testkit/funding.js";
import { startHttpFacilitator } from "../../../testkit/http-facilitator.js";
import { closedPortUrl, readJson, sendJson, startTestServer, type TestServer } from "../../../testkit/stub-server.js";

let chain: LocalChain;
let facilitator: LocalFacilitator;
let payTo: Address;

beforeAll(async () => {
  chain = await startLocalChain();
  const facilitatorKey = chain.devAccounts[1]?.privateKey;
  const payToAccount = chain.devAccounts[2];
  if (facilitatorKey === undefined || payToAccount === undefined) throw new Error("dev accounts missing");
  payTo = payToAccount.address;
  facilitator = createLocalFacilitator({ rpcUrl: chain.rpcUrl, chainId: chain.chainId, privateKey: facilitatorKey });
});

afterAll(async () => {
  await chain?.stop();
});

/** A fresh buyer key holding `fundsMicro` USDC and no ETH (the facilitator pays gas). */
async function newBuyer(fundsMicro: bigint): Promise<PrivateKeyAccount> {
  const buyer = privateKeyToAccount(generatePrivateKey());
  if (fundsMicro > 0n) await chain.mintUsdc(buyer.address, fundsMicro);
  return buyer;
}

function requirements(amountMicro: bigint, to: Address = payTo): ExactRequirements {
  return exactRequirements({ usdcAddress: chain.usdcAddress, payTo: to, amountMicro });
}

/** Signed by x402 1.2's client (v1, what x402-fetch sends) or @x402/evm's (v2, what @x402/fetch sends). */
function signPayment(buyer: PrivateKeyAccount, req: ExactRequirements, version: 1 | 2 = 1): Promise<ExactPayment> {
  return signExactPayment(buyer, req, version);
}

/** The same payment checked against other requirements. */
const against = (p: ExactPayment, req: ExactRequirements): ExactPayment => ({ ...p, requirements: req });

const VERSIONS = [[1], [2]] as const;

describe("local facilitator: success", () => {
  test.each(VERSIONS)(
    "v%i: verify → valid; settle → mined, balances move exactly, events on chain",
    async (version) => {
      const buyer = await newBuyer(5_000_000n);
      const req = requirements(1_250_000n);
      const payment = await signPayment(buyer, req, version);
      const payToBefore = await usdcBalance(chain, payTo);

      const verified = await facilitator.verify(payment);
      expect(verified).toEqual({ ok: true, value: { payer: buyer.address } });

      const settled = await facilitator.settle(payment);
      if (!settled.ok) throw new Error(JSON.stringify(settled.failure));
      expect(settled.value.payer).toBe(buyer.address);
      expect(settled.value.network).toBe(version === 1 ? "base" : "eip155:8453");
      expect(settled.value.transaction).toMatch(/^0x[0-9a-f]{64}$/);
      expect(settled.value.response).toMatchObject({ success: true, transaction: settled.value.transaction });

      expect(await usdcBalance(chain, buyer.address)).toBe(3_750_000n);
      expect(await usdcBalance(chain, payTo)).toBe(payToBefore + 1_250_000n);

      const g = chainGateway(chain);
      const conf = await g.getConfirmations(settled.value.transaction);
      expect(conf.ok && conf.value).toMatchObject({ status: "success", confirmations: 1 });
      const transfers = await g.getUsdcTransfersInTx(settled.value.transaction);
      expect(transfers.ok && transfers.value).toEqual([
        expect.objectContaining({ from: buyer.address, to: payTo, valueMicroUsdc: 1_250_000n }),
      ]);
      await chain.mine(19);
      const deep = await g.getConfirmations(settled.value.transaction);
      expect(deep.ok && deep.value.confirmations).toBe(20);
    },
  );

  test("a fresh facilitator key funded with setEthBalance settles", async () => {
    const key = generatePrivateKey();
    await chain.setEthBalance(privateKeyToAccount(key).address, 10n ** 18n);
    const fresh = createLocalFacilitator({ rpcUrl: chain.rpcUrl, chainId: chain.chainId, privateKey: key });
    const buyer = await newBuyer(1_000_000n);
    const req = requirements(1_000_000n);
    const settled = await fresh.settle(await signPayment(buyer, req));
    expect(settled.ok).toBe(true);
    expect(await usdcBalance(chain, buyer.address)).toBe(0n);
  });

  test("supported() lists exact on base (v1) and on eip155:8453 (v2), and upto (v2) naming itself", async () => {
    expect(await facilitator.supported()).toEqual({
      ok: true,
      value: {
        kinds: [
          { x402Version: 1, scheme: "exact", network: "base" },
          { x402Version: 2, scheme: "exact", network: "eip155:8453" },
          {
            x402Version: 2,
            scheme: "upto",
            network: "eip155:8453",
            extra: { facilitatorAddress: facilitator.address },
          },
        ],
      },
    });
  });

  test("distinct payments settled concurrently all land (one key, serialised nonces)", async () => {
    const buyers = await Promise.all([newBuyer(1_000_000n), newBuyer(1_000_000n), newBuyer(1_000_000n)]);
    const req = requirements(1_000_000n);
    const payments = await Promise.all(buyers.map((b, i) => signPayment(b, req, i === 1 ? 2 : 1)));
    const before = await usdcBalance(chain, payTo);
    const results = await Promise.all(payments.map((p) => facilitator.settle(p)));
    expect(results.map((r) => r.ok)).toEqual([true, true, true]);
    expect(await usdcBalance(chain, payTo)).toBe(before + 3_000_000n);
  });
});

describe("local facilitator: rejection (failures are data, never thrown)", () => {
  test.each(VERSIONS)("v%i replay: verify says nonce used, settle returns failure data", async (version) => {
    const buyer = await newBuyer(2_000_000n);
    const req = requirements(1_000_000n);
    const payment = await signPayment(buyer, req, version);
    const first = await facilitator.settle(payment);
    expect(first.ok).toBe(true);

    const nonceUsed = { ok: false, failure: { kind: "invalid", reason: "invalid_exact_evm_nonce_already_used" } };
    const again = await facilitator.verify(payment);
    expect(again).toMatchObject(nonceUsed);
    if (!again.ok) expect(again.failure.message).toMatch(/nonce_already_used/);
    expect(await facilitator.settle(payment)).toMatchObject(nonceUsed);
    expect(await usdcBalance(chain, buyer.address)).toBe(1_000_000n);
  });

  test.each([
    [1, 2],
    [2, 1],
  ] as const)("settled as v%i, the same authorization in v%i is refused: nonce used", async (first, other) => {
    const buyer = await newBuyer(2_000_000n);
    const req = requirements(1_000_000n);
    const payment = await signPayment(buyer, req, first);
    expect((await facilitator.settle(payment)).ok).toBe(true);
    const otherEnvelope: ExactPayment = { ...payment, x402Version: other };
    const nonceUsed = { ok: false, failure: { kind: "invalid", reason: "invalid_exact_evm_nonce_already_used" } };
    expect(await facilitator.verify(otherEnvelope)).toMatchObject(nonceUsed);
    expect(await facilitator.settle(otherEnvelope)).toMatchObject(nonceUsed);
    expect(await usdcBalance(chain, buyer.address)).toBe(1_000_000n);
  });

  test("the same payment settled twice at once: exactly one succeeds", async () => {
    const buyer = await newBuyer(1_000_000n);
    const req = requirements(1_000_000n);
    const payment = await signPayment(buyer, req);
    const before = await usdcBalance(chain, payTo);
    const results = await Promise.all([
      facilitator.settle(payment),
      facilitator.settle({ ...payment, x402Version: 2 }),
    ]);
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    const failed = results.find((r) => !r.ok);
    expect(failed?.ok === false && ["invalid", "settle_failed"].includes(failed.failure.kind)).toBe(true);
    expect(await usdcBalance(chain, payTo)).toBe(before + 1_000_000n);
  });

  // @x402/evm's codes: v1 and v2 name a value mismatch differently
  test.each([
    [1, "amount lower than signed", 999_999n, undefined, "invalid_exact_evm_authorization_value"],
    [1, "amount higher than signed", 1_000_001n, undefined, "invalid_exact_evm_authorization_value"],
    [2, "amount lower than signed", 999_999n, undefined, "invalid_exact_evm_payload_authorization_value_mismatch"],
    [2, "amount higher than signed", 1_000_001n, undefined, "invalid_exact_evm_payload_authorization_value_mismatch"],
    [
      1,
      "different payTo",
      1_000_000n,
      "0x000000000000000000000000000000000000dEaD",
      "invalid_exact_evm_recipient_mismatch",
    ],
    [
      2,
      "different payTo",
      1_000_000n,
      "0x000000000000000000000000000000000000dEaD",
      "invalid_exact_evm_recipient_mismatch",
    ],
  ] as const)("v%i, %s → invalid", async (version, _label, requiredMicro, otherPayTo, reason) => {
    const buyer = await newBuyer(5_000_000n);
    const payment = await signPayment(buyer, requirements(1_000_000n), version);
    const p = against(payment, requirements(requiredMicro, otherPayTo ?? payTo));
    expect(await facilitator.verify(p)).toMatchObject({ ok: false, failure: { kind: "invalid", reason } });
    expect(await facilitator.settle(p)).toMatchObject({ ok: false, failure: { kind: "invalid", reason } });
    expect(await usdcBalance(chain, buyer.address)).toBe(5_000_000n);
  });

  test("insufficient funds, tampered signature, wrong network, expired → invalid", async () => {
    const poor = await newBuyer(10n);
    const req = requirements(1_000_000n);
    expect(await facilitator.verify(await signPayment(poor, req, 2))).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "invalid_exact_evm_insufficient_balance" },
    });

    const buyer = await newBuyer(2_000_000n);
    const good = await signPayment(buyer, req);
    const other = await signPayment(await newBuyer(0n), req);
    const forgedResult = await facilitator.settle({ ...good, signature: other.signature });
    expect(forgedResult).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "invalid_exact_evm_signature" },
    });

    // signed for base, presented for base sepolia: not this chain
    for (const version of [1, 2] as const) {
      const sepolia = against({ ...good, x402Version: version }, { ...req, chainId: 84532 });
      expect(await facilitator.verify(sepolia)).toMatchObject({
        ok: false,
        failure: { kind: "invalid", reason: "invalid_exact_evm_network_mismatch" },
      });
    }

    // valid for 3 s: less than the 6 s of margin @x402/evm asks for
    const expired = await signPayment(buyer, { ...req, maxTimeoutSeconds: 3 }, 2);
    expect(await facilitator.settle(expired)).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "invalid_exact_evm_payload_authorization_valid_before" },
    });
    expect(await usdcBalance(chain, buyer.address)).toBe(2_000_000n);
  });

  test.each(VERSIONS)("v%i: RPC down → network failure", async (version) => {
    const down = createLocalFacilitator({
      rpcUrl: await closedPortUrl(),
      chainId: 8453,
      privateKey: generatePrivateKey(),
    });
    const buyer = privateKeyToAccount(generatePrivateKey());
    const payment = await signPayment(buyer, requirements(1_000_000n), version);
    expect(await down.verify(payment)).toMatchObject({ ok: false, failure: { kind: "network" } });
    expect(await down.settle(payment)).toMatchObject({ ok: false, failure: { kind: "network" } });
  });

  test.each(VERSIONS)(
    "v%i: broadcast, no receipt within the wait → unknown with the transaction (money may have moved)",
    async (version) => {
      const slow = createLocalFacilitator({
        rpcUrl: chain.rpcUrl,
        chainId: chain.chainId,
        privateKey: chain.devAccounts[1]?.privateKey ?? "0x",
        settleTimeoutMs: 500,
      });
      const buyer = await newBuyer(1_000_000n);
      const payment = await signPayment(buyer, requirements(1_000_000n), version);
      const anvil = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) });
      await anvil.setAutomine(false);
      let settled: Awaited<ReturnType<LocalFacilitator["settle"]>>;
      try {
        settled = await slow.settle(payment);
      } finally {
        await anvil.mine({ blocks: 1 });
        await anvil.setAutomine(true);
      }
      expect(settled).toMatchObject({
        ok: false,
        failure: { kind: "unknown", transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) },
      });
      // it did move: the chain decides, never a second settle
      expect(await usdcBalance(chain, buyer.address)).toBe(0n);
      if (!settled.ok && settled.failure.transaction) {
        const transfers = await chainGateway(chain).getUsdcTransfersInTx(settled.failure.transaction);
        expect(transfers.ok && transfers.value).toEqual([expect.objectContaining({ from: buyer.address })]);
      }
    },
  );

  test("createFacilitator: local needs a key", () => {
    expect(() => createFacilitator({ url: "local", rpcUrl: chain.rpcUrl, chainId: 8453 })).toThrow(
      /FACILITATOR_PRIVATE_KEY/,
    );
    const local = createFacilitator({
      url: "local",
      rpcUrl: chain.rpcUrl,
      chainId: 8453,
      privateKey: chain.devAccounts[1]?.privateKey,
    });
    expect(local.kind).toBe("local");
    expect(createFacilitator({ url: "http://127.0.0.1:1", rpcUrl: chain.rpcUrl, chainId: 8453 }).kind).toBe("http");
  });
});

describe("x402-fetch buyer client end to end", () => {
  test("402 challenge → signed retry → settled by the local facilitator → 200", async () => {
    const buyer = await newBuyer(3_000_000n);
    const payToBefore = await usdcBalance(chain, payTo);
    let settledTx: Hex | undefined;
    const server = await startTestServer(async (req, res) => {
      const resource = `http://${req.headers.host}${req.url}`;
      const accepts = v1Requirements({ ...requirements(50_000n), resource });
      const header = req.headers["x-payment"];
      if (typeof header !== "string") {
        sendJson(res, 402, { x402Version: 1, error: "X-PAYMENT header is required", accepts: [accepts] });
        return;
      }
      const payment = exactPaymentFromWire({
        x402Version: 1,
        paymentPayload: exact.evm.decodePayment(header),
        paymentRequirements: accepts,
      });
      const verified = await facilitator.verify(payment);
      if (!verified.ok) {
        sendJson(res, 402, { x402Version: 1, error: verified.failure.reason, accepts: [accepts] });
        return;
      }
      const settled = await facilitator.settle(payment);
      if (!settled.ok) {
        sendJson(res, 402, { x402Version: 1, error: settled.failure.reason, accepts: [accepts] });
        return;
      }
      settledTx = settled.value.transaction;
      const receipt = settled.value.response as Parameters<typeof settleResponseHeader>[0];
      sendJson(res, 200, { paid: true }, { "X-PAYMENT-RESPONSE": settleResponseHeader(receipt) });
    });
    try {
      const payingFetch = wrapFetchWithPayment(fetch, buyer, 100_000n);
      const response = await payingFetch(`${server.url}/paid`, { method: "GET" });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ paid: true });
      const receipt = decodeXPaymentResponse(response.headers.get("x-payment-response") ?? "");
      expect(receipt).toMatchObject({ success: true, transaction: settledTx, network: "base", payer: buyer.address });
      expect(await usdcBalance(chain, buyer.address)).toBe(2_950_000n);
      expect(await usdcBalance(chain, payTo)).toBe(payToBefore + 50_000n);
    } finally {
      await server.close();
    }
  });
});

/** A standard x402 facilitator HTTP surface in front of any Facilitator (here: the local one). */
function facilitatorServer(inner: Facilitator, onRequest?: (req: IncomingMessage) => void | Promise<void>) {
  return startTestServer(async (req: IncomingMessage, res: ServerResponse) => {
    await onRequest?.(req);
    if (req.method === "GET" && req.url?.endsWith("/supported")) {
      const r = await inner.supported();
      sendJson(res, r.ok ? 200 : 502, r.ok ? r.value : { error: r.failure.message });
      return;
    }
    const payment = exactPaymentFromWire(await readJson(req));
    if (req.url?.endsWith("/verify")) {
      const r = await inner.verify(payment);
      sendJson(
        res,
        200,
        r.ok
          ? { isValid: true, payer: r.value.payer }
          : { isValid: false, invalidReason: r.failure.reason, payer: r.failure.payer },
      );
      return;
    }
    if (req.url?.endsWith("/settle")) {
      const r = await inner.settle(payment);
      sendJson(
        res,
        200,
        r.ok
          ? r.value.response
          : {
              success: false,
              errorReason: r.failure.reason,
              transaction: r.failure.transaction ?? "",
              network: payment.x402Version === 2 ? "eip155:8453" : "base",
              payer: r.failure.payer,
            },
      );
      return;
    }
    sendJson(res, 404, { error: "not found" });
  });
}

describe("http facilitator client", () => {
  let server: TestServer;
  const seen: { method?: string; url?: string; authorization?: string; body?: unknown }[] = [];

  beforeAll(async () => {
    server = await facilitatorServer(facilitator, (req) => {
      seen.push({ method: req.method, url: req.url, authorization: req.headers.authorization });
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  test("verify, settle, replay and supported through a standard facilitator", async () => {
    const client = createHttpFacilitator({ url: `${server.url}/x402/` });
    const buyer = await newBuyer(2_000_000n);
    const req = requirements(1_500_000n);
    const payment = await signPayment(buyer, req);
    const before = await usdcBalance(chain, payTo);

    expect(await client.verify(payment)).toEqual({ ok: true, value: { payer: buyer.address } });
    const settled = await client.settle(payment);
    if (!settled.ok) throw new Error(JSON.stringify(settled.failure));
    // the local facilitator lists v2: the v1 payment travelled as v2
    expect(settled.value).toMatchObject({ payer: buyer.address, network: "eip155:8453" });
    expect(await usdcBalance(chain, payTo)).toBe(before + 1_500_000n);

    expect(await client.verify(payment)).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "invalid_exact_evm_nonce_already_used", payer: buyer.address },
    });
    expect(await client.settle(payment)).toMatchObject({
      ok: false,
      failure: { kind: "settle_failed", reason: "invalid_exact_evm_nonce_already_used" },
    });
    expect(await client.supported()).toEqual({
      ok: true,
      value: {
        kinds: [
          { x402Version: 1, scheme: "exact", network: "base" },
          { x402Version: 2, scheme: "exact", network: "eip155:8453" },
          {
            x402Version: 2,
            scheme: "upto",
            network: "eip155:8453",
            extra: { facilitatorAddress: facilitator.address },
          },
        ],
      },
    });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual(
      expect.arrayContaining(["POST /x402/verify", "POST /x402/settle", "GET /x402/supported"]),
    );
    // one /supported decided the version for every call after it
    expect(seen.filter((s) => s.url === "/x402/supported")).toHaveLength(2);
  });

  test.each([
    [[1, 2] as const, 2],
    [[1] as const, 1],
  ])("a facilitator listing versions %j is spoken v%i, whichever version the buyer sent", async (versions, spoken) => {
    const standIn = await startHttpFacilitator(chain, { versions });
    try {
      const client = createHttpFacilitator({ url: standIn.url });
      for (const sent of [1, 2] as const) {
        const buyer = await newBuyer(1_000_000n);
        const req = { ...requirements(1_000_000n), resource: "https://svc.example/v1/x402/top-up" };
        const payment = await signPayment(buyer, req, sent);
        expect((await client.verify(payment)).ok).toBe(true);
        const settled = await client.settle(payment);
        if (!settled.ok) throw new Error(JSON.stringify(settled.failure));
        expect(settled.value.network).toBe(spoken === 2 ? "eip155:8453" : "base");
        expect(await usdcBalance(chain, buyer.address)).toBe(0n);
      }
      expect(standIn.supportedCalls).toBe(1);
      expect(standIn.requests.map((r) => r.path)).toEqual(["/verify", "/settle", "/verify", "/settle"]);
      for (const { body } of standIn.requests) {
        const b = body as { x402Version: number; paymentPayload: unknown; paymentRequirements: unknown };
        expect(b.x402Version).toBe(spoken);
        if (spoken === 2) {
          expect(PaymentPayloadV2Schema.safeParse(b.paymentPayload).success).toBe(true);
          expect(PaymentRequirementsV2Schema.safeParse(b.paymentRequirements).success).toBe(true);
          expect(b.paymentRequirements).toEqual({
            scheme: "exact",
            network: "eip155:8453",
            amount: "1000000",
            asset: chain.usdcAddress,
            payTo,
            maxTimeoutSeconds: 300,
            extra: { name: "USD Coin", version: "2" },
          });
          expect(b.paymentPayload).toMatchObject({
            x402Version: 2,
            accepted: b.paymentRequirements,
            resource: { url: "https://svc.example/v1/x402/top-up", mimeType: "application/json" },
            payload: { signature: expect.stringMatching(/^0x/), authorization: { value: "1000000", to: payTo } },
          });
        } else {
          expect(b.paymentRequirements).toMatchObject({
            scheme: "exact",
            network: "base",
            maxAmountRequired: "1000000",
            resource: "https://svc.example/v1/x402/top-up",
          });
          expect(b.paymentPayload).toMatchObject({ x402Version: 1, scheme: "exact", network: "base" });
        }
      }
    } finally {
      await standIn.close();
    }
  });

  test("an unreadable /supported: v1 for that call, asked again on the next", async () => {
    const bodies: { x402Version: number }[] = [];
    let supportedCalls = 0;
    const flaky = await startTestServer(async (req, res) => {
      if (req.url === "/supported") {
        supportedCalls++;
        if (supportedCalls === 1) sendJson(res, 503, { error: "warming up" });
        else sendJson(res, 200, { kinds: [{ x402Version: 2, scheme: "exact", network: "eip155:8453" }] });
        return;
      }
      bodies.push((await readJson(req)) as { x402Version: number });
      sendJson(res, 200, { isValid: false, invalidReason: "invalid_exact_evm_signature" });
    });
    try {
      const client = createHttpFacilitator({ url: flaky.url });
      const payment = await signPayment(privateKeyToAccount(generatePrivateKey()), requirements(1_000_000n));
      for (let i = 0; i < 3; i++) {
        expect(await client.verify(payment)).toMatchObject({ ok: false, failure: { kind: "invalid" } });
      }
      expect(bodies.map((b) => b.x402Version)).toEqual([1, 2, 2]);
      expect(supportedCalls).toBe(2);
    } finally {
      await flaky.close();
    }
  });

  test("closed port → unreachable (verify, settle, supported), no throw", async () => {
    const client = createHttpFacilitator({ url: await closedPortUrl() });
    const payment = await signPayment(privateKeyToAccount(generatePrivateKey()), requirements(1_000_000n));
    for (const r of [await client.verify(payment), await client.settle(payment), await client.supported()]) {
      expect(r).toMatchObject({ ok: false, failure: { kind: "unreachable" } });
    }
  });

  test("verify/supported: non-2xx or unreadable answers → rejected; a silent /settle → unknown", async () => {
    const broken = await startTestServer((req, res) => {
      if (req.url === "/verify") {
        res.writeHead(500, { "content-type": "text/plain" });
        res.end("boom");
      } else if (req.url === "/supported") {
        sendJson(res, 200, { nope: true });
      }
      // /settle: never answers
    });
    try {
      const client = createHttpFacilitator({ url: broken.url, settleTimeoutMs: 300, verifyTimeoutMs: 2_000 });
      const payment = await signPayment(privateKeyToAccount(generatePrivateKey()), requirements(1_000_000n));
      expect(await client.verify(payment)).toMatchObject({
        ok: false,
        failure: { kind: "rejected", status: 500 },
      });
      expect(await client.supported()).toMatchObject({ ok: false, failure: { kind: "rejected", status: 200 } });
      expect(await client.settle(payment)).toMatchObject({ ok: false, failure: { kind: "unknown" } });
    } finally {
      await broken.close();
    }
  });

  test("/settle: only the facilitator's own definite refusal is settle_failed; every other answer is unknown", async () => {
    const tx = `0x${"ab".repeat(32)}`;
    const answers: [number, string, string][] = [
      [502, "text/html", "<h1>502 Bad Gateway</h1>"],
      [504, "application/json", JSON.stringify({ message: "upstream timed out" })],
      [500, "application/json", JSON.stringify({ success: false, errorReason: "invalid_transaction_state" })],
      [200, "application/json", JSON.stringify({ success: false, errorReason: "unexpected_settle_error" })],
      [200, "application/json", JSON.stringify({ success: false, errorReason: "settlement_pending", transaction: tx })],
      [200, "application/json", "{not json"],
      [200, "application/json", JSON.stringify({ success: true, network: "base" })],
      [302, "application/json", JSON.stringify({ success: false, errorReason: "invalid_scheme" })],
      [400, "application/json", JSON.stringify({ success: false, errorReason: "invalid_exact_evm_signature" })],
      [
        200,
        "application/json",
        JSON.stringify({ success: false, errorReason: "invalid_exact_evm_insufficient_balance" }),
      ],
    ];
    let next = 0;
    const server = await startTestServer((req, res) => {
      if (req.url === "/supported") {
        sendJson(res, 200, { kinds: [{ x402Version: 2, scheme: "exact", network: "eip155:8453" }] });
        return;
      }
      const [status, type, body] = answers[next++] ?? [500, "text/plain", "?"];
      res.writeHead(status, { "content-type": type });
      res.end(body);
    });
    try {
      const client = createHttpFacilitator({ url: server.url });
      const payment = await signPayment(privateKeyToAccount(generatePrivateKey()), requirements(1_000_000n));
      const kinds: string[] = [];
      for (let i = 0; i < answers.length; i++) {
        const r = await client.settle(payment);
        kinds.push(r.ok ? "ok" : r.failure.kind);
        if (i === 4) expect(r).toMatchObject({ ok: false, failure: { kind: "unknown", transaction: tx } });
      }
      expect(kinds).toEqual([...Array(8).fill("unknown"), "settle_failed", "settle_failed"]);
    } finally {
      await server.close();
    }
  });

  test("/settle: a connection broken after the request went out is unknown", async () => {
    const server = await startTestServer((req) => {
      req.on("data", () => undefined);
      req.on("end", () => req.socket.destroy());
    });
    try {
      const client = createHttpFacilitator({ url: server.url });
      const payment = await signPayment(privateKeyToAccount(generatePrivateKey()), requirements(1_000_000n));
      expect(await client.settle(payment)).toMatchObject({ ok: false, failure: { kind: "unknown" } });
    } finally {
      await server.close();
    }
  });

  test("CDP auth: ES256 bearer JWT bound to method, host and path", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
    // CDP hands out SEC1 PEMs; env files often carry them with escaped newlines.
    const secret = privateKey.export({ type: "sec1", format: "pem" }).toString().replaceAll("\n", "\\n");
    const keyId = "organizations/org-1/apiKeys/key-1";
    const tokens: string[] = [];
    const authServer = await facilitatorServer(facilitator, (req) => {
      tokens.push(req.headers.authorization ?? "");
    });
    try {
      const client = createHttpFacilitator({
        url: `${authServer.url}/platform/v2/x402`,
        cdpKeyId: keyId,
        cdpKeySecret: secret,
      });
      expect((await client.supported()).ok).toBe(true);
      const buyer = await newBuyer(1_000_000n);
      expect((await client.verify(await signPayment(buyer, requirements(1_000_000n)))).ok).toBe(true);

      const host = new URL(authServer.url).host;
      const expectedUris = [`GET ${host}/platform/v2/x402/supported`, `POST ${host}/platform/v2/x402/verify`];
      expect(tokens).toHaveLength(2);
      for (const [i, header] of tokens.entries()) {
        expect(header).toMatch(/^Bearer /);
        const { payload, protectedHeader } = await jwtVerify(header.slice(7), publicKey, {
          issuer: "cdp",
          audience: "cdp_service",
          subject: keyId,
        });
        expect(protectedHeader).toMatchObject({ alg: "ES256", kid: keyId, typ: "JWT" });
        expect(protectedHeader.nonce).toMatch(/^[0-9a-f]{32}$/);
        expect(payload.uris).toEqual([expectedUris[i]]);
        expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(120);
      }
    } finally {
      await authServer.close();
    }
  });

  test("CDP auth: Ed25519 base64 secrets sign EdDSA; garbage secrets fail at construction", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const jwk = privateKey.export({ format: "jwk" });
    const secret = Buffer.concat([
      Buffer.from(jwk.d ?? "", "base64url"),
      Buffer.from(jwk.x ?? "", "base64url"),
    ]).toString("base64");
    const headers = await createCdpAuthHeaders("key-ed", secret)(
      "POST",
      new URL("https://api.cdp.coinbase.com/platform/v2/x402/settle"),
    );
    const { payload, protectedHeader } = await jwtVerify(
      (headers.Authorization ?? "").slice(7),
      createPublicKey(publicKey.export({ type: "spki", format: "pem" })),
    );
    expect(protectedHeader.alg).toBe("EdDSA");
    expect(payload.uris).toEqual(["POST api.cdp.coinbase.com/platform/v2/x402/settle"]);
    expect(() => createCdpAuthHeaders("k", "not a key")).toThrow(/CDP_API_KEY_SECRET/);
  });
});
