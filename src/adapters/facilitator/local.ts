import { x402Facilitator } from "@x402/core/facilitator";
import type { Network, PaymentPayload, PaymentRequirements, VerifyResponse } from "@x402/core/types";
import { type FacilitatorEvmSigner, PERMIT2_ADDRESS } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { ExactEvmSchemeV1 } from "@x402/evm/exact/v1/facilitator";
import { UptoEvmScheme } from "@x402/evm/upto/facilitator";
import { type Address, getAddress, type Hex, isAddress, isHex } from "viem";
import { type ChainFailure, classifyChainError } from "../chain/chain-errors.js";
import { type ChainWalletClient, createChainClients, createSerialSender } from "../chain/clients.js";
import { permit2NonceBitmapAbi } from "../chain/upto-reads.js";
import { v1Network, v1Payload, v1Requirements, v2Network, v2Payload, v2Requirements } from "./envelopes.js";
import type {
  ExactPayment,
  Facilitator,
  FacilitatorFailure,
  FacilitatorResult,
  SettleOk,
  SettleResponse,
  SupportedOk,
  UptoPayment,
  UptoSettleOk,
  VerifyOk,
} from "./types.js";
import {
  checkUpto,
  namingSpentNonce,
  type SchemeReasons,
  UPTO_NETWORK_MISMATCH,
  UPTO_REASONS,
  zeroSettle,
} from "./upto.js";

export interface LocalFacilitatorOptions {
  rpcUrl: string;
  chainId: number;
  /** FACILITATOR_PRIVATE_KEY: submits `transferWithAuthorization` (exact) and the upto proxy's `settle`, and pays their gas; the upto witness names this address. */
  privateKey: Hex;
  /** Longest wait for a settlement receipt before answering `unknown` (default 60 s). */
  settleTimeoutMs?: number;
}

export interface LocalFacilitator extends Facilitator {
  readonly kind: "local";
  /** The facilitator's own address (needs ETH for gas). */
  readonly address: Address;
}

// @x402/evm's reason codes this adapter produces itself
const NETWORK_MISMATCH = "invalid_exact_evm_network_mismatch";
const NONCE_ALREADY_USED = "invalid_exact_evm_nonce_already_used";
const TRANSACTION_FAILED = "invalid_exact_evm_transaction_failed";

const EXACT_REASONS: SchemeReasons = {
  transactionFailed: TRANSACTION_FAILED,
  nonceUsed: (m) => (/authorization is used or canceled/i.test(m) ? NONCE_ALREADY_USED : undefined),
};

/** What the chain calls of one verify or settle did, for judging an outcome @x402/evm reports as data. */
interface ChainTrace {
  /** a transaction send was attempted (`writeContract` / `sendTransaction` called) */
  sendStarted: boolean;
  /** the broadcast transaction, once the node accepted it */
  broadcast?: Hex;
  /** the settlement receipt's status, once one was read */
  receiptStatus?: string;
  /** the last chain call that threw */
  lastError?: ChainFailure;
  /** a chain call failed because the RPC was unreachable or timed out */
  unreachable?: ChainFailure;
}

const newTrace = (): ChainTrace => ({ sendStarted: false });

const isUnreachable = (f: ChainFailure | undefined): boolean => f?.kind === "network" || f?.kind === "timeout";

const UINT_STRING = /^\d{1,78}$/;

function invalid(reason: string, message: string, payer?: Address): { ok: false; failure: FacilitatorFailure } {
  return { ok: false, failure: { kind: "invalid", reason, message, ...(payer ? { payer } : {}) } };
}

/**
 * In-process x402 facilitator (`FACILITATOR_URL=local`): @x402/core's `x402Facilitator` with
 * @x402/evm's `exact` schemes for both versions (v2 on `eip155:<chainId>`, v1 on the chain's v1
 * name), which check the signature, recipient, exact value, time window, the asset, and — by
 * simulating the transfer, also before settling — the nonce (unused) and the balance. Each call
 * runs on a signer of its own that broadcasts one transaction at a time from this key, bounds the
 * receipt wait and records what the chain did, so an outcome @x402/evm reports only as a reason
 * (or an exception) is judged by what happened: nothing sent, reverted, or possibly moved.
 * Besides: a payment for another chain than this one is `invalid` (the EIP-712 domain's chain id
 * follows the network name), and malformed fields are `invalid_payload`. Throws nothing.
 *
 * `upto` (x402 v2): @x402/evm's upto scheme beside `exact`, judged the same way. It checks the
 * Permit2 witness signature, spender (the x402 upto proxy), payTo, that the witness names this
 * facilitator, the time window, the maximum, and simulates settling the maximum (balance,
 * Permit2 allowance, unspent nonce); a settle sends the proxy's `settle(amount)`. A settle of 0
 * sends nothing (`zeroSettle`). `supported()` lists upto with `extra.facilitatorAddress`, which
 * a 402's upto requirement must carry for the buyer to sign.
 */
export function createLocalFacilitator(opts: LocalFacilitatorOptions): LocalFacilitator {
  const { walletClient } = createChainClients({
    rpcUrl: opts.rpcUrl,
    chainId: opts.chainId,
    privateKey: opts.privateKey,
  });
  if (walletClient === undefined) throw new Error("local facilitator: wallet client missing");
  const wallet: ChainWalletClient = walletClient;
  const settleTimeoutMs = opts.settleTimeoutMs ?? 60_000;
  const sendSerially = createSerialSender();
  const v1Name = v1Network(opts.chainId);

  /** A FacilitatorEvmSigner on our wallet that writes what it does into `trace`. */
  function tracedSigner(trace: ChainTrace): FacilitatorEvmSigner {
    const noted = async <T>(call: () => Promise<T>): Promise<T> => {
      try {
        return await call();
      } catch (error) {
        const failure = classifyChainError(error);
        trace.lastError = failure;
        if (isUnreachable(failure)) trace.unreachable ??= failure;
        throw error;
      }
    };
    return {
      getAddresses: () => [wallet.account.address],
      readContract: (args) =>
        noted(() => wallet.readContract(args as Parameters<ChainWalletClient["readContract"]>[0])),
      verifyTypedData: (args) =>
        noted(() => wallet.verifyTypedData(args as Parameters<ChainWalletClient["verifyTypedData"]>[0])),
      getCode: (args) => noted(() => wallet.getCode(args)),
      writeContract: (args) => {
        trace.sendStarted = true;
        return noted(async () => {
          const hash = await sendSerially(() =>
            wallet.writeContract(args as Parameters<ChainWalletClient["writeContract"]>[0]),
          );
          trace.broadcast = hash;
          return hash;
        });
      },
      sendTransaction: (args) => {
        trace.sendStarted = true;
        return noted(async () => {
          const hash = await sendSerially(() => wallet.sendTransaction({ to: args.to, data: args.data }));
          trace.broadcast = hash;
          return hash;
        });
      },
      waitForTransactionReceipt: ({ hash }) =>
        noted(async () => {
          const receipt = await wallet.waitForTransactionReceipt({ hash, timeout: settleTimeoutMs });
          trace.receiptStatus = receipt.status;
          return receipt;
        }),
    };
  }

  /** One x402 facilitator per call: its schemes sign with that call's traced signer. */
  function facilitatorFor(trace: ChainTrace): x402Facilitator {
    const signer = tracedSigner(trace);
    const f = new x402Facilitator().register(
      v2Network(opts.chainId),
      new ExactEvmScheme(signer, { simulateInSettle: true }),
    );
    f.register(v2Network(opts.chainId), new UptoEvmScheme(signer));
    // registerV1 is typed with v2's CAIP-2 names; v1 registers its own (`base`)
    if (v1Name !== undefined) f.registerV1(v1Name as Network, new ExactEvmSchemeV1(signer, { simulateInSettle: true }));
    return f;
  }

  /** The payment in the envelope the buyer sent, or why it cannot be checked at all. */
  function envelopesOf(
    p: ExactPayment,
  ):
    | { ok: true; payer: Address; payload: PaymentPayload; requirements: PaymentRequirements }
    | { ok: false; failure: FacilitatorFailure } {
    const a = p.authorization;
    if (!isAddress(a.from) || !isAddress(a.to))
      return invalid("invalid_payload", "authorization from/to must be addresses");
    const payer = getAddress(a.from);
    if (
      !UINT_STRING.test(a.value) ||
      !UINT_STRING.test(a.validAfter) ||
      !UINT_STRING.test(a.validBefore) ||
      !isHex(a.nonce) ||
      a.nonce.length !== 66 ||
      !isHex(p.signature) ||
      !isAddress(p.requirements.payTo) ||
      !isAddress(p.requirements.asset)
    ) {
      return invalid("invalid_payload", "malformed authorization or requirement fields", payer);
    }
    if (p.requirements.chainId !== opts.chainId || (p.x402Version === 1 && v1Name === undefined)) {
      return invalid(
        NETWORK_MISMATCH,
        `the payment is for chain ${p.requirements.chainId} (x402 v${p.x402Version}); this facilitator settles on chain ${opts.chainId}`,
        payer,
      );
    }
    // the wire types are @x402/core's (v1 envelopes travel through its v2-typed facilitator API)
    return p.x402Version === 2
      ? {
          ok: true,
          payer,
          payload: v2Payload(p) as unknown as PaymentPayload,
          requirements: v2Requirements(p.requirements) as unknown as PaymentRequirements,
        }
      : {
          ok: true,
          payer,
          payload: v1Payload(p) as unknown as PaymentPayload,
          requirements: v1Requirements(p.requirements) as unknown as PaymentRequirements,
        };
  }

  /** Runs one @x402 verify and judges it: a verdict reached without the chain is no verdict. */
  async function judgeVerify(
    payer: Address,
    run: (f: x402Facilitator) => Promise<VerifyResponse>,
  ): Promise<FacilitatorResult<VerifyOk>> {
    const trace = newTrace();
    let reason: string;
    try {
      const response = await run(facilitatorFor(trace));
      if (response.isValid) return { ok: true, value: { payer } };
      reason = response.invalidReason ?? "invalid_payment";
    } catch (error) {
      const failure = classifyChainError(error);
      const unreachable = trace.unreachable ?? (isUnreachable(failure) ? failure : undefined);
      if (unreachable) return { ok: false, failure: { kind: "network", message: unreachable.message, payer } };
      return invalid("unexpected_verify_error", failure.message, payer);
    }
    // @x402/evm reads a failed chain call as a failed check: a verdict without the chain is no verdict
    if (trace.unreachable)
      return { ok: false, failure: { kind: "network", message: trace.unreachable.message, payer } };
    return invalid(reason, `payment rejected: ${reason}`, payer);
  }

  async function verify(p: ExactPayment): Promise<FacilitatorResult<VerifyOk>> {
    const env = envelopesOf(p);
    if (!env.ok) return env;
    return judgeVerify(env.payer, (f) => f.verify(env.payload, env.requirements));
  }

  /**
   * Runs one @x402 settle and judges what the chain did: mined (ok), reverted on chain
   * (`settle_failed` with the transaction), refused at gas estimation (`settle_failed`, nothing
   * sent), possibly moved (`unknown`), or nothing sent (`network` / `invalid`).
   */
  async function judgeSettle(
    payer: Address,
    reasons: SchemeReasons,
    run: (f: x402Facilitator) => Promise<SettleResponse>,
  ): Promise<FacilitatorResult<SettleOk>> {
    const trace = newTrace();
    let response: SettleResponse | undefined;
    let thrown: ChainFailure | undefined;
    try {
      response = await run(facilitatorFor(trace));
    } catch (error) {
      thrown = classifyChainError(error);
    }
    if (response?.success && isHex(response.transaction) && trace.receiptStatus === "success") {
      const transaction = response.transaction;
      return { ok: true, value: { transaction, payer, network: response.network, response: { ...response, payer } } };
    }
    const reported = response?.errorReason;
    const error = trace.lastError ?? thrown;
    const message = error?.message ?? `settlement failed: ${reported ?? "no reason"}`;

    // the settlement transaction was mined and reverted: nothing moved, and it is on chain
    if (trace.broadcast !== undefined && trace.receiptStatus !== undefined && trace.receiptStatus !== "success") {
      return {
        ok: false,
        failure: {
          kind: "settle_failed",
          reason: reasons.transactionFailed,
          message: "settlement transaction reverted",
          payer,
          transaction: trace.broadcast,
        },
      };
    }
    if (trace.sendStarted) {
      // refused at gas estimation (viem raises reverts before sending): nothing was sent. A
      // concurrent settle of the same payment lands here.
      if (trace.broadcast === undefined && error?.kind === "reverted") {
        const reason = reasons.nonceUsed(error.message) ?? reasons.transactionFailed;
        return { ok: false, failure: { kind: "settle_failed", reason, message: error.message, payer } };
      }
      // anything else once a send started (a receipt wait that timed out, an RPC that failed after
      // the node may have accepted the transaction, a mined transfer we cannot read back) may hide
      // an accepted transfer: the chain decides
      return {
        ok: false,
        failure: {
          kind: "unknown",
          reason: "unexpected_settle_error",
          message,
          payer,
          ...(trace.broadcast ? { transaction: trace.broadcast } : {}),
        },
      };
    }
    // nothing was sent
    const unreachable = trace.unreachable ?? (thrown && isUnreachable(thrown) ? thrown : undefined);
    if (unreachable) return { ok: false, failure: { kind: "network", message: unreachable.message, payer } };
    if (response !== undefined && reported !== undefined) {
      return invalid(reported, `payment no longer valid: ${reported}`, payer);
    }
    return {
      ok: false,
      failure: {
        kind: "settle_failed",
        reason: thrown?.kind === "reverted" ? reasons.transactionFailed : "unexpected_settle_error",
        message,
        payer,
      },
    };
  }

  async function settle(p: ExactPayment): Promise<FacilitatorResult<SettleOk>> {
    const env = envelopesOf(p);
    if (!env.ok) return env;
    return judgeSettle(env.payer, EXACT_REASONS, (f) => f.settle(env.payload, env.requirements));
  }

  async function supported(): Promise<FacilitatorResult<SupportedOk>> {
    const kinds: SupportedOk["kinds"] =
      v1Name === undefined ? [] : [{ x402Version: 1, scheme: "exact", network: v1Name }];
    const network = v2Network(opts.chainId);
    kinds.push({ x402Version: 2, scheme: "exact", network });
    kinds.push({ x402Version: 2, scheme: "upto", network, extra: { facilitatorAddress: wallet.account.address } });
    return { ok: true, value: { kinds } };
  }

  /** An upto payment this facilitator can check: well-formed (`checkUpto`) and for its chain. */
  function uptoFor(p: UptoPayment, settleAmount?: bigint) {
    const checked = checkUpto(p, settleAmount);
    if (checked.ok && p.requirements.chainId !== opts.chainId) {
      const message = `the payment is for chain ${p.requirements.chainId}; this facilitator settles on chain ${opts.chainId}`;
      return invalid(UPTO_NETWORK_MISMATCH, message, checked.facts.payer);
    }
    return checked;
  }

  /** `namingSpentNonce` reading Permit2's nonce bitmap with this facilitator's client. */
  const readNonceWord = (owner: Address, wordPos: bigint) =>
    wallet.readContract({
      address: PERMIT2_ADDRESS,
      abi: permit2NonceBitmapAbi,
      functionName: "nonceBitmap",
      args: [owner, wordPos],
    });

  async function verifyUpto(p: UptoPayment): Promise<FacilitatorResult<VerifyOk>> {
    const checked = uptoFor(p);
    if (!checked.ok) return checked;
    const { facts, requirements } = checked;
    const payload = p.payload as PaymentPayload;
    const judged = await judgeVerify(facts.payer, (f) => f.verify(payload, requirements as PaymentRequirements));
    return namingSpentNonce(judged, facts, readNonceWord);
  }

  async function settleUpto(p: UptoPayment, amountMicroUsdc: bigint): Promise<FacilitatorResult<UptoSettleOk>> {
    const checked = uptoFor(p, amountMicroUsdc);
    if (!checked.ok) return checked;
    const { facts, requirements } = checked;
    if (amountMicroUsdc === 0n) return zeroSettle(p, facts);
    const payload = p.payload as PaymentPayload;
    const judged = await judgeSettle(facts.payer, UPTO_REASONS, (f) =>
      f.settle(payload, requirements as PaymentRequirements),
    );
    return namingSpentNonce(judged, facts, readNonceWord);
  }

  return { kind: "local", address: wallet.account.address, verify, settle, supported, verifyUpto, settleUpto };
}
