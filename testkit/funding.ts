import type { Address } from "viem";
import { type Account, privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "x402/client";
import type { PaymentRequirements } from "x402/types";
import { wrapFetchWithPayment } from "x402-fetch";
import { type LocalChain, startLocalChain } from "../src/local/chain/index.js";
import type { TestApp } from "./harness.js";

/** Environment that points a test app at a local chain with the in-process facilitator. */
export function chainEnv(chain: LocalChain, extra: Record<string, string> = {}): Record<string, string> {
  const [, facilitator, payTo] = chain.devAccounts;
  if (!facilitator || !payTo) throw new Error("dev accounts missing");
  return {
    CHAIN_RPC_URL: chain.rpcUrl,
    CHAIN_ID: "8453",
    USDC_ADDRESS: chain.usdcAddress,
    PAY_TO: payTo.address,
    FACILITATOR_URL: "local",
    FACILITATOR_PRIVATE_KEY: facilitator.privateKey,
    CONFIRMATION_BLOCKS: "5",
    ...extra,
  };
}

export { startLocalChain };

/** A fresh buyer wallet holding `usdcMicro` USDC on the local chain. */
export async function fundedBuyer(
  chain: LocalChain,
  usdcMicro: bigint,
): Promise<Account & { privateKey: `0x${string}` }> {
  const { generatePrivateKey } = await import("viem/accounts");
  const privateKey = generatePrivateKey();
  const account = privateKeyToAccount(privateKey);
  if (usdcMicro > 0n) await chain.mintUsdc(account.address, usdcMicro);
  return Object.assign(account, { privateKey });
}

export interface FundingCall {
  path: "/v1/x402/signup" | "/v1/x402/top-up" | "/v1/x402/refill";
  body: Record<string, unknown>;
  headers?: Record<string, string>;
}

/**
 * One funding call. `payment`: an `X-PAYMENT` value, or the payment headers to send as they are
 * (`{ "payment-signature": … }` for x402 v2).
 */
export async function post(app: TestApp, c: FundingCall, payment?: string | Record<string, string>) {
  const paymentHeaders = typeof payment === "string" ? { "x-payment": payment } : (payment ?? {});
  const res = await fetch(`${app.baseUrl}${c.path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...c.headers, ...paymentHeaders },
    body: JSON.stringify(c.body),
  });
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, body, headers: res.headers };
}

/** Asks for the challenge, then signs its requirement as the buyer: returns the X-PAYMENT value. */
export async function signedPayment(app: TestApp, buyer: Account, c: FundingCall): Promise<string> {
  const challenge = await post(app, c);
  if (challenge.status !== 402)
    throw new Error(`expected a 402 challenge, got ${challenge.status} ${JSON.stringify(challenge.body)}`);
  const req = (challenge.body.accepts as PaymentRequirements[])[0];
  if (!req) throw new Error("no accepts");
  return createPaymentHeader(buyer as never, 1, req);
}

/**
 * Asks for the challenge, then signs its v2 form (the `PAYMENT-REQUIRED` header) as the buyer with
 * `@x402/core`'s client and `@x402/evm`'s exact scheme, v2 only: returns the `PAYMENT-SIGNATURE` value.
 */
export async function signedPaymentV2(
  app: TestApp,
  buyer: { privateKey: `0x${string}` },
  c: FundingCall,
): Promise<string> {
  const [{ x402Client }, { ExactEvmScheme }, { decodePaymentRequiredHeader, encodePaymentSignatureHeader }] =
    await Promise.all([import("@x402/core/client"), import("@x402/evm/exact/client"), import("@x402/core/http")]);
  const challenge = await post(app, c);
  const header = challenge.headers.get("payment-required");
  if (challenge.status !== 402 || !header) {
    throw new Error(`expected a 402 with PAYMENT-REQUIRED, got ${challenge.status} ${JSON.stringify(challenge.body)}`);
  }
  const client = new x402Client()
    .register("eip155:8453", new ExactEvmScheme(privateKeyToAccount(buyer.privateKey)))
    .setSpendControls(false);
  return encodePaymentSignatureHeader(await client.createPaymentPayload(decodePaymentRequiredHeader(header)));
}

export async function usdcBalance(chain: LocalChain, address: string): Promise<bigint> {
  const { createPublicClient, http, erc20Abi } = await import("viem");
  const client = createPublicClient({ transport: http(chain.rpcUrl) });
  return client.readContract({
    address: chain.usdcAddress,
    abi: erc20Abi,
    functionName: "balanceOf",
    args: [address as `0x${string}`],
  });
}

/** x402 v1 `exact` requirements for the local USDC, as the service will issue them. */
export function usdcRequirements(opts: {
  usdcAddress: Address;
  payTo: Address;
  amountMicro: bigint;
  resource?: string;
}): PaymentRequirements {
  return {
    scheme: "exact",
    network: "base",
    maxAmountRequired: opts.amountMicro.toString(),
    resource: opts.resource ?? "http://127.0.0.1/v1/x402/top-up",
    description: "svc top-up",
    mimeType: "application/json",
    payTo: opts.payTo,
    maxTimeoutSeconds: 300,
    asset: opts.usdcAddress,
    extra: { name: "USD Coin", version: "2" },
  };
}

/**
 * A signup as an agent makes it against a running service at `baseUrl`: x402-fetch (v1) pays the
 * 402 as `buyer` (up to 10 USDC) for `amountMicroUsdc` of credit. The answer's status and body.
 */
export async function x402Signup(
  baseUrl: string,
  buyer: Account,
  amountMicroUsdc: number,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const pay = wrapFetchWithPayment(fetch, buyer as never, 10_000_000n);
  const res = await pay(`${baseUrl}/v1/x402/signup`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ amountMicroUsdc }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
