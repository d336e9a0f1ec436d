import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { expect } from "vitest";
import type { TestApp } from "./harness.js";

/** Test actors that use the service the way clients do: through HTTP. */
export interface SignedInUser {
  walletAddress: string;
  accountId: string;
  /** `svc_session=<value>` for a Cookie header */
  cookie: string;
  privateKey: `0x${string}`;
}

export function newWallet(): { address: string; privateKey: `0x${string}` } {
  const privateKey = generatePrivateKey();
  return { address: privateKeyToAccount(privateKey).address, privateKey };
}

export function cookieFrom(res: Response): string {
  const set = res.headers.get("set-cookie") ?? "";
  const m = /svc_session=([^;]*)/.exec(set);
  if (!m) throw new Error(`no svc_session cookie in ${set}`);
  return `svc_session=${m[1]}`;
}

/** Signs in through POST /auth/idp/verify with tokens from the app's local IdP. */
export async function signIn(app: TestApp, wallet = newWallet()): Promise<SignedInUser> {
  const { accessToken, identityToken } = await app.idp.mintTokens(wallet.address);
  const res = await fetch(`${app.baseUrl}/auth/idp/verify`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ accessToken, identityToken, walletAddress: wallet.address }),
  });
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { accountId: string; walletAddress: string };
  return {
    walletAddress: body.walletAddress,
    accountId: body.accountId,
    cookie: cookieFrom(res),
    privateKey: wallet.privateKey,
  };
}

/** Mints an API key through the session route. */
export async function createKey(
  app: TestApp,
  user: SignedInUser,
  name = "test key",
): Promise<{ id: string; apiKey: string }> {
  const res = await fetch(`${app.baseUrl}/v1/account/api-keys`, {
    method: "POST",
    headers: { "content-type": "application/json", cookie: user.cookie },
    body: JSON.stringify({ name }),
  });
  if (res.status !== 201) throw new Error(`key creation failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as { id: string; apiKey: string };
}

export interface Call {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** An HTTP answer as tests read it: the status, the body (parsed when it is JSON) and the headers. */
export type Res = { status: number; body: unknown; headers: Headers };

export function bearer(apiKey: string): Record<string, string> {
  return { authorization: `Bearer ${apiKey}` };
}

export async function call(app: TestApp, c: Call): Promise<Res> {
  const res = await fetch(`${app.baseUrl}${c.path}`, {
    method: c.method,
    headers: { ...(c.body !== undefined ? { "content-type": "application/json" } : {}), ...c.headers },
    body: c.body !== undefined ? JSON.stringify(c.body) : undefined,
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body, headers: res.headers };
}

/** A POST with an API key as the bearer. */
export function postWithKey(app: TestApp, apiKey: string, path: string, body: unknown): Promise<Res> {
  return call(app, { method: "POST", path, headers: bearer(apiKey), body });
}

/** Mints a key with another key (POST /v1/agent/keys), expecting 201: its id and secret. */
export async function mintAgentKey(
  app: TestApp,
  apiKey: string,
  body: Record<string, unknown>,
): Promise<{ id: string; apiKey: string }> {
  const r = await postWithKey(app, apiKey, "/v1/agent/keys", body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; apiKey: string };
}

/** Sends a raw (possibly malformed) JSON body. */
export async function rawPost(
  app: TestApp,
  path: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<Res> {
  const res = await fetch(`${app.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers };
}
