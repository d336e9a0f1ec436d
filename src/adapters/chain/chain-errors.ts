import {
  BaseError,
  ContractFunctionRevertedError,
  ExecutionRevertedError,
  HttpRequestError,
  SocketClosedError,
  TimeoutError,
  TransactionReceiptNotFoundError,
  WaitForTransactionReceiptTimeoutError,
} from "viem";

export type ChainFailureKind =
  /** The RPC could not be reached or answered with a transport error. */
  | "network"
  /** The RPC or a receipt wait timed out; a broadcast transaction may still land. */
  | "timeout"
  /** The EVM rejected the call (revert, including during gas estimation). Nothing changed on chain. */
  | "reverted"
  /** The transaction or receipt does not exist (yet). */
  | "not_found"
  /** A write was requested from an adapter built without a private key. */
  | "no_wallet"
  | "unknown";

export interface ChainFailure {
  kind: ChainFailureKind;
  message: string;
}

export type ChainResult<T> = { ok: true; value: T } | { ok: false; failure: ChainFailure };

/** Maps a thrown viem (or fetch) error to a failure kind plus a short, loggable message. */
export function classifyChainError(error: unknown): ChainFailure {
  if (error instanceof BaseError) {
    const reverted = error.walk(
      (e) => e instanceof ContractFunctionRevertedError || e instanceof ExecutionRevertedError,
    );
    if (reverted instanceof ContractFunctionRevertedError) {
      return { kind: "reverted", message: reverted.reason ?? reverted.shortMessage };
    }
    if (reverted instanceof ExecutionRevertedError) {
      return { kind: "reverted", message: reverted.details || reverted.shortMessage };
    }
    const timeout = error.walk((e) => e instanceof TimeoutError || e instanceof WaitForTransactionReceiptTimeoutError);
    if (timeout instanceof BaseError) return { kind: "timeout", message: timeout.shortMessage };
    const notFound = error.walk((e) => e instanceof TransactionReceiptNotFoundError);
    if (notFound instanceof BaseError) return { kind: "not_found", message: notFound.shortMessage };
    const network = error.walk((e) => e instanceof HttpRequestError || e instanceof SocketClosedError);
    if (network instanceof BaseError) return { kind: "network", message: network.shortMessage };
    // Reverts surfaced by some nodes only as text (no structured revert data).
    if (/revert/i.test(error.message)) return { kind: "reverted", message: error.shortMessage };
    return { kind: "unknown", message: error.shortMessage };
  }
  if (error instanceof Error) {
    const code = (error.cause as { code?: unknown } | undefined)?.code;
    if (typeof code === "string" && /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH)$/.test(code)) {
      return { kind: "network", message: `${error.message} (${code})` };
    }
    return { kind: "unknown", message: error.message };
  }
  return { kind: "unknown", message: String(error) };
}
