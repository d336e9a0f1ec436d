import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Address } from "viem";
import { createLocalFacilitator } from "../src/adapters/facilitator/local.js";
import type {
  ExactPayment,
  FacilitatorResult,
  SettleOk,
  UptoPayment,
  UptoSettleOk,
} from "../src/adapters/facilitator/types.js";
import type { LocalChain } from "../src/local/chain/index.js";
import { exactPaymentFromWire } from "./exact-payment.js";
import { uptoPaymentFromWire } from "./upto-payment.js";

/**
 * How the stand-in answers `POST /settle`:
 * - `honest`: settles on chain, answers 200 with the x402 settle response;
 * - `settle-then-502`: settles on chain, then answers what a gateway in front of a facilitator
 *   answers when the facilitator's reply was lost (502, an HTML body);
 * - `settle-then-drop`: settles on chain, then breaks the connection without an answer;
 * - `502-then-settle`: answers 502 at once, settles on chain a little later (a slow facilitator
 *   behind an impatient gateway);
 * - `502-then-held`: answers 502 at once and keeps the settlement in `held` until the test
 *   releases it (`releaseHeld`): a settlement that lands whenever the test says, or never;
 * - `502-no-settle`: answers 502 and never settles;
 * - `refuse`: answers 200 `success: false` with a reason, settling nothing;
 * - `settle-then-refuse`: settles on chain, waits for `afterSettle` (when set), then answers 200
 *   `success: false` with a reason: a facilitator whose verdict is wrong (money moved).
 */
export type SettleMode =
  | "honest"
  | "settle-then-502"
  | "settle-then-drop"
  | "502-then-settle"
  | "502-then-held"
  | "502-no-settle"
  | "refuse"
  | "settle-then-refuse";

export interface HttpFacilitatorStandInOptions {
  /**
   * The x402 versions `GET /supported` lists (`exact` on `base` for v1, on `eip155:8453` for v2,
   * and with v2 `upto` on `eip155:8453` naming `facilitatorAddress`); `/verify` and `/settle` take
   * either version's body, and upto bodies, whatever it lists. Default `[1]`.
   */
  versions?: readonly (1 | 2)[];
}

/** One upto `/settle` request: the payment and the amount its requirement asked to settle. */
export interface UptoSettleRequest {
  payment: UptoPayment;
  amountMicroUsdc: bigint;
}

export interface HttpFacilitatorStandIn {
  /** FACILITATOR_URL for the service */
  url: string;
  /** the address that submits settlements: an upto requirement's `extra.facilitatorAddress` */
  facilitatorAddress: Address;
  /** how `/settle` answers, exact and upto alike */
  mode: SettleMode;
  /** when set, the mode for this payment (`undefined`: `mode`), e.g. a test's draw per authorization */
  modeFor?: (p: ExactPayment) => SettleMode | undefined;
  /** every `POST /verify` and `/settle` body received, in order */
  readonly requests: { path: "/verify" | "/settle"; body: unknown }[];
  /** `GET /supported` requests received */
  supportedCalls: number;
  /** `POST /settle` requests received */
  settleCalls: number;
  /** settlements this stand-in made on chain */
  readonly settled: FacilitatorResult<SettleOk>[];
  /** when set, the mode for this upto settle (`undefined`: `mode`) */
  uptoModeFor?: (r: UptoSettleRequest) => SettleMode | undefined;
  /** upto settlements this stand-in made on chain (a settle of 0 included: nothing sent) */
  readonly uptoSettled: FacilitatorResult<UptoSettleOk>[];
  /** `settle-then-refuse` for upto waits for this after settling and before answering */
  afterUptoSettle?: (settled: FacilitatorResult<UptoSettleOk>, r: UptoSettleRequest) => Promise<void>;
  /** upto settlements `502-then-held` keeps, oldest first, until released */
  readonly uptoHeld: UptoSettleRequest[];
  /** settles the held upto settlement at `index` on chain now */
  releaseUptoHeld(index: number): Promise<FacilitatorResult<UptoSettleOk>>;
  /**
   * `settle-then-refuse` waits for this after settling and before answering (a test runs the chain
   * scan in between); called with the settlement and the payment.
   */
  afterSettle?: (settled: FacilitatorResult<SettleOk>, payment: ExactPayment) => Promise<void>;
  /** awaited before `/verify` is answered (a slow verify: a test orders it against other calls) */
  beforeVerify?: (p: ExactPayment) => Promise<void>;
  /** resolves when every late settlement (`502-then-settle`) has landed */
  lateSettlements(): Promise<void>;
  /** settlements `502-then-held` keeps, oldest first, until released */
  readonly held: ExactPayment[];
  /** settles the held settlement at `index` on chain now (it may fail there: used, canceled, expired) */
  releaseHeld(index: number): Promise<FacilitatorResult<SettleOk>>;
  close(): Promise<void>;
}

/**
 * A standard x402 facilitator over HTTP (`/verify`, `/settle`, `/supported`; v1, or v1 and v2),
 * settling on the local chain with the real local facilitator, whose answers to `/settle` can be
 * made to fail the ways a real one behind a gateway does. The outside world for the funding tests,
 * not a mock.
 */
export async function startHttpFacilitator(
  chain: LocalChain,
  opts: HttpFacilitatorStandInOptions = {},
): Promise<HttpFacilitatorStandIn> {
  const versions = opts.versions ?? [1];
  const key = chain.devAccounts[1]?.privateKey;
  if (!key) throw new Error("dev accounts missing");
  const inner = createLocalFacilitator({ rpcUrl: chain.rpcUrl, chainId: chain.chainId, privateKey: key });
  const late: Promise<unknown>[] = [];
  const state: HttpFacilitatorStandIn = {
    url: "",
    facilitatorAddress: inner.address,
    mode: "honest",
    requests: [],
    supportedCalls: 0,
    settleCalls: 0,
    settled: [],
    afterSettle: undefined,
    lateSettlements: async () => {
      await Promise.all(late);
    },
    held: [],
    releaseHeld: async (index) => {
      const [p] = state.held.splice(index, 1);
      if (!p) throw new Error(`no held settlement ${index}`);
      return settleNow(p);
    },
    uptoSettled: [],
    uptoHeld: [],
    releaseUptoHeld: async (index) => {
      const [r] = state.uptoHeld.splice(index, 1);
      if (!r) throw new Error(`no held upto settlement ${index}`);
      return settleUptoNow(r);
    },
    close: async () => undefined,
  };
  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const settleNow = async (p: ExactPayment) => {
    const out = await inner.settle(p);
    state.settled.push(out);
    return out;
  };
  const settleUptoNow = async (r: UptoSettleRequest) => {
    const out = await inner.settleUpto(r.payment, r.amountMicroUsdc);
    state.uptoSettled.push(out);
    return out;
  };
  const gateway502 = (res: ServerResponse) => {
    res.writeHead(502, { "content-type": "text/html" });
    res.end("<html><body><h1>502 Bad Gateway</h1></body></html>");
  };
  /** `/verify` and `/settle` for upto: the same modes as exact, on `inner.verifyUpto` / `settleUpto`. */
  const serveUpto = async (req: IncomingMessage, res: ServerResponse, r: UptoSettleRequest) => {
    const network = `eip155:${chain.chainId}`;
    if (req.url === "/verify") {
      const v = await inner.verifyUpto(r.payment);
      send(
        res,
        200,
        v.ok
          ? { isValid: true, payer: v.value.payer }
          : { isValid: false, invalidReason: v.failure.reason ?? "invalid", payer: v.failure.payer },
      );
      return;
    }
    if (req.url !== "/settle") {
      send(res, 404, { error: "not found" });
      return;
    }
    state.settleCalls++;
    const refusal = { success: false, errorReason: "invalid_permit2_signature", transaction: "", network };
    switch (state.uptoModeFor?.(r) ?? state.mode) {
      case "honest": {
        const s = await settleUptoNow(r);
        if (s.ok) send(res, 200, s.value.response);
        else
          send(res, 200, {
            success: false,
            errorReason: s.failure.reason ?? "unexpected_settle_error",
            transaction: s.failure.transaction ?? "",
            network,
            payer: s.failure.payer,
          });
        return;
      }
      case "settle-then-502":
        await settleUptoNow(r);
        gateway502(res);
        return;
      case "settle-then-drop":
        await settleUptoNow(r);
        req.socket.destroy();
        return;
      case "502-then-settle":
        gateway502(res);
        late.push(new Promise((resolve) => setTimeout(resolve, 300)).then(() => settleUptoNow(r)));
        return;
      case "502-then-held":
        gateway502(res);
        state.uptoHeld.push(r);
        return;
      case "502-no-settle":
        gateway502(res);
        return;
      case "settle-then-refuse": {
        const s = await settleUptoNow(r);
        await state.afterUptoSettle?.(s, r);
        send(res, 200, refusal);
        return;
      }
      case "refuse":
        send(res, 200, refusal);
        return;
    }
  };
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === "GET" && req.url === "/supported") {
      state.supportedCalls++;
      const kinds = [
        ...(versions.includes(1) ? [{ x402Version: 1, scheme: "exact", network: "base" }] : []),
        ...(versions.includes(2)
          ? [
              { x402Version: 2, scheme: "exact", network: `eip155:${chain.chainId}` },
              {
                x402Version: 2,
                scheme: "upto",
                network: `eip155:${chain.chainId}`,
                extra: { facilitatorAddress: inner.address },
              },
            ]
          : []),
      ];
      send(res, 200, { kinds, extensions: [], signers: {} });
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    if (req.url === "/verify" || req.url === "/settle") state.requests.push({ path: req.url, body });
    if ((body as { paymentRequirements?: { scheme?: unknown } }).paymentRequirements?.scheme === "upto") {
      await serveUpto(req, res, uptoPaymentFromWire(body));
      return;
    }
    const p = exactPaymentFromWire(body);
    const network = p.x402Version === 2 ? `eip155:${chain.chainId}` : "base";
    if (req.url === "/verify") {
      await state.beforeVerify?.(p);
      const v = await inner.verify(p);
      send(
        res,
        200,
        v.ok
          ? { isValid: true, payer: v.value.payer }
          : { isValid: false, invalidReason: v.failure.reason ?? "invalid" },
      );
      return;
    }
    if (req.url !== "/settle") {
      send(res, 404, { error: "not found" });
      return;
    }
    state.settleCalls++;
    switch (state.modeFor?.(p) ?? state.mode) {
      case "honest": {
        const s = await settleNow(p);
        if (s.ok) send(res, 200, s.value.response);
        else
          send(res, 200, {
            success: false,
            errorReason: s.failure.reason ?? "unexpected_settle_error",
            transaction: "",
            network,
          });
        return;
      }
      case "settle-then-502":
        await settleNow(p);
        gateway502(res);
        return;
      case "settle-then-drop":
        await settleNow(p);
        req.socket.destroy();
        return;
      case "502-then-settle":
        gateway502(res);
        late.push(new Promise((resolve) => setTimeout(resolve, 300)).then(() => settleNow(p)));
        return;
      case "502-then-held":
        gateway502(res);
        state.held.push(p);
        return;
      case "502-no-settle":
        gateway502(res);
        return;
      case "settle-then-refuse": {
        const s = await settleNow(p);
        await state.afterSettle?.(s, p);
        send(res, 200, { success: false, errorReason: "invalid_exact_evm_signature", transaction: "", network });
        return;
      }
      case "refuse":
        send(res, 200, {
          success: false,
          errorReason: "invalid_exact_evm_signature",
          transaction: "",
          network,
        });
        return;
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
