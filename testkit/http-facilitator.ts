import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { PaymentPayload, PaymentRequirements } from "x402/types";
import { createLocalFacilitator } from "../src/adapters/facilitator/local.js";
import type { FacilitatorResult, SettleOk } from "../src/adapters/facilitator/types.js";
import type { LocalChain } from "../src/local/chain/index.js";

/**
 * How the stand-in answers `POST /settle`:
 * - `honest`: settles on chain, answers 200 with the x402 settle response;
 * - `settle-then-502`: settles on chain, then answers what a gateway in front of a facilitator
 *   answers when the facilitator's reply was lost (502, an HTML body);
 * - `settle-then-drop`: settles on chain, then breaks the connection without an answer;
 * - `502-then-settle`: answers 502 at once, settles on chain a little later (a slow facilitator
 *   behind an impatient gateway);
 * - `502-no-settle`: answers 502 and never settles;
 * - `refuse`: answers 200 `success: false` with a reason, settling nothing.
 */
export type SettleMode =
  | "honest"
  | "settle-then-502"
  | "settle-then-drop"
  | "502-then-settle"
  | "502-no-settle"
  | "refuse";

export interface HttpFacilitatorStandIn {
  /** FACILITATOR_URL for the service */
  url: string;
  mode: SettleMode;
  /** `POST /settle` requests received */
  settleCalls: number;
  /** settlements this stand-in made on chain */
  readonly settled: FacilitatorResult<SettleOk>[];
  /** resolves when every late settlement (`502-then-settle`) has landed */
  lateSettlements(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A standard x402 v1 facilitator over HTTP (`/verify`, `/settle`, `/supported`), settling on the
 * local chain with the real local facilitator, whose answers to `/settle` can be made to fail the
 * ways a real one behind a gateway does. The outside world for the funding tests, not a mock.
 */
export async function startHttpFacilitator(chain: LocalChain): Promise<HttpFacilitatorStandIn> {
  const key = chain.devAccounts[1]?.privateKey;
  if (!key) throw new Error("dev accounts missing");
  const inner = createLocalFacilitator({ rpcUrl: chain.rpcUrl, chainId: chain.chainId, privateKey: key });
  const late: Promise<unknown>[] = [];
  const state: HttpFacilitatorStandIn = {
    url: "",
    mode: "honest",
    settleCalls: 0,
    settled: [],
    lateSettlements: async () => {
      await Promise.all(late);
    },
    close: async () => undefined,
  };
  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const settleNow = async (p: PaymentPayload, r: PaymentRequirements) => {
    const out = await inner.settle(p, r);
    state.settled.push(out);
    return out;
  };
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === "GET" && req.url === "/supported") {
      send(res, 200, { kinds: [{ x402Version: 1, scheme: "exact", network: "base" }] });
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
      paymentPayload: PaymentPayload;
      paymentRequirements: PaymentRequirements;
    };
    const { paymentPayload: p, paymentRequirements: r } = body;
    if (req.url === "/verify") {
      const v = await inner.verify(p, r);
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
    const gateway502 = () => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end("<html><body><h1>502 Bad Gateway</h1></body></html>");
    };
    switch (state.mode) {
      case "honest": {
        const s = await settleNow(p, r);
        if (s.ok) send(res, 200, s.value.response);
        else
          send(res, 200, {
            success: false,
            errorReason: s.failure.reason ?? "unexpected_settle_error",
            transaction: "",
            network: "base",
          });
        return;
      }
      case "settle-then-502":
        await settleNow(p, r);
        gateway502();
        return;
      case "settle-then-drop":
        await settleNow(p, r);
        req.socket.destroy();
        return;
      case "502-then-settle":
        gateway502();
        late.push(new Promise((resolve) => setTimeout(resolve, 300)).then(() => settleNow(p, r)));
        return;
      case "502-no-settle":
        gateway502();
        return;
      case "refuse":
        send(res, 200, {
          success: false,
          errorReason: "invalid_exact_evm_payload_signature",
          transaction: "",
          network: "base",
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
