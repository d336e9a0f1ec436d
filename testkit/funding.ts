import type { Address } from "viem";
import { type Account, privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "x402/client";
import type { PaymentRequirements } from "x402/types";
import { wrapFetchWithPayment } from "x402-fetch";
import { createChainGateway } from "../src/adapters/chain/usdc-gateway.js";
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

/**
 * A fresh buyer wallet holding `usdcMicro` USDC on the local chain. `approvePermit2`: it also made
 * the one-time Permit2 approval x402 `upto` needs (`LocalChain.approvePermit2`, which gives it gas
 * for that); without it the wallet holds no ETH, and an upto payment needs the EIP-2612 extension.
 */
export async function fundedBuyer(
  chain: LocalChain,
  usdcMicro: bigint,
  opts: { approvePermit2?: boolean } = {},
): Promise<Account & { privateKey: `0x${string}` }> {
  const { generatePrivateKey } = await import("viem/accounts");
  const privateKey = generatePrivateKey();
  const account = privateKeyToAccount(privateKey);
  if (usdcMicro > 0n) await chain.mintUsdc(account.address, usdcMicro);
  if (opts.approvePermit2) await chain.approvePermit2(privateKey);
  return Object.assign(account, { privateKey });
}

export interface FundingCall {
  path: "/v1/x402/signup" | "/v1/x402/top-up" | "/v1/x402/refill";
  body: Record<string, unknown>;
  headers?: Record<string, string>;
}

/** A signup call (POST /v1/x402/signup) for `amount` micro-USDC, with more body fields in `extra`. */
export const signupCall = (amount: number, extra: Record<string, unknown> = {}): FundingCall => ({
  path: "/v1/x402/signup",
  body: { amountMicroUsdc: amount, ...extra },
});

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

/** The service's chain adapter pointed at a local chain: what the service reads and sends through. */
export function chainGateway(chain: LocalChain) {
  return createChainGateway({ rpcUrl: chain.rpcUrl, chainId: chain.chainId, usdcAddress: chain.usdcAddress });
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

/**
 * The payer cancels an EIP-3009 authorization on chain (`cancelAuthorization`, the token emits
 * `AuthorizationCanceled`): signed by `payer`, sent by dev account 9 (anyone may send it). Resolves
 * with the transaction once mined; throws when it reverted (e.g. the nonce was already used).
 */
export async function cancelAuthorization(
  chain: LocalChain,
  payer: { privateKey: `0x${string}` },
  nonce: `0x${string}`,
): Promise<`0x${string}`> {
  const { createWalletClient, http, publicActions } = await import("viem");
  const { localUsdcAbi } = await import("../src/local/chain/index.js");
  const signer = privateKeyToAccount(payer.privateKey);
  const signature = await signer.signTypedData({
    domain: { name: "USD Coin", version: "2", chainId: chain.chainId, verifyingContract: chain.usdcAddress },
    types: {
      CancelAuthorization: [
        { name: "authorizer", type: "address" },
        { name: "nonce", type: "bytes32" },
      ],
    },
    primaryType: "CancelAuthorization",
    message: { authorizer: signer.address, nonce },
  });
  const sender = chain.devAccounts[9];
  if (!sender) throw new Error("dev accounts missing");
  const wallet = createWalletClient({
    account: privateKeyToAccount(sender.privateKey),
    chain: {
      id: chain.chainId,
      name: "local",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [chain.rpcUrl] } },
    },
    transport: http(chain.rpcUrl),
  }).extend(publicActions);
  const hash = await wallet.writeContract({
    address: chain.usdcAddress,
    abi: localUsdcAbi,
    functionName: "cancelAuthorization",
    args: [signer.address, nonce, signature],
  });
  const receipt = await wallet.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  if (receipt.status !== "success") throw new Error(`cancelAuthorization reverted (tx ${hash})`);
  return hash;
}

/** An EIP-3009 authorization as an `X-PAYMENT` carries it (decimal strings, bytes32 nonce). */
export interface XPaymentAuthorization {
  from: `0x${string}`;
  to: `0x${string}`;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: `0x${string}`;
}

/** The authorization and signature inside an `X-PAYMENT` value (base64 JSON, x402 v1). */
export function readXPayment(header: string): { authorization: XPaymentAuthorization; signature: `0x${string}` } {
  const p = JSON.parse(Buffer.from(header, "base64").toString("utf8")) as {
    payload: { authorization: XPaymentAuthorization; signature: `0x${string}` };
  };
  return p.payload;
}

/** An `X-PAYMENT` value (x402 v1 `exact` on `base`) carrying this authorization and signature as given. */
export function writeXPayment(authorization: XPaymentAuthorization, signature: `0x${string}`): string {
  const payload = { x402Version: 1, scheme: "exact", network: "base", payload: { signature, authorization } };
  return Buffer.from(JSON.stringify(payload)).toString("base64");
}

/**
 * `signer` signs the EIP-3009 `TransferWithAuthorization` of `authorization` for the local USDC
 * (domain "USD Coin" / "2" on the chain), as an x402 client does, but with every field chosen by
 * the test (e.g. another payer's nonce).
 */
export async function signAuthorization(
  chain: LocalChain,
  signer: { privateKey: `0x${string}` },
  authorization: XPaymentAuthorization,
): Promise<`0x${string}`> {
  const a = authorization;
  return privateKeyToAccount(signer.privateKey).signTypedData({
    domain: { name: "USD Coin", version: "2", chainId: chain.chainId, verifyingContract: chain.usdcAddress },
    types: {
      TransferWithAuthorization: [
        { name: "from", type: "address" },
        { name: "to", type: "address" },
        { name: "value", type: "uint256" },
        { name: "validAfter", type: "uint256" },
        { name: "validBefore", type: "uint256" },
        { name: "nonce", type: "bytes32" },
      ],
    },
    primaryType: "TransferWithAuthorization",
    message: {
      from: a.from,
      to: a.to,
      value: BigInt(a.value),
      validAfter: BigInt(a.validAfter),
      validBefore: BigInt(a.validBefore),
      nonce: a.nonce,
    },
  });
}

/**
 * Signs in as `wallet` with SIWE the way an agent does without a browser: `POST /auth/siwe/nonce`,
 * an EIP-4361 message for the domain, URI and chain that answer names, signed by the wallet's key,
 * then `POST /auth/siwe/verify`. Returns the session cookie.
 */
export async function siweSession(app: TestApp, wallet: { privateKey: `0x${string}` }): Promise<string> {
  const { createSiweMessage } = await import("viem/siwe");
  const nonce = await fetch(`${app.baseUrl}/auth/siwe/nonce`, { method: "POST" });
  if (nonce.status !== 200) throw new Error(`siwe nonce: ${nonce.status}`);
  const n = (await nonce.json()) as { nonce: string; domain: string; uri: string; chainId: number };
  const signer = privateKeyToAccount(wallet.privateKey);
  const message = createSiweMessage({
    address: signer.address,
    domain: n.domain,
    uri: n.uri,
    chainId: n.chainId,
    version: "1",
    nonce: n.nonce,
    issuedAt: new Date(),
  });
  const res = await fetch(`${app.baseUrl}/auth/siwe/verify`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message, signature: await signer.signMessage({ message }) }),
  });
  if (res.status !== 200) throw new Error(`siwe verify: ${res.status} ${await res.text()}`);
  const cookie = res.headers.get("set-cookie")?.split(";")[0];
  if (!cookie) throw new Error("siwe verify set no cookie");
  return cookie;
}
