import { type Address, getAddress, type Hex, isAddress, isHex } from "viem";
import { classifyChainError } from "../chain/chain-errors.js";
import { type ChainWalletClient, createChainClients, createSerialSender } from "../chain/clients.js";
import { usdcAbi } from "../chain/usdc-abi.js";
import {
  evmPayloadOf,
  type Facilitator,
  type FacilitatorFailure,
  type FacilitatorResult,
  NETWORK_BY_CHAIN_ID,
  type PaymentPayload,
  type PaymentRequirements,
  type SettleOk,
  type VerifyOk,
} from "./types.js";

export interface LocalFacilitatorOptions {
  rpcUrl: string;
  chainId: number;
  /** FACILITATOR_PRIVATE_KEY: submits `transferWithAuthorization` and pays its gas. */
  privateKey: Hex;
  /** Longest wait for a settlement receipt before answering `timeout` (default 60 s). */
  settleTimeoutMs?: number;
}

export interface LocalFacilitator extends Facilitator {
  readonly kind: "local";
  /** The facilitator's own address (needs ETH for gas). */
  readonly address: Address;
}

/** `x402/facilitator` pulls in @solana/kit and friends (~0.5 s); load it once, off the import path. */
let x402FacilitatorModule: Promise<typeof import("x402/facilitator")> | undefined;
function loadX402Facilitator(): Promise<typeof import("x402/facilitator")> {
  x402FacilitatorModule ??= import("x402/facilitator");
  return x402FacilitatorModule;
}

type Checked = { ok: true; payer: Address; nonce: Hex } | { ok: false; failure: FacilitatorFailure };

function invalid(reason: string, message: string, payer?: Address): { ok: false; failure: FacilitatorFailure } {
  return { ok: false, failure: { kind: "invalid", reason, message, ...(payer ? { payer } : {}) } };
}

const UINT_STRING = /^\d{1,78}$/;

/**
 * In-process x402 facilitator (`FACILITATOR_URL=local`): x402's own `verify`/`settle` on our viem
 * clients, plus the checks x402 1.2 leaves out (STACK_NOTES gotcha 4):
 * - the EIP-3009 nonce must be unused on chain (x402's verify never looks; its settle would revert);
 * - `exact` means exact: the signed value must equal `maxAmountRequired` (x402 accepts more);
 * - payload and requirements must name the same network, and that network must be the chain we
 *   are connected to (x402 derives the EIP-712 chain id from the payload's network name alone);
 * - `extra.name`/`extra.version` must be present (else x402 would read `version()` from mainnet
 *   USDC's address, which does not exist on a local chain).
 * Settlement throws nothing: reverts, RPC failures and receipt timeouts all come back as data.
 */
export function createLocalFacilitator(opts: LocalFacilitatorOptions): LocalFacilitator {
  const { publicClient, walletClient } = createChainClients({
    rpcUrl: opts.rpcUrl,
    chainId: opts.chainId,
    privateKey: opts.privateKey,
  });
  if (walletClient === undefined) throw new Error("local facilitator: wallet client missing");
  const wallet: ChainWalletClient = walletClient;
  const network = NETWORK_BY_CHAIN_ID[opts.chainId];
  const settleTimeoutMs = opts.settleTimeoutMs ?? 60_000;
  const sendSerially = createSerialSender();
  void loadX402Facilitator().catch(() => undefined); // warm up; errors surface on first use

  async function check(payload: PaymentPayload, requirements: PaymentRequirements): Promise<Checked> {
    const evm = evmPayloadOf(payload);
    if (evm === undefined) return invalid("invalid_payload", "payload is not an EVM exact authorization");
    const { authorization, signature } = evm;
    if (!isAddress(authorization.from) || !isAddress(authorization.to)) {
      return invalid("invalid_payload", "authorization from/to must be addresses");
    }
    const payer = getAddress(authorization.from);
    if (
      !UINT_STRING.test(authorization.value) ||
      !UINT_STRING.test(authorization.validAfter) ||
      !UINT_STRING.test(authorization.validBefore) ||
      !isHex(authorization.nonce) ||
      authorization.nonce.length !== 66 ||
      !isHex(signature)
    ) {
      return invalid("invalid_payload", "malformed authorization fields", payer);
    }
    if (payload.x402Version !== 1) return invalid("invalid_x402_version", "only x402Version 1 is supported", payer);
    if (payload.scheme !== "exact" || requirements.scheme !== "exact") {
      return invalid("unsupported_scheme", "only the exact scheme is supported", payer);
    }
    if (network === undefined || payload.network !== network || requirements.network !== network) {
      return invalid(
        "invalid_network",
        `payment network ${payload.network} / requirement network ${requirements.network} do not match this chain (${opts.chainId})`,
        payer,
      );
    }
    const extra = requirements.extra as { name?: unknown; version?: unknown } | undefined;
    if (typeof extra?.name !== "string" || typeof extra.version !== "string" || !isAddress(requirements.asset)) {
      return invalid("invalid_payment_requirements", "requirements need asset and extra.name/extra.version", payer);
    }
    if (!UINT_STRING.test(requirements.maxAmountRequired)) {
      return invalid("invalid_payment_requirements", "maxAmountRequired must be an integer string", payer);
    }
    if (BigInt(authorization.value) !== BigInt(requirements.maxAmountRequired)) {
      return invalid(
        "invalid_exact_evm_payload_authorization_value",
        `signed value ${authorization.value} differs from the required ${requirements.maxAmountRequired}`,
        payer,
      );
    }
    if (!isAddress(requirements.payTo) || getAddress(authorization.to) !== getAddress(requirements.payTo)) {
      return invalid("invalid_exact_evm_payload_recipient_mismatch", "authorization.to is not payTo", payer);
    }
    let used: boolean;
    try {
      used = await publicClient.readContract({
        address: getAddress(requirements.asset),
        abi: usdcAbi,
        functionName: "authorizationState",
        args: [payer, authorization.nonce],
      });
    } catch (error) {
      const failure = classifyChainError(error);
      if (failure.kind === "network" || failure.kind === "timeout") {
        return { ok: false, failure: { kind: "network", message: failure.message, payer } };
      }
      return invalid("invalid_payment_requirements", `asset does not answer authorizationState: ${failure.message}`);
    }
    if (used) {
      return invalid(
        "duplicate_settlement",
        "authorization nonce is already used or canceled on chain (replayed payment)",
        payer,
      );
    }
    return { ok: true, payer, nonce: authorization.nonce };
  }

  async function verify(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<FacilitatorResult<VerifyOk>> {
    const checked = await check(payload, requirements);
    if (!checked.ok) return checked;
    try {
      const x402 = await loadX402Facilitator();
      const response = await x402.verify(wallet, payload, requirements);
      if (!response.isValid) {
        return invalid(
          response.invalidReason ?? "invalid_payment",
          `payment rejected: ${response.invalidReason ?? "invalid"}`,
          checked.payer,
        );
      }
      return { ok: true, value: { payer: checked.payer } };
    } catch (error) {
      const failure = classifyChainError(error);
      if (failure.kind === "network" || failure.kind === "timeout") {
        return { ok: false, failure: { kind: "network", message: failure.message, payer: checked.payer } };
      }
      return invalid("unexpected_verify_error", failure.message, checked.payer);
    }
  }

  async function settle(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<FacilitatorResult<SettleOk>> {
    const checked = await check(payload, requirements);
    if (!checked.ok) return checked;
    const payer = checked.payer;

    // x402's settle calls writeContract then waitForTransactionReceipt on the signer we pass. A
    // per-call proxy lets us (1) broadcast one transaction at a time from this key, (2) remember the
    // hash so a later failure can still name the transaction, (3) bound the receipt wait.
    let broadcast: Hex | undefined;
    let sendStarted = false;
    const signer = new Proxy(wallet, {
      get(target, prop, receiver) {
        if (prop === "writeContract") {
          return async (args: Parameters<ChainWalletClient["writeContract"]>[0]) => {
            sendStarted = true;
            const hash = await sendSerially(() => target.writeContract(args));
            broadcast = hash;
            return hash;
          };
        }
        if (prop === "waitForTransactionReceipt") {
          return (args: Parameters<ChainWalletClient["waitForTransactionReceipt"]>[0]) =>
            target.waitForTransactionReceipt({ ...args, timeout: settleTimeoutMs });
        }
        return Reflect.get(target, prop, receiver);
      },
    });

    try {
      const x402 = await loadX402Facilitator();
      const response = await x402.settle(signer, payload, requirements);
      if (response.success && isHex(response.transaction)) {
        return {
          ok: true,
          value: { transaction: response.transaction, payer, network: response.network, response },
        };
      }
      const transaction = isHex(response.transaction) ? response.transaction : broadcast;
      if (transaction === undefined) {
        return invalid(
          response.errorReason ?? "invalid_payment",
          `payment no longer valid: ${response.errorReason}`,
          payer,
        );
      }
      return {
        ok: false,
        failure: {
          kind: "settle_failed",
          reason: response.errorReason ?? "invalid_transaction_state",
          message: "settlement transaction reverted",
          payer,
          transaction,
        },
      };
    } catch (error) {
      const failure = classifyChainError(error);
      // Once writeContract started, any failure other than a revert (which viem raises at gas
      // estimation, before sending) may hide an accepted transaction: report the outcome as unknown.
      if (failure.kind !== "reverted" && (broadcast !== undefined || sendStarted)) {
        return {
          ok: false,
          failure: {
            kind: "unknown",
            reason: "unexpected_settle_error",
            message: failure.message,
            payer,
            ...(broadcast ? { transaction: broadcast } : {}),
          },
        };
      }
      if (failure.kind === "network" || failure.kind === "timeout") {
        return { ok: false, failure: { kind: "network", message: failure.message, payer } };
      }
      // A revert at gas estimation: nothing was sent. A concurrent settle of the same payment lands here.
      const reason =
        failure.kind !== "reverted"
          ? "unexpected_settle_error"
          : /authorization is used or canceled/.test(failure.message)
            ? "duplicate_settlement"
            : "invalid_transaction_state";
      return {
        ok: false,
        failure: {
          kind: "settle_failed",
          reason,
          message: failure.message,
          payer,
          ...(broadcast ? { transaction: broadcast } : {}),
        },
      };
    }
  }

  return {
    kind: "local",
    address: wallet.account.address,
    verify,
    settle,
    supported: async () =>
      network === undefined
        ? { ok: true, value: { kinds: [] } }
        : { ok: true, value: { kinds: [{ x402Version: 1, scheme: "exact", network }] } },
  };
}
