import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A JSON-RPC node that lags behind the chain: it forwards to `upstream` (the local anvil) but stands
 * still at block `frozenAt` while the chain moves on, as an RPC provider's node that fell behind
 * does. `eth_blockNumber` says `frozenAt`; a receipt or transaction mined after it is not found
 * (`null`); state reads (`eth_call`, `eth_getCode`, `eth_getBalance`) at `latest` or a later block
 * are read at `frozenAt`; a block after it does not exist; logs stop at it. The outside world for
 * the funding tests (the chain gateway talks to it over HTTP like to any node), not a mock.
 * `reverseLogs` answers `eth_getLogs` last log first: a node may return a range's logs in any
 * order it likes. `frozenAt` may be moved at any time; `null` is a node in step with the chain
 * (every call forwarded as it is).
 */
export interface LaggingRpc {
  url: string;
  frozenAt: bigint | null;
  reverseLogs: boolean;
  close(): Promise<void>;
}

interface RpcRequest {
  jsonrpc: "2.0";
  id: unknown;
  method: string;
  params?: unknown[];
}

const TAGS_AT_HEAD = new Set(["latest", "pending", "safe", "finalized"]);

export async function startLaggingRpc(upstream: string, frozenAt: bigint | null): Promise<LaggingRpc> {
  const forward = async (req: RpcRequest): Promise<{ result?: unknown; error?: unknown }> => {
    const res = await fetch(upstream, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(req),
    });
    return (await res.json()) as { result?: unknown; error?: unknown };
  };
  const hex = (n: bigint) => `0x${n.toString(16)}`;

  const answer = async (req: RpcRequest): Promise<{ result?: unknown; error?: unknown }> => {
    const params = req.params ?? [];
    const frozenAt = state.frozenAt;
    if (frozenAt === null) {
      const r = await forward(req);
      return state.reverseLogs && req.method === "eth_getLogs" && Array.isArray(r.result)
        ? { result: [...r.result].reverse() }
        : r;
    }
    const held = (tag: unknown): unknown =>
      typeof tag === "string" && (TAGS_AT_HEAD.has(tag) || (tag.startsWith("0x") && BigInt(tag) > frozenAt))
        ? hex(frozenAt)
        : tag;
    const afterHead = (blockNumber: unknown) => typeof blockNumber === "string" && BigInt(blockNumber) > frozenAt;
    switch (req.method) {
      case "eth_blockNumber":
        return { result: hex(frozenAt) };
      case "eth_getTransactionReceipt":
      case "eth_getTransactionByHash": {
        const r = await forward(req);
        const found = r.result as { blockNumber?: string } | null | undefined;
        return found && afterHead(found.blockNumber) ? { result: null } : r;
      }
      case "eth_call":
      case "eth_getCode":
      case "eth_getBalance":
      case "eth_getTransactionCount":
        return forward({ ...req, params: [...params.slice(0, -1), held(params[params.length - 1] ?? "latest")] });
      case "eth_getBlockByNumber": {
        const tag = params[0];
        if (typeof tag === "string" && tag.startsWith("0x") && afterHead(tag)) return { result: null };
        return forward({ ...req, params: [held(tag), ...params.slice(1)] });
      }
      case "eth_getLogs": {
        const filter = { ...(params[0] as Record<string, unknown>) };
        filter.toBlock = held(filter.toBlock ?? "latest");
        const r = await forward({ ...req, params: [filter] });
        return state.reverseLogs && Array.isArray(r.result) ? { result: [...r.result].reverse() } : r;
      }
      default:
        return forward(req);
    }
  };

  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as RpcRequest | RpcRequest[];
    const one = async (r: RpcRequest) => ({ jsonrpc: "2.0", id: r.id, ...(await answer(r)) });
    const out = Array.isArray(body) ? await Promise.all(body.map(one)) : await one(body);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(out));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const state: LaggingRpc = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    frozenAt,
    reverseLogs: false,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return state;
}
