// The network between the simulated service process and the facilitator: the service's own HTTP
// facilitator adapter calls the stand-in through it. What a settle call meets is drawn per
// authorization (FundingWorld.behaviours): most go through as they are (the stand-in's mode does
// the rest); a timeout is the adapter's timer firing (after the stand-in did its part, so whether
// money moved is settled before the step goes on); a refused connection proves nothing was sent;
// a crash is the process dying while the call is out — the call never returns.
import { exactPaymentFromWire } from "../../exact-payment.js";
import type { SettleMode } from "../../http-facilitator.js";

/**
 * What the facilitator does with one settle call, drawn per authorization:
 * - `ok`: settles, answers 200;
 * - `refuse`: answers 200 `success: false`; nothing moves;
 * - `settle-then-502` / `settle-then-drop`: settles, then a gateway 502 / a dropped connection;
 * - `502-no-settle`: a 502, and nothing ever moves;
 * - `502-then-held`: a 502 now; the settlement lands when a later step releases it (or fails then);
 * - `timeout-before-settle`: the service's timer fires before any answer; the settlement is held,
 *   like `502-then-held`; `timeout-after-settle`: it settles, the answer is lost to the timer;
 * - `down`: the connection is refused (nothing was sent);
 * - `settle-then-refuse`: settles, the reconciler credits it from the chain, then the facilitator
 *   answers `success: false` (a wrong verdict that arrives after the scan);
 * - `crash-before-settle` / `crash-after-settle`: the process dies while the settle call is out —
 *   before the facilitator got it, or after the transfer landed — leaving its `settling` row.
 */
export type FacilitatorBehaviour =
  | "ok"
  | "refuse"
  | "settle-then-502"
  | "settle-then-drop"
  | "502-no-settle"
  | "502-then-held"
  | "timeout-before-settle"
  | "timeout-after-settle"
  | "down"
  | "settle-then-refuse"
  | "crash-before-settle"
  | "crash-after-settle";

/** The stand-in's mode for each behaviour (the rest happens in `simFetch` below). */
export const STAND_IN_MODE: Record<FacilitatorBehaviour, SettleMode | null> = {
  ok: "honest",
  refuse: "refuse",
  "settle-then-502": "settle-then-502",
  "settle-then-drop": "settle-then-drop",
  "502-no-settle": "502-no-settle",
  "502-then-held": "502-then-held",
  "timeout-before-settle": "502-then-held",
  "timeout-after-settle": "honest",
  down: null,
  "settle-then-refuse": "settle-then-refuse",
  "crash-before-settle": null,
  "crash-after-settle": "honest",
};

/** An authorization's key: its payer and nonce (EIP-3009 nonces are the authorizer's). */
export function authKey(payer: string, nonce: string): string {
  return `${payer.toLowerCase()}:${nonce.toLowerCase()}`;
}

/** What the transport reads of the world: the draws, the slow-verify gates, and how a process dies. */
export interface TransportWorld {
  readonly behaviours: ReadonlyMap<string, FacilitatorBehaviour>;
  readonly verifyGates: ReadonlyMap<string, { verifies: number; opened: Promise<void>; open(): void }>;
  die(): Promise<never>;
}

/** What undici throws for a connection refused (the adapter reads the code: nothing was sent). */
function connectionRefused(): Error {
  const cause = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1"), { code: "ECONNREFUSED" });
  return new TypeError("fetch failed", { cause });
}

/** What `AbortSignal.timeout` rejects a fetch with. */
function timedOut(): Error {
  return new DOMException("The operation was aborted due to timeout", "TimeoutError");
}

export function simFetch(world: TransportWorld): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.pathname !== "/settle" && url.pathname !== "/verify") return fetch(input, init);
    const p = exactPaymentFromWire(JSON.parse(String(init?.body ?? "{}")));
    const gate = world.verifyGates.get(authKey(p.authorization.from, p.authorization.nonce));
    if (url.pathname === "/verify") {
      // a slow verify: every duplicate's but the first waits until the first one's settlement is done
      if (gate && gate.verifies++ > 0) await gate.opened;
      return fetch(input, init);
    }
    const behaviour = world.behaviours.get(authKey(p.authorization.from, p.authorization.nonce)) ?? "ok";
    /** the stand-in answers in full (its settlement, if any, mined) before anything else happens */
    const reach = async () => {
      const res = await fetch(input, { ...init, signal: undefined });
      return new Response(await res.text(), { status: res.status, headers: res.headers });
    };
    switch (behaviour) {
      case "down":
        gate?.open();
        throw connectionRefused();
      case "timeout-before-settle":
      case "timeout-after-settle":
        await reach().finally(() => gate?.open());
        throw timedOut();
      case "crash-before-settle":
        return world.die();
      case "crash-after-settle":
        await reach();
        return world.die();
      default:
        try {
          return await reach();
        } finally {
          gate?.open();
        }
    }
  }) as typeof fetch;
}
