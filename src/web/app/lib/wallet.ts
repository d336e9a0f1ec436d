import { getAddress, type Hex, stringToHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createSiweMessage } from "viem/siwe";
import type { AppConfig } from "./config";
import { DEV_WALLET_KEY, failure, postJson } from "./http";

/**
 * Wallets in the browser: an injected EIP-1193 provider (a wallet extension), or, in local mode,
 * a seeded dev wallet behind the same EIP-1193 surface (anvil's public test keys, handed out only
 * by a local-mode server), so SIWE and the x402 top-up run the same code for both.
 */

export interface Eip1193Provider {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

declare global {
  interface Window {
    ethereum?: Eip1193Provider;
  }
}

export interface DevWallet {
  label: string;
  role: "supplier" | "buyer";
  address: string;
  privateKey: Hex;
}

export function injectedProvider(): Eip1193Provider | undefined {
  return typeof window !== "undefined" ? window.ethereum : undefined;
}

/** A dev wallet as an EIP-1193 provider: accounts, chain id, personal_sign, eth_signTypedData_v4. */
export function devWalletProvider(wallet: DevWallet, chainId: number): Eip1193Provider {
  const account = privateKeyToAccount(wallet.privateKey);
  return {
    async request({ method, params = [] }) {
      switch (method) {
        case "eth_requestAccounts":
        case "eth_accounts":
          return [account.address];
        case "eth_chainId":
          return `0x${chainId.toString(16)}`;
        case "wallet_switchEthereumChain":
          return null;
        case "personal_sign":
          return account.signMessage({ message: { raw: params[0] as Hex } });
        case "eth_signTypedData_v4": {
          const typed = JSON.parse(String(params[1])) as Parameters<typeof account.signTypedData>[0];
          return account.signTypedData(typed);
        }
        default:
          throw new Error(`The dev wallet does not support ${method}.`);
      }
    },
  };
}

/** Remembers which dev wallet signed in (this tab only), so a top-up can sign with it. */
export function rememberDevWallet(wallet: DevWallet | undefined): void {
  if (wallet) sessionStorage.setItem(DEV_WALLET_KEY, JSON.stringify(wallet));
  else sessionStorage.removeItem(DEV_WALLET_KEY);
}

export function rememberedDevWallet(): DevWallet | undefined {
  try {
    const raw = sessionStorage.getItem(DEV_WALLET_KEY);
    return raw ? (JSON.parse(raw) as DevWallet) : undefined;
  } catch {
    return undefined;
  }
}

export async function fetchDevWallets(): Promise<{ wallets: DevWallet[]; idpTokens: boolean }> {
  const res = await fetch(`${import.meta.env.BASE_URL}dev/wallets`, { cache: "no-store" });
  if (!res.ok) throw new Error(`dev wallets: ${res.status}`);
  return (await res.json()) as { wallets: DevWallet[]; idpTokens: boolean };
}

async function requestAccount(provider: Eip1193Provider): Promise<`0x${string}`> {
  const accounts = (await provider.request({ method: "eth_requestAccounts" })) as string[];
  const first = accounts[0];
  if (!first) throw new Error("The wallet shared no account.");
  return getAddress(first);
}

/** Sign-In with Ethereum: nonce from the service, message signed by the wallet, session cookie set. */
export async function signInWithEthereum(config: AppConfig, provider: Eip1193Provider): Promise<void> {
  const address = await requestAccount(provider);
  const nonce = await postJson(`${config.baseUrl}/auth/siwe/nonce`, {});
  if (nonce.status !== 200) throw failure(nonce.status, nonce.body);
  const n = nonce.body as { nonce: string; domain: string; uri: string; chainId: number };
  const message = createSiweMessage({
    address,
    chainId: n.chainId,
    domain: n.domain,
    nonce: n.nonce,
    uri: n.uri,
    version: "1",
    issuedAt: new Date(),
    statement: "Sign in to the svc inference market.",
  });
  const signature = (await provider.request({
    method: "personal_sign",
    params: [stringToHex(message), address],
  })) as string;
  const verified = await postJson(`${config.baseUrl}/auth/siwe/verify`, { message, signature });
  if (verified.status !== 200) throw failure(verified.status, verified.body);
}

/** The identity-provider path: the provider's access and identity tokens for a linked wallet. */
export async function signInWithIdp(
  config: AppConfig,
  input: { accessToken: string; identityToken: string; walletAddress: string },
): Promise<void> {
  const r = await postJson(`${config.baseUrl}/auth/idp/verify`, {
    ...input,
    idpLoginSurface: "wallet",
  });
  if (r.status !== 200) throw failure(r.status, r.body);
}

/** Local mode: tokens from the local identity provider (only `npm run dev` holds its key). */
export async function mintDevIdpTokens(walletAddress: string): Promise<{ accessToken: string; identityToken: string }> {
  const r = await postJson(`${import.meta.env.BASE_URL}dev/idp-tokens`, { walletAddress });
  if (r.status !== 200) throw failure(r.status, r.body);
  return r.body as { accessToken: string; identityToken: string };
}

/** An x402 `exact` requirement, as both versions name it (v1: network `base`, `maxAmountRequired`; v2: `eip155:<id>`, `amount`). */
interface Requirement {
  scheme: string;
  network: string;
  maxAmountRequired?: string;
  amount?: string;
  payTo: string;
  asset: string;
  maxTimeoutSeconds: number;
  extra?: { name?: string; version?: string };
}

/** The v2 challenge of a 402 (`PAYMENT-REQUIRED`, base64 JSON), when the service sent one. */
interface PaymentRequiredV2 {
  x402Version: 2;
  resource: unknown;
  accepts: Requirement[];
}

function fromBase64Json(value: string): unknown {
  const binary = atob(value);
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0))));
}

/**
 * The requirement to sign and how to send it: x402 v2 when the 402 carries `PAYMENT-REQUIRED`
 * with an `exact` requirement on this chain (`PAYMENT-SIGNATURE`), else v1 from the body (`X-PAYMENT`).
 */
function pickRequirement(
  challenge: { body: Record<string, unknown>; headers: Headers },
  chainId: number,
): { version: 1 | 2; req: Requirement; v2?: PaymentRequiredV2 } | undefined {
  const header = challenge.headers.get("payment-required");
  if (header) {
    try {
      const v2 = fromBase64Json(header) as PaymentRequiredV2;
      const req = v2.accepts?.find((a) => a.scheme === "exact" && a.network === `eip155:${chainId}`);
      if (v2.x402Version === 2 && req?.amount) return { version: 2, req, v2 };
    } catch {
      // an unreadable v2 challenge: pay the v1 one
    }
  }
  const req = ((challenge.body.accepts ?? []) as Requirement[]).find((a) => a.scheme === "exact");
  return req?.maxAmountRequired ? { version: 1, req } : undefined;
}

function randomNonce(): Hex {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `0x${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function base64Json(value: unknown): string {
  const bytes = new TextEncoder().encode(JSON.stringify(value));
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/**
 * x402 top-up (POST /v1/x402/top-up with the session): ask for the challenge, sign the EIP-3009
 * `TransferWithAuthorization` it names with the wallet (the payer must be the signed-in wallet),
 * send it back in the newest x402 version the 402 offers (`PAYMENT-SIGNATURE` for v2, else `X-PAYMENT`
 * for v1). The credit lands as pending and confirms after the confirmation depth.
 */
export async function topUp(
  config: AppConfig,
  provider: Eip1193Provider,
  input: { amountMicroUsdc: bigint; sessionWallet: string },
): Promise<{ pendingUsdc: string; confirmedUsdc: string; topUpAmountUsdc: string }> {
  const from = await requestAccount(provider);
  if (from.toLowerCase() !== input.sessionWallet.toLowerCase()) {
    throw new Error(
      `The wallet's account ${from} is not the signed-in wallet ${input.sessionWallet}: switch accounts in the wallet.`,
    );
  }
  const url = `${config.baseUrl}/v1/x402/top-up`;
  // amounts are 1 to 1000 USDC, far inside a JS safe integer of micro-USDC
  const body = { amountMicroUsdc: Number(input.amountMicroUsdc) };
  const challenge = await postJson(url, body);
  if (challenge.status !== 402) throw failure(challenge.status, challenge.body);
  const picked = pickRequirement(challenge, config.chainId);
  if (!picked) throw new Error("The service offered no x402 exact payment requirement.");
  const { req } = picked;

  try {
    await provider.request({
      method: "wallet_switchEthereumChain",
      params: [{ chainId: `0x${config.chainId.toString(16)}` }],
    });
  } catch {
    // the wallet may refuse or not support switching; signing will tell
  }
  const now = Math.floor(Date.now() / 1000);
  const authorization = {
    from,
    to: getAddress(req.payTo),
    value: (picked.version === 2 ? req.amount : req.maxAmountRequired) ?? "",
    validAfter: String(now - 600),
    validBefore: String(now + Math.max(60, req.maxTimeoutSeconds)),
    nonce: randomNonce(),
  };
  const typedData = {
    types: {
      EIP712Domain: [
        { name: "name", type: "string" },
        { name: "version", type: "string" },
        { name: "chainId", type: "uint256" },
        { name: "verifyingContract", type: "address" },
      ],
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
    domain: {
      name: req.extra?.name ?? "USD Coin",
      version: req.extra?.version ?? "2",
      chainId: config.chainId,
      verifyingContract: getAddress(req.asset),
    },
    message: authorization,
  };
  const signature = (await provider.request({
    method: "eth_signTypedData_v4",
    params: [from, JSON.stringify(typedData)],
  })) as string;
  const paid =
    picked.version === 2
      ? await postJson(url, body, {
          "PAYMENT-SIGNATURE": base64Json({
            x402Version: 2,
            resource: picked.v2?.resource,
            accepted: req,
            payload: { signature, authorization },
          }),
        })
      : await postJson(url, body, {
          "X-PAYMENT": base64Json({
            x402Version: 1,
            scheme: "exact",
            network: req.network,
            payload: { signature, authorization },
          }),
        });
  if (paid.status !== 200) throw failure(paid.status, paid.body);
  return paid.body as { pendingUsdc: string; confirmedUsdc: string; topUpAmountUsdc: string };
}
