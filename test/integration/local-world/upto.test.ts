import { PaymentRequirementsV2Schema } from "@x402/core/schemas";
import { PERMIT2_ADDRESS, x402UptoPermit2ProxyABI, x402UptoPermit2ProxyAddress } from "@x402/evm";
import type { Address } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createUptoChainReads } from "../../../src/adapters/chain/upto-reads.js";
import { createChainGateway } from "../../../src/adapters/chain/usdc-gateway.js";
import { uptoAuthorizationOf, uptoRequirementsV2 } from "../../../src/adapters/facilitator/envelopes.js";
import { createLocalFacilitator, type LocalFacilitator } from "../../../src/adapters/facilitator/local.js";
import { settleVerdict, type UptoPayment, type UptoRequirements } from "../../../src/adapters/facilitator/types.js";
import {
  BASE_USDC_ADDRESS,
  compileUsdc,
  type LocalChain,
  localUsdcAbi,
  startLocalChain,
} from "../../../src/local/chain/index.js";
import { chainGateway, usdcBalance } from "../../../testkit/funding.js";
import { signUptoPayment, uptoRequirements } from "../../../testkit/upto-payment.js";

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

/** A fresh buyer holding `fundsMicro` USDC; `approve`: it approved Permit2 (the one-time step). */
async function newBuyer(fundsMicro: bigint, approve = true): Promise<PrivateKeyAccount & { key: `0x${string}` }> {
  const key = generatePrivateKey();
  const buyer = privateKeyToAccount(key);
  if (fundsMicro > 0n) await chain.mintUsdc(buyer.address, fundsMicro);
  if (approve) await chain.approvePermit2(key);
  return Object.assign(buyer, { key });
}

function requirements(maxMicro: bigint, to: Address = payTo): UptoRequirements {
  return uptoRequirements({
    usdcAddress: chain.usdcAddress,
    payTo: to,
    maxMicro,
    facilitatorAddress: facilitator.address,
  });
}

function okValue<T>(r: { ok: true; value: T } | { ok: false; failure: unknown }): T {
  if (!r.ok) throw new Error(`expected ok, got ${JSON.stringify(r.failure)}`);
  return r.value;
}

describe("the local chain's Permit2 and upto proxy", () => {
  test("sit at the canonical addresses with the ABI @x402/evm calls", async () => {
    const artifact = await compileUsdc();
    const signature = (item: unknown) => {
      const i = item as { type: string; name?: string; inputs?: { type: string; components?: unknown[] }[] };
      const t = (x: { type: string; components?: unknown[] }): string =>
        x.components ? `(${(x.components as { type: string }[]).map(t).join(",")})${x.type.slice(5)}` : x.type;
      return `${i.type} ${i.name ?? ""}(${(i.inputs ?? []).map(t).join(",")})`;
    };
    const ours = new Set(artifact.uptoProxyAbi.map(signature));
    // every function, event and error @x402/evm knows, but the real proxy's constructor check
    // (ours has Permit2's address as a constant)
    const theirs = x402UptoPermit2ProxyABI.filter((i) => i.name !== "InvalidPermit2Address");
    expect(theirs.length).toBeGreaterThan(10);
    for (const item of theirs) expect(ours).toContain(signature(item));

    const client = chainGateway(chain).publicClient;
    expect(await client.getCode({ address: PERMIT2_ADDRESS })).toBe(artifact.permit2Code);
    expect(await client.getCode({ address: x402UptoPermit2ProxyAddress })).toBe(artifact.uptoProxyCode);
    const permit2 = await client.readContract({
      address: x402UptoPermit2ProxyAddress,
      abi: x402UptoPermit2ProxyABI,
      functionName: "PERMIT2",
    });
    expect(permit2).toBe(PERMIT2_ADDRESS);
  });

  test("supported() lists upto with the facilitator's address", async () => {
    const s = okValue(await facilitator.supported());
    expect(s.kinds).toContainEqual({
      x402Version: 2,
      scheme: "upto",
      network: "eip155:8453",
      extra: { facilitatorAddress: facilitator.address },
    });
  });
});

describe("local facilitator: upto", () => {
  test("signed for M, verify ok, settle C < M moves exactly C; the nonce is spent and the replay refused", async () => {
    const buyer = await newBuyer(5_000_000n);
    const payment = await signUptoPayment(buyer, requirements(2_000_000n));
    expect(PaymentRequirementsV2Schema.parse(uptoRequirementsV2(payment.requirements)).scheme).toBe("upto");
    const facts = uptoAuthorizationOf(payment.payload);
    if (facts === undefined) throw new Error("no upto authorization");
    expect(facts).toMatchObject({ payer: buyer.address, maxAmount: 2_000_000n, payTo });
    const reads = createUptoChainReads(chainGateway(chain));
    expect(await reads.isPermit2NonceUsed(buyer.address, facts.nonce)).toEqual({ ok: true, value: false });

    expect(await facilitator.verifyUpto(payment)).toEqual({ ok: true, value: { payer: buyer.address } });
    const payToBefore = await usdcBalance(chain, payTo);
    const settled = okValue(await facilitator.settleUpto(payment, 1_234_567n));
    expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(settled.response).toMatchObject({ success: true, network: "eip155:8453", payer: buyer.address });
    expect(await usdcBalance(chain, buyer.address)).toBe(5_000_000n - 1_234_567n);
    expect(await usdcBalance(chain, payTo)).toBe(payToBefore + 1_234_567n);

    // the chain reads that reconcile an unknown settle
    expect(await reads.isPermit2NonceUsed(buyer.address, facts.nonce)).toEqual({ ok: true, value: true });
    const inTx = okValue(await reads.getUptoSettlementInTx(settled.transaction as `0x${string}`, buyer.address, payTo));
    expect(inTx).toMatchObject({
      status: "success",
      movedMicroUsdc: 1_234_567n,
      call: { owner: buyer.address, nonce: facts.nonce, amountMicroUsdc: 1_234_567n, payTo },
    });
    const found = okValue(
      await reads.findUptoSettlements({ from: buyer.address, to: payTo, fromBlock: 0n, toBlock: inTx.blockNumber }),
    );
    expect(found.map((s) => [s.txHash, s.movedMicroUsdc, s.call?.nonce])).toEqual([
      [settled.transaction, 1_234_567n, facts.nonce],
    ]);

    // the same payload again: refused, nothing moves
    const again = await facilitator.verifyUpto(payment);
    expect(again).toMatchObject({ ok: false, failure: { kind: "invalid", reason: "permit2_invalid_nonce" } });
    const resettled = await facilitator.settleUpto(payment, 1n);
    if (resettled.ok) throw new Error("a replayed upto payment settled");
    expect(resettled.failure.reason).toBe("permit2_invalid_nonce");
    expect(settleVerdict(resettled.failure)).toBe("refused");
    expect(await usdcBalance(chain, buyer.address)).toBe(5_000_000n - 1_234_567n);
  });

  test("the same payment settled twice at once, for different amounts: one lands, the other is refused", async () => {
    const buyer = await newBuyer(3_000_000n);
    const payment = await signUptoPayment(buyer, requirements(2_000_000n));
    const before = await usdcBalance(chain, payTo);
    const results = await Promise.all([
      facilitator.settleUpto(payment, 700_000n),
      facilitator.settleUpto(payment, 1_900_000n),
    ]);
    const won = results.findIndex((r) => r.ok);
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    const lost = results[1 - won];
    if (lost === undefined || lost.ok) throw new Error("both settled");
    expect(settleVerdict(lost.failure)).toBe("refused");
    expect(lost.failure.reason).toBe("permit2_invalid_nonce");
    const moved = won === 0 ? 700_000n : 1_900_000n;
    expect(await usdcBalance(chain, payTo)).toBe(before + moved);
    expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n - moved);
  });

  test("distinct payments of one buyer and of several, settled at once, all land", async () => {
    const buyers = await Promise.all([newBuyer(2_000_000n), newBuyer(2_000_000n), newBuyer(2_000_000n)]);
    const [first] = buyers;
    if (first === undefined) throw new Error("no buyer");
    const payments = await Promise.all([
      ...buyers.map((b) => signUptoPayment(b, requirements(1_000_000n))),
      signUptoPayment(first, requirements(1_000_000n)),
    ]);
    const before = await usdcBalance(chain, payTo);
    const results = await Promise.all(payments.map((p, i) => facilitator.settleUpto(p, 100_000n * BigInt(i + 1))));
    expect(results.map((r) => r.ok)).toEqual([true, true, true, true]);
    expect(await usdcBalance(chain, payTo)).toBe(before + 1_000_000n);
    expect(await usdcBalance(chain, first.address)).toBe(2_000_000n - 100_000n - 400_000n);
  });

  test("settle of the full maximum, and of 0 (nothing sent, nonce left unspent)", async () => {
    const buyer = await newBuyer(3_000_000n);
    const full = await signUptoPayment(buyer, requirements(1_000_000n));
    okValue(await facilitator.settleUpto(full, 1_000_000n));
    expect(await usdcBalance(chain, buyer.address)).toBe(2_000_000n);

    const zero = await signUptoPayment(buyer, requirements(1_000_000n));
    const blockBefore = await chainGateway(chain).publicClient.getBlockNumber({ cacheTime: 0 });
    const settled = okValue(await facilitator.settleUpto(zero, 0n));
    expect(settled).toEqual({
      transaction: "",
      payer: buyer.address,
      network: "eip155:8453",
      response: { success: true, transaction: "", network: "eip155:8453", payer: buyer.address, amount: "0" },
    });
    expect(await chainGateway(chain).publicClient.getBlockNumber({ cacheTime: 0 })).toBe(blockBefore);
    expect(await usdcBalance(chain, buyer.address)).toBe(2_000_000n);
    const nonce = uptoAuthorizationOf(zero.payload)?.nonce ?? -1n;
    expect(okValue(await createUptoChainReads(chainGateway(chain)).isPermit2NonceUsed(buyer.address, nonce))).toBe(
      false,
    );
  });

  test("more than the maximum is refused before anything is sent", async () => {
    const buyer = await newBuyer(3_000_000n);
    const payment = await signUptoPayment(buyer, requirements(1_000_000n));
    const over = await facilitator.settleUpto(payment, 1_000_001n);
    expect(over).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "invalid_upto_evm_payload_settlement_exceeds_amount", payer: buyer.address },
    });
    expect(await facilitator.settleUpto(payment, -1n)).toMatchObject({ ok: false, failure: { kind: "invalid" } });
    expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);
    // the payment is still good for up to its maximum
    okValue(await facilitator.settleUpto(payment, 1_000_000n));
    expect(await usdcBalance(chain, buyer.address)).toBe(2_000_000n);
  });

  test("wrong payTo, another maximum, another chain: invalid, nothing moves", async () => {
    const buyer = await newBuyer(3_000_000n);
    const payment = await signUptoPayment(buyer, requirements(1_000_000n));
    const other = chain.devAccounts[3]?.address as Address;
    const cases: [UptoPayment, string][] = [
      [{ ...payment, requirements: requirements(1_000_000n, other) }, "invalid_permit2_recipient_mismatch"],
      [{ ...payment, requirements: requirements(900_000n) }, "permit2_amount_mismatch"],
      [{ ...payment, requirements: { ...payment.requirements, chainId: 84532 } }, "invalid_upto_evm_network_mismatch"],
    ];
    for (const [p, reason] of cases) {
      expect(await facilitator.verifyUpto(p)).toMatchObject({ ok: false, failure: { kind: "invalid", reason } });
      const s = await facilitator.settleUpto(p, 500_000n);
      expect(s).toMatchObject({ ok: false, failure: { kind: "invalid", reason } });
    }
    expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);
  });

  test("a witness naming another facilitator is refused; the proxy refuses any other caller", async () => {
    const buyer = await newBuyer(3_000_000n);
    const stranger = privateKeyToAccount(generatePrivateKey()).address;
    const req = {
      ...requirements(1_000_000n),
      extra: { name: "USD Coin", version: "2", facilitatorAddress: stranger },
    };
    const payment = await signUptoPayment(buyer, req);
    expect(await facilitator.verifyUpto(payment)).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "upto_facilitator_mismatch" },
    });
    expect(await facilitator.settleUpto(payment, 1n)).toMatchObject({ ok: false, failure: { kind: "invalid" } });
    expect(await usdcBalance(chain, buyer.address)).toBe(3_000_000n);

    // on chain: a payment naming this facilitator, settled by anyone else, reverts
    const ours = await signUptoPayment(buyer, requirements(1_000_000n));
    const facts = uptoAuthorizationOf(ours.payload);
    if (facts === undefined) throw new Error("no upto authorization");
    const args = [
      { permitted: { token: facts.token, amount: facts.maxAmount }, nonce: facts.nonce, deadline: facts.deadline },
      1n,
      facts.payer,
      { to: facts.payTo, facilitator: facts.facilitator, validAfter: facts.validAfter },
      facts.signature,
    ] as const;
    const call = (account: Address) =>
      chainGateway(chain).publicClient.simulateContract({
        address: x402UptoPermit2ProxyAddress,
        abi: x402UptoPermit2ProxyABI,
        functionName: "settle",
        args,
        account,
      });
    await expect(call(stranger)).rejects.toThrow(/UnauthorizedFacilitator/);
    await expect(call(facilitator.address)).resolves.toBeDefined();
  });

  test("no Permit2 approval: verify says so; funds short: verify says so", async () => {
    const unapproved = await newBuyer(3_000_000n, false);
    const p1 = await signUptoPayment(unapproved, requirements(1_000_000n));
    expect(await facilitator.verifyUpto(p1)).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "permit2_allowance_required" },
    });
    const poor = await newBuyer(999_999n);
    const p2 = await signUptoPayment(poor, requirements(1_000_000n));
    expect(await facilitator.verifyUpto(p2)).toMatchObject({
      ok: false,
      failure: { kind: "invalid", reason: "permit2_insufficient_balance" },
    });
  });

  test("a fresh wallet with no ETH and no approval pays through EIP-2612 gas sponsoring", async () => {
    const buyer = await newBuyer(3_000_000n, false);
    const payment = await signUptoPayment(buyer, requirements(1_500_000n), { eip2612: true, rpcUrl: chain.rpcUrl });
    expect(payment.payload.extensions?.eip2612GasSponsoring).toMatchObject({
      info: { from: buyer.address, spender: PERMIT2_ADDRESS, amount: "1500000" },
    });
    expect(await facilitator.verifyUpto(payment)).toEqual({ ok: true, value: { payer: buyer.address } });
    const settled = okValue(await facilitator.settleUpto(payment, 700_000n));
    expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await usdcBalance(chain, buyer.address)).toBe(2_300_000n);
    const client = chainGateway(chain).publicClient;
    expect(await client.getBalance({ address: buyer.address })).toBe(0n);
    const allowance = await client.readContract({
      address: chain.usdcAddress,
      abi: localUsdcAbi,
      functionName: "allowance",
      args: [buyer.address, PERMIT2_ADDRESS],
    });
    expect(allowance).toBe(1_500_000n - 700_000n);
  });
});

describe("a default x402 client (spend controls on) and USDC at Base's address", () => {
  let baseChain: LocalChain;
  beforeAll(async () => {
    baseChain = await startLocalChain({ usdcAtBaseAddress: true });
  });
  afterAll(async () => {
    await baseChain?.stop();
  });

  test("pays up to $1 through the local facilitator; a larger maximum is refused by the client", async () => {
    expect(baseChain.usdcAddress).toBe(BASE_USDC_ADDRESS);
    const [, facilitatorAccount, payToAccount] = baseChain.devAccounts;
    if (!facilitatorAccount || !payToAccount) throw new Error("dev accounts missing");
    const f = createLocalFacilitator({
      rpcUrl: baseChain.rpcUrl,
      chainId: baseChain.chainId,
      privateKey: facilitatorAccount.privateKey,
    });
    const key = generatePrivateKey();
    const buyer = privateKeyToAccount(key);
    await baseChain.mintUsdc(buyer.address, 5_000_000n);
    await baseChain.approvePermit2(key);
    const req = (maxMicro: bigint) =>
      uptoRequirements({
        usdcAddress: BASE_USDC_ADDRESS,
        payTo: payToAccount.address,
        maxMicro,
        facilitatorAddress: f.address,
      });

    const payment = await signUptoPayment(buyer, req(1_000_000n), { defaultSpendControls: true });
    okValue(await f.verifyUpto(payment));
    okValue(await f.settleUpto(payment, 420_000n));
    const read = createChainGateway({
      rpcUrl: baseChain.rpcUrl,
      chainId: baseChain.chainId,
      usdcAddress: BASE_USDC_ADDRESS,
    });
    expect(await read.getUsdcBalance(buyer.address)).toEqual({ ok: true, value: 5_000_000n - 420_000n });

    await expect(signUptoPayment(buyer, req(1_000_001n), { defaultSpendControls: true })).rejects.toThrow(
      /maxAmountPerPayment/,
    );
    // the USDC where a plain deploy puts it is no default asset: a default client will not pay it
    await expect(signUptoPayment(buyer, requirements(1_000n), { defaultSpendControls: true })).rejects.toThrow(
      /allowedAssets/,
    );
  });
});
