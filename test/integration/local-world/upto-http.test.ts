import { PaymentPayloadV2Schema, PaymentRequirementsV2Schema } from "@x402/core/schemas";
import type { Address, Hex } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { createUptoChainReads } from "../../../src/adapters/chain/upto-reads.js";
import { uptoAuthorizationOf } from "../../../src/adapters/facilitator/envelopes.js";
import { createHttpFacilitator, type HttpFacilitator } from "../../../src/adapters/facilitator/http.js";
import { settleVerdict, type UptoPayment } from "../../../src/adapters/facilitator/types.js";
import { type LocalChain, startLocalChain } from "../../../src/local/chain/index.js";
import { chainGateway, usdcBalance } from "../../../testkit/funding.js";
import { type HttpFacilitatorStandIn, startHttpFacilitator } from "../../../testkit/http-facilitator.js";
import { signUptoPayment, uptoRequirements } from "../../../testkit/upto-payment.js";

let chain: LocalChain;
let standIn: HttpFacilitatorStandIn;
let client: HttpFacilitator;
let payTo: Address;

beforeAll(async () => {
  chain = await startLocalChain();
  standIn = await startHttpFacilitator(chain, { versions: [1, 2] });
  client = createHttpFacilitator({ url: standIn.url });
  payTo = chain.devAccounts[2]?.address as Address;
});
afterAll(async () => {
  await standIn?.close();
  await chain?.stop();
});
beforeEach(() => {
  standIn.mode = "honest";
  standIn.requests.length = 0;
});

const reads = () => createUptoChainReads(chainGateway(chain));

/** A fresh buyer with USDC that approved Permit2, and its signed upto payment for `maxMicro`. */
async function paying(fundsMicro: bigint, maxMicro: bigint): Promise<{ buyer: PrivateKeyAccount; p: UptoPayment }> {
  const key = generatePrivateKey();
  const buyer = privateKeyToAccount(key);
  await chain.mintUsdc(buyer.address, fundsMicro);
  await chain.approvePermit2(key);
  const req = uptoRequirements({
    usdcAddress: chain.usdcAddress,
    payTo,
    maxMicro,
    facilitatorAddress: standIn.facilitatorAddress,
  });
  return { buyer, p: await signUptoPayment(buyer, req) };
}

const nonceOf = (p: UptoPayment): bigint => {
  const facts = uptoAuthorizationOf(p.payload);
  if (facts === undefined) throw new Error("no upto authorization");
  return facts.nonce;
};

describe("http facilitator: upto through a standard facilitator", () => {
  test("supported lists upto naming the facilitator", async () => {
    const s = await client.supported();
    expect(s.ok && s.value.kinds).toContainEqual({
      x402Version: 2,
      scheme: "upto",
      network: "eip155:8453",
      extra: { facilitatorAddress: standIn.facilitatorAddress },
    });
  });

  test("verify sends the maximum, settle the actual amount; exactly that moves; a replay is refused", async () => {
    const { buyer, p } = await paying(4_000_000n, 2_500_000n);
    const before = await usdcBalance(chain, payTo);
    expect(await client.verifyUpto(p)).toEqual({ ok: true, value: { payer: buyer.address } });
    const settled = await client.settleUpto(p, 987_654n);
    if (!settled.ok) throw new Error(JSON.stringify(settled.failure));
    expect(settled.value).toMatchObject({ payer: buyer.address, network: "eip155:8453" });
    expect(settled.value.response.amount).toBe("987654");
    expect(await usdcBalance(chain, buyer.address)).toBe(4_000_000n - 987_654n);
    expect(await usdcBalance(chain, payTo)).toBe(before + 987_654n);

    // the wire: x402 v2 bodies, the payload as the buyer sent it, the requirement's amount per call
    const [verifyReq, settleReq] = standIn.requests;
    for (const r of [verifyReq, settleReq]) {
      const body = r?.body as { x402Version: number; paymentPayload: unknown; paymentRequirements: unknown };
      expect(body.x402Version).toBe(2);
      expect(PaymentPayloadV2Schema.parse(body.paymentPayload)).toEqual(p.payload);
    }
    const amountOf = (r: { body: unknown } | undefined) => {
      if (r === undefined) throw new Error("request missing");
      return PaymentRequirementsV2Schema.parse((r.body as { paymentRequirements: unknown }).paymentRequirements);
    };
    expect(amountOf(verifyReq)).toMatchObject({ scheme: "upto", amount: "2500000", network: "eip155:8453" });
    expect(amountOf(settleReq)).toMatchObject({ scheme: "upto", amount: "987654" });

    const replay = await client.settleUpto(p, 1n);
    expect(replay).toMatchObject({ ok: false, failure: { kind: "settle_failed", reason: "permit2_invalid_nonce" } });
    if (!replay.ok) expect(settleVerdict(replay.failure)).toBe("refused");
    expect(await client.verifyUpto(p)).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "permit2_invalid_nonce", payer: buyer.address },
    });
    expect(await usdcBalance(chain, buyer.address)).toBe(4_000_000n - 987_654n);
  });

  test("a settle of 0 asks the facilitator nothing", async () => {
    const { buyer, p } = await paying(1_000_000n, 1_000_000n);
    const calls = standIn.settleCalls;
    const settled = await client.settleUpto(p, 0n);
    expect(settled).toEqual({
      ok: true,
      value: {
        transaction: "",
        payer: buyer.address,
        network: "eip155:8453",
        response: { success: true, transaction: "", network: "eip155:8453", payer: buyer.address, amount: "0" },
      },
    });
    expect(standIn.settleCalls).toBe(calls);
    expect(await reads().isPermit2NonceUsed(buyer.address, nonceOf(p))).toEqual({ ok: true, value: false });
  });

  test("more than the maximum is refused without a request", async () => {
    const { p } = await paying(1_000_000n, 500_000n);
    const calls = standIn.settleCalls;
    expect(await client.settleUpto(p, 500_001n)).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "invalid_upto_evm_payload_settlement_exceeds_amount" },
    });
    expect(standIn.settleCalls).toBe(calls);
  });

  test("settled, then a 502: unknown, and the chain says what moved", async () => {
    const { buyer, p } = await paying(3_000_000n, 2_000_000n);
    standIn.mode = "settle-then-502";
    const r = await client.settleUpto(p, 1_111_111n);
    if (r.ok) throw new Error("a 502 cannot be a success");
    expect(r.failure).toMatchObject({ kind: "unknown", status: 502, payer: buyer.address });
    expect(settleVerdict(r.failure)).toBe("unknown");

    // reconciliation: the nonce is spent, and the settlement moved exactly the amount asked
    expect(await reads().isPermit2NonceUsed(buyer.address, nonceOf(p))).toEqual({ ok: true, value: true });
    const landed = standIn.uptoSettled.at(-1);
    if (!landed?.ok || landed.value.transaction === "") throw new Error("the stand-in did not settle");
    const tx = landed.value.transaction as Hex;
    const inTx = await reads().getUptoSettlementInTx(tx, buyer.address, payTo);
    expect(inTx.ok && inTx.value).toMatchObject({ movedMicroUsdc: 1_111_111n, call: { nonce: nonceOf(p) } });
    const head = await chainGateway(chain).publicClient.getBlockNumber({ cacheTime: 0 });
    const found = await reads().findUptoSettlements({ from: buyer.address, to: payTo, fromBlock: 0n, toBlock: head });
    expect(found.ok && found.value.map((s) => [s.txHash, s.movedMicroUsdc])).toEqual([[tx, 1_111_111n]]);
  });

  test("a 502 with nothing settled: unknown, and the chain shows the nonce unspent", async () => {
    const { buyer, p } = await paying(3_000_000n, 2_000_000n);
    standIn.mode = "502-no-settle";
    const r = await client.settleUpto(p, 1_000_000n);
    expect(r).toMatchObject({ ok: false, failure: { kind: "unknown", status: 502 } });
    expect(await reads().isPermit2NonceUsed(buyer.address, nonceOf(p))).toEqual({ ok: true, value: false });
    expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);
  });

  test("settled, then the connection dropped: unknown", async () => {
    const { buyer, p } = await paying(3_000_000n, 2_000_000n);
    standIn.mode = "settle-then-drop";
    const r = await client.settleUpto(p, 250_000n);
    expect(r).toMatchObject({ ok: false, failure: { kind: "unknown" } });
    expect(await usdcBalance(chain, buyer.address)).toBe(2_750_000n);
  });

  test("the facilitator's own refusal: settle_failed, nothing moved", async () => {
    const { buyer, p } = await paying(3_000_000n, 2_000_000n);
    standIn.mode = "refuse";
    const r = await client.settleUpto(p, 1_000_000n);
    expect(r).toMatchObject({ ok: false, failure: { kind: "settle_failed", reason: "invalid_permit2_signature" } });
    if (!r.ok) expect(settleVerdict(r.failure)).toBe("refused");
    expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);
  });
});
