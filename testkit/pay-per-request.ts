import { x402Client } from "@x402/core/client";
import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  encodePaymentSignatureHeader,
} from "@x402/core/http";
import type { SettleResponse } from "@x402/core/types";
import { toClientEvmSigner } from "@x402/evm";
import { UptoEvmScheme } from "@x402/evm/upto/client";
import { appendPaymentIdentifierToExtensions } from "@x402/extensions/payment-identifier";
import { wrapFetchWithPayment } from "@x402/fetch";
import OpenAI from "openai";
import { privateKeyToAccount } from "viem/accounts";
import { type LocalChain, startLocalChain } from "../src/local/chain/index.js";
import { appTest } from "./app-test.js";
import { chainEnv, fundedBuyer } from "./funding.js";
import type { TestApp } from "./harness.js";

/**
 * Pay per request (issue 41): the app on a local chain whose USDC is at Base's address (so a default
 * x402 client, spend controls on, pays it), with the upstream simulator and the in-process
 * facilitator; and a buyer's client as an agent writes it: `@x402/fetch` with `@x402/evm`'s `upto`
 * registration wrapping the OpenAI SDK's fetch.
 */
export const payPerRequestTest = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("chain", { scope: "file" }, async ({}, { onCleanup }) => {
    const chain = await startLocalChain({ usdcAtBaseAddress: true });
    onCleanup(() => chain.stop());
    return chain;
  })
  .override("appOptions", ({ chain }) => ({ env: chainEnv(chain), sim: {}, syncCatalog: true }));

/** A wallet holding `usdcMicro` USDC that made the one-time Permit2 approval `upto` needs. */
export function uptoBuyer(chain: LocalChain, usdcMicro = 5_000_000n) {
  return fundedBuyer(chain, usdcMicro, { approvePermit2: true });
}

/** Every response the paying fetch gave back, in order (`PAYMENT-RESPONSE` and the status). */
export interface PaidExchange {
  status: number;
  paymentResponse: SettleResponse | undefined;
  headers: Headers;
}

/**
 * A default `@x402/fetch` client: `x402Client` with `@x402/evm`'s upto scheme on every EVM network
 * and its default spend controls (Base's USDC, at most $1 a payment); `exchanges` records each
 * final answer.
 */
export function uptoFetch(privateKey: `0x${string}`): { fetch: typeof fetch; exchanges: PaidExchange[] } {
  const client = new x402Client().register(
    "eip155:*",
    new UptoEvmScheme(toClientEvmSigner(privateKeyToAccount(privateKey))),
  );
  const paying = wrapFetchWithPayment(fetch, client);
  const exchanges: PaidExchange[] = [];
  const recorded: typeof fetch = async (input, init) => {
    const res = await paying(input, init);
    const header = res.headers.get("payment-response");
    exchanges.push({
      status: res.status,
      paymentResponse: header ? decodePaymentResponseHeader(header) : undefined,
      headers: res.headers,
    });
    return res;
  };
  return { fetch: recorded, exchanges };
}

/** The OpenAI SDK at the pay-per-request base URL, paying through `uptoFetch` (its apiKey is sent, and ignored). */
export function paidOpenAI(app: TestApp, privateKey: `0x${string}`) {
  const { fetch, exchanges } = uptoFetch(privateKey);
  const client = new OpenAI({ baseURL: `${app.baseUrl}/x402/v1`, apiKey: "not-a-key", fetch, maxRetries: 0 });
  return { client, exchanges };
}

/** One raw call of a pay-per-request route: status, headers and JSON body (or text). */
export async function x402Post(app: TestApp, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${app.baseUrl}/x402/v1${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, headers: res.headers, body: json, text };
}

/** The payment row of a payer (the latest). */
export function paymentOfPayer(app: TestApp, payer: string) {
  return app.rt.db.requestPayment.findFirstOrThrow({
    where: { payerAddress: payer.toLowerCase() },
    orderBy: { createdAt: "desc" },
  });
}

/**
 * The buyer signs a call's 402 as `@x402/fetch` does (the 402's extensions echoed) and, with `id`,
 * adds a payment-identifier (`unchecked`: as given, valid or not): the `PAYMENT-SIGNATURE` value.
 * `timeoutSeconds` signs as a client that asks for another validity than the 402's
 * `maxTimeoutSeconds` (its authorization's deadline is now + that).
 */
export async function signedUpto(
  app: TestApp,
  buyer: { privateKey: `0x${string}` },
  path: string,
  body: unknown,
  o: { id?: string; unchecked?: boolean; timeoutSeconds?: number } = {},
): Promise<string> {
  const challenge = await x402Post(app, path, body);
  const header = challenge.headers.get("payment-required");
  if (challenge.status !== 402 || !header) throw new Error(`expected a 402, got ${challenge.status} ${challenge.text}`);
  const client = new x402Client()
    .register("eip155:*", new UptoEvmScheme(toClientEvmSigner(privateKeyToAccount(buyer.privateKey))))
    .setSpendControls(false);
  const required = decodePaymentRequiredHeader(header);
  const timeout = o.timeoutSeconds;
  const asked =
    timeout === undefined
      ? required
      : { ...required, accepts: required.accepts.map((a) => ({ ...a, maxTimeoutSeconds: timeout })) };
  const payload = await client.createPaymentPayload(asked);
  if (o.id === undefined) return encodePaymentSignatureHeader(payload);
  const extensions = { ...(payload.extensions ?? {}) };
  if (o.unchecked) {
    // as a client that does not check it would send it
    const declared = extensions["payment-identifier"] as { info?: Record<string, unknown> } | undefined;
    extensions["payment-identifier"] = { ...declared, info: { ...declared?.info, id: o.id } };
  } else appendPaymentIdentifierToExtensions(extensions, o.id);
  return encodePaymentSignatureHeader({ ...payload, extensions });
}

/** A chat body on zai-org-glm-5-1 with a 64-token cap, `content` as the one user message. */
export const chatBody = (content: string, extra: Record<string, unknown> = {}) => ({
  model: "zai-org-glm-5-1",
  max_tokens: 64,
  messages: [{ role: "user", content }],
  ...extra,
});
