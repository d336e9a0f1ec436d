import { type Address, getAddress, type Hex, isAddress, isHex } from "viem";
import { z } from "zod";
import { type CdpAuthHeaders, createCdpAuthHeaders } from "./cdp-auth.js";
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
import { checkUpto, zeroSettle } from "./upto.js";

export interface HttpFacilitatorOptions {
  /** Base URL; `/verify`, `/settle` and `/supported` are appended. */
  url: string;
  /** CDP_API_KEY_ID / CDP_API_KEY_SECRET: when both are set, requests carry CDP JWT auth. */
  cdpKeyId?: string;
  cdpKeySecret?: string;
  /** Per-request timeouts (defaults: verify/supported 10 s, settle 60 s — a settle waits for a block). */
  verifyTimeoutMs?: number;
  settleTimeoutMs?: number;
  /** How long a readable `GET /supported` decides the version spoken (default 10 minutes). */
  supportedTtlMs?: number;
  /** Injected for tests; defaults to global fetch. */
  fetch?: typeof fetch;
}

export interface HttpFacilitator extends Facilitator {
  readonly kind: "http";
  readonly url: string;
}

// Lenient readers: facilitators differ in optional fields and in reason codes beyond x402's enum.
const verifyBody = z.object({
  isValid: z.boolean(),
  invalidReason: z.string().nullish(),
  payer: z.string().nullish(),
});
const settleBody = z.object({
  success: z.boolean(),
  errorReason: z.string().nullish(),
  transaction: z.string().nullish(),
  network: z.string().nullish(),
  payer: z.string().nullish(),
  /** upto: the amount settled */
  amount: z.string().nullish(),
});
const supportedBody = z.object({
  kinds: z.array(
    z.object({
      x402Version: z.number(),
      scheme: z.string(),
      network: z.string(),
      extra: z.record(z.unknown()).optional(),
    }),
  ),
});

/** Connection errors that prove the request never reached the facilitator. */
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

type Exchange = { ok: true; status: number; body: unknown; text: string } | { ok: false; failure: FacilitatorFailure };

function errorCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") return code;
    current = current.cause;
  }
  return undefined;
}

function payerOf(payment: ExactPayment, reported?: string | null): Address | undefined {
  if (reported && isAddress(reported)) return getAddress(reported);
  const from = payment.authorization.from;
  return isAddress(from) ? getAddress(from) : undefined;
}

/**
 * Reasons that do not prove nothing moved: x402 1.x's code for "an exception was thrown while
 * settling" (its facilitator catches everything, a receipt wait that timed out after the broadcast
 * included), and v2's `settlement_pending` (broadcast, not confirmed yet).
 */
const UNPROVEN_SETTLE_REASONS = new Set(["unexpected_settle_error", "settlement_pending"]);

type SupportedKinds = SupportedOk["kinds"];

/**
 * Client for a standard x402 facilitator (e.g. CDP's), in the version it speaks: v2 request bodies
 * when its `GET /supported` lists `{x402Version: 2, scheme: "exact", network: "eip155:<chainId>"}`
 * for the payment's chain, else v1 ones (also when `/supported` cannot be read: that answer is not
 * kept, the next call asks again; a readable one is kept for `supportedTtlMs`).
 *
 * Every outcome is data. Verify and supported: connection problems are `unreachable`, non-2xx or
 * unreadable answers `rejected`, `isValid: false` is `invalid`. Settle: `settle_failed` only when
 * the facilitator itself says `success: false` with a reason, in a 2xx or 4xx answer (nothing
 * moved); a connection that never opened is `unreachable`; every other outcome may hide a transfer
 * on chain and is `unknown`.
 *
 * `upto` is x402 v2 only: the buyer's payload travels as sent, with the requirement's `amount` the
 * maximum on `/verify` and the amount to charge on `/settle` (the x402 upto spec); the answers are
 * judged by the same rules. A settle of 0 asks nothing (`zeroSettle`).
 */
export function createHttpFacilitator(opts: HttpFacilitatorOptions): HttpFacilitator {
  const base = opts.url.replace(/\/+$/, "");
  const doFetch = opts.fetch ?? fetch;
  const verifyTimeoutMs = opts.verifyTimeoutMs ?? 10_000;
  const settleTimeoutMs = opts.settleTimeoutMs ?? 60_000;
  const supportedTtlMs = opts.supportedTtlMs ?? 10 * 60_000;
  const auth: CdpAuthHeaders | undefined =
    opts.cdpKeyId && opts.cdpKeySecret ? createCdpAuthHeaders(opts.cdpKeyId, opts.cdpKeySecret) : undefined;
  /** the last readable `/supported` answer, and until when it decides */
  let known: { kinds: SupportedKinds; until: number } | undefined;
  let asking: Promise<FacilitatorResult<SupportedOk>> | undefined;

  async function exchange(
    method: "GET" | "POST",
    path: "/verify" | "/settle" | "/supported",
    body: unknown,
    timeoutMs: number,
  ): Promise<Exchange> {
    const url = new URL(`${base}${path}`);
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (auth !== undefined) Object.assign(headers, await auth(method, url));
    let response: Response;
    let text: string;
    try {
      response = await doFetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      text = await response.text();
    } catch (error) {
      const code = errorCode(error);
      const timedOut = error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
      const message = timedOut
        ? `facilitator ${path} timed out after ${timeoutMs} ms`
        : `facilitator ${path} unreachable: ${code ?? (error instanceof Error ? error.message : String(error))}`;
      // A settle that may have reached the facilitator has an unknown outcome.
      const maybeProcessed = path === "/settle" && !(code !== undefined && NOT_SENT_CODES.has(code));
      return { ok: false, failure: { kind: maybeProcessed ? "unknown" : "unreachable", message } };
    }
    let parsed: unknown;
    try {
      parsed = text.length > 0 ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { ok: true, status: response.status, body: parsed, text };
  }

  function rejected(path: string, status: number, text: string): { ok: false; failure: FacilitatorFailure } {
    return {
      ok: false,
      failure: { kind: "rejected", status, message: `facilitator ${path} answered ${status}: ${text.slice(0, 300)}` },
    };
  }

  /** The kinds the facilitator lists: the kept answer, or a fresh one; undefined when unreadable. */
  async function supportedKinds(): Promise<SupportedKinds | undefined> {
    if (known !== undefined && Date.now() < known.until) return known.kinds;
    asking ??= supported().finally(() => {
      asking = undefined;
    });
    const r = await asking;
    return r.ok ? r.value.kinds : undefined;
  }

  /** `{x402Version, paymentPayload, paymentRequirements}` in the version the facilitator speaks. */
  async function requestBody(p: ExactPayment): Promise<{ x402Version: 1 | 2; body: unknown }> {
    const chainId = p.requirements.chainId;
    const kinds = await supportedKinds();
    const v2 =
      kinds?.some((k) => k.x402Version === 2 && k.scheme === "exact" && k.network === v2Network(chainId)) === true ||
      v1Network(chainId) === undefined;
    return v2
      ? {
          x402Version: 2,
          body: { x402Version: 2, paymentPayload: v2Payload(p), paymentRequirements: v2Requirements(p.requirements) },
        }
      : {
          x402Version: 1,
          body: { x402Version: 1, paymentPayload: v1Payload(p), paymentRequirements: v1Requirements(p.requirements) },
        };
  }

  /** A `/verify` answer judged: valid (with the payer), `invalid` with its reason, or `rejected`. */
  function judgeVerify(res: Exchange, payerFrom: (reported?: string | null) => Address | undefined) {
    if (!res.ok) return res;
    const parsed = verifyBody.safeParse(res.body);
    // Some facilitators answer an invalid payment with 400 + a normal verify body.
    if (!parsed.success || (res.status >= 300 && parsed.data.isValid)) return rejected("/verify", res.status, res.text);
    const payer = payerFrom(parsed.data.payer);
    if (!parsed.data.isValid) {
      const reason = parsed.data.invalidReason ?? "invalid_payment";
      return {
        ok: false as const,
        failure: {
          kind: "invalid" as const,
          reason,
          message: `payment rejected: ${reason}`,
          ...(payer ? { payer } : {}),
        },
      };
    }
    if (payer === undefined) return rejected("/verify", res.status, "valid answer without a payer address");
    return { ok: true as const, value: { payer } };
  }

  async function verify(payment: ExactPayment): Promise<FacilitatorResult<VerifyOk>> {
    const { body } = await requestBody(payment);
    const res = await exchange("POST", "/verify", body, verifyTimeoutMs);
    return judgeVerify(res, (reported) => payerOf(payment, reported));
  }

  /**
   * A `/settle` answer judged (THE rule of the class comment): success with a transaction, the
   * facilitator's own definite refusal (`settle_failed`), or `unknown` for anything else.
   */
  function judgeSettle(
    res: Exchange,
    payerFrom: (reported?: string | null) => Address | undefined,
    defaultNetwork: string,
  ): FacilitatorResult<SettleOk> {
    if (!res.ok) return res;
    const parsed = settleBody.safeParse(res.body);
    const payer = payerFrom(parsed.success ? parsed.data.payer : undefined);
    const unknown = (message: string, transaction?: Hex): { ok: false; failure: FacilitatorFailure } => ({
      ok: false,
      failure: {
        kind: "unknown",
        status: res.status,
        message,
        ...(payer ? { payer } : {}),
        ...(transaction ? { transaction } : {}),
      },
    });
    // a gateway error in front of the facilitator, an unreadable body, a 3xx: the settle request may
    // have been processed, so nothing here proves the transfer did not happen
    if (!parsed.success) return unknown(`facilitator /settle answered ${res.status}: ${res.text.slice(0, 300)}`);
    const data = parsed.data;
    const transaction: Hex | undefined = data.transaction && isHex(data.transaction) ? data.transaction : undefined;
    if (!data.success) {
      const reason = data.errorReason ?? "unexpected_settle_error";
      // the facilitator's own refusal proves nothing moved only when it is a definite answer: a 2xx
      // or 4xx with a reason other than x402's catch-all for an exception mid-settlement
      if (res.status >= 500 || (res.status >= 300 && res.status < 400) || UNPROVEN_SETTLE_REASONS.has(reason)) {
        return unknown(`facilitator /settle answered ${res.status} success: false (${reason})`, transaction);
      }
      return {
        ok: false,
        failure: {
          kind: "settle_failed",
          reason,
          status: res.status,
          message: `settlement failed: ${reason}`,
          ...(payer ? { payer } : {}),
          ...(transaction ? { transaction } : {}),
        },
      };
    }
    if (res.status >= 300 || transaction === undefined || payer === undefined) {
      // success claimed in an error answer, or without a transaction hash: we cannot prove it
      return unknown(
        `facilitator /settle answered ${res.status} success without a usable transaction or payer`,
        transaction,
      );
    }
    const network = data.network ?? defaultNetwork;
    const response: SettleResponse = {
      success: true,
      transaction,
      network,
      payer,
      ...(data.amount ? { amount: data.amount } : {}),
    };
    return { ok: true, value: { transaction, payer, network, response } };
  }

  async function settle(payment: ExactPayment): Promise<FacilitatorResult<SettleOk>> {
    const { x402Version, body } = await requestBody(payment);
    const res = await exchange("POST", "/settle", body, settleTimeoutMs);
    const chainId = payment.requirements.chainId;
    const network = x402Version === 2 ? v2Network(chainId) : (v1Network(chainId) ?? v2Network(chainId));
    return judgeSettle(res, (reported) => payerOf(payment, reported), network);
  }

  async function supported(): Promise<FacilitatorResult<SupportedOk>> {
    const res = await exchange("GET", "/supported", undefined, verifyTimeoutMs);
    if (!res.ok) return res;
    const parsed = supportedBody.safeParse(res.body);
    if (res.status >= 300 || !parsed.success) return rejected("/supported", res.status, res.text);
    known = { kinds: parsed.data.kinds, until: Date.now() + supportedTtlMs };
    return { ok: true, value: parsed.data };
  }

  /** The buyer's payload as sent, the requirement with `amount` (max for verify, the actual amount for settle): x402 v2 only. */
  const uptoBody = (p: UptoPayment, requirements: unknown) => ({
    x402Version: 2,
    paymentPayload: p.payload,
    paymentRequirements: requirements,
  });

  async function verifyUpto(p: UptoPayment): Promise<FacilitatorResult<VerifyOk>> {
    const checked = checkUpto(p);
    if (!checked.ok) return checked;
    const { facts, requirements } = checked;
    const res = await exchange("POST", "/verify", uptoBody(p, requirements), verifyTimeoutMs);
    return judgeVerify(res, (reported) => (reported && isAddress(reported) ? getAddress(reported) : facts.payer));
  }

  async function settleUpto(p: UptoPayment, amountMicroUsdc: bigint): Promise<FacilitatorResult<UptoSettleOk>> {
    const checked = checkUpto(p, amountMicroUsdc);
    if (!checked.ok) return checked;
    const { facts, requirements } = checked;
    if (amountMicroUsdc === 0n) return zeroSettle(p, facts);
    const res = await exchange("POST", "/settle", uptoBody(p, requirements), settleTimeoutMs);
    return judgeSettle(
      res,
      (reported) => (reported && isAddress(reported) ? getAddress(reported) : facts.payer),
      v2Network(p.requirements.chainId),
    );
  }

  return { kind: "http", url: base, verify, settle, supported, verifyUpto, settleUpto };
}
