import { privateKeyToAccount } from "viem/accounts";
import { createSiweMessage } from "viem/siwe";
import { describe, expect } from "vitest";
import { upsertAccountByWallet } from "../../../src/domain/accounts/account-upsert.js";
import { call, cookieFrom, newWallet } from "../../../testkit/actors.js";
import { appTest as test } from "../../../testkit/app-test.js";
import type { TestApp } from "../../../testkit/harness.js";

/**
 * Issue 26 finding 6: `authProvider` is the spec's enum `idp`, `siwe` on every surface. An account a
 * paid signup created is stored `x402` until its first sign-in; that value stays internal. A session
 * surface answers the provider of the caller's session; a Bearer caller the account's sign-in
 * provider, or null while the wallet has never signed in (docs/decisions.md, issue 26 finding 6).
 */

type Wallet = ReturnType<typeof newWallet>;

/** What POST /v1/x402/signup does to the account table, and the key it mints. */
async function signupAccount(app: TestApp, wallet: Wallet) {
  const account = await app.rt.db.$transaction((tx) =>
    upsertAccountByWallet(tx, { walletAddress: wallet.address, provider: "x402", maxPriceCentsPerDollar: 60 }),
  );
  const key = await app.rt.services.apiKeys.createKey({
    actor: { accountId: account.id, credential: "session" },
    name: "signup",
    source: "signup",
  });
  return { accountId: account.id, apiKey: key.apiKey };
}

async function idpSignIn(app: TestApp, wallet: Wallet) {
  const { accessToken, identityToken } = await app.idp.mintTokens(wallet.address);
  const res = await fetch(`${app.baseUrl}/auth/idp/verify`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ accessToken, identityToken, walletAddress: wallet.address }),
  });
  expect(res.status).toBe(200);
  return { cookie: cookieFrom(res), body: (await res.json()) as { authProvider: string } };
}

async function siweSignIn(app: TestApp, wallet: Wallet) {
  const n = (await call(app, { method: "POST", path: "/auth/siwe/nonce" })).body as { nonce: string };
  const message = createSiweMessage({
    address: privateKeyToAccount(wallet.privateKey).address,
    domain: new URL(app.baseUrl).host,
    uri: app.baseUrl,
    chainId: 8453,
    version: "1",
    nonce: n.nonce,
    issuedAt: new Date(),
  });
  const signature = await privateKeyToAccount(wallet.privateKey).signMessage({ message });
  const res = await fetch(`${app.baseUrl}/auth/siwe/verify`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message, signature }),
  });
  expect(res.status).toBe(200);
  return { cookie: cookieFrom(res), body: (await res.json()) as { authProvider: string } };
}

async function rest(app: TestApp, path: string, headers: Record<string, string>) {
  const r = await call(app, { method: "GET", path, headers });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as Record<string, unknown>;
}

async function viewerProvider(app: TestApp, headers: Record<string, string>): Promise<unknown> {
  const res = await fetch(`${app.baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ query: "{ viewer { authProvider } }" }),
  });
  const body = (await res.json()) as { data?: { viewer: { authProvider: unknown } | null }; errors?: unknown };
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return body.data?.viewer?.authProvider;
}

/** Every surface that carries `authProvider`, for one caller. */
async function surfaces(app: TestApp, session: { cookie: string } | null, apiKey: string) {
  const bearer = { authorization: `Bearer ${apiKey}` };
  const agentMe = await rest(app, "/v1/agent/me", bearer);
  return {
    me: session ? (await rest(app, "/v1/me", { cookie: session.cookie })).authProvider : undefined,
    account: session ? (await rest(app, "/v1/account", { cookie: session.cookie })).authProvider : undefined,
    graphqlSession: session ? await viewerProvider(app, { cookie: session.cookie }) : undefined,
    graphqlBearer: await viewerProvider(app, bearer),
    agentMe: "authProvider" in agentMe ? agentMe.authProvider : "absent",
  };
}

describe("an account first created by a paid signup", () => {
  test("before any sign-in: no surface says x402 (a Bearer caller reads null)", async ({ app }) => {
    const wallet = newWallet();
    const s = await signupAccount(app, wallet);
    expect((await app.rt.db.account.findUniqueOrThrow({ where: { id: s.accountId } })).authProvider).toBe("x402");
    expect(await surfaces(app, null, s.apiKey)).toEqual({
      me: undefined,
      account: undefined,
      graphqlSession: undefined,
      graphqlBearer: null,
      agentMe: "absent",
    });
  });

  test("then SIWE, then the IdP: each session answers its own provider; the key, the account's", async ({ app }) => {
    const wallet = newWallet();
    const s = await signupAccount(app, wallet);

    const siwe = await siweSignIn(app, wallet);
    expect(siwe.body.authProvider).toBe("siwe");
    expect(await surfaces(app, siwe, s.apiKey)).toEqual({
      me: "siwe",
      account: "siwe",
      graphqlSession: "SIWE",
      graphqlBearer: "SIWE",
      agentMe: "absent",
    });

    const idp = await idpSignIn(app, wallet);
    expect(idp.body.authProvider).toBe("idp");
    expect(await surfaces(app, idp, s.apiKey)).toEqual({
      me: "idp",
      account: "idp",
      graphqlSession: "IDP",
      graphqlBearer: "IDP",
      agentMe: "absent",
    });
    // the SIWE session is still live and still a SIWE session
    expect(await surfaces(app, siwe, s.apiKey)).toMatchObject({ me: "siwe", account: "siwe", graphqlSession: "SIWE" });
  });

  test("then the IdP, then SIWE: the SIWE sign-in answers siwe, not the account's idp", async ({ app }) => {
    const wallet = newWallet();
    const s = await signupAccount(app, wallet);
    const idp = await idpSignIn(app, wallet);
    expect(idp.body.authProvider).toBe("idp");
    expect(await surfaces(app, idp, s.apiKey)).toMatchObject({
      me: "idp",
      graphqlSession: "IDP",
      graphqlBearer: "IDP",
    });

    const siwe = await siweSignIn(app, wallet);
    expect(siwe.body.authProvider).toBe("siwe");
    expect(await surfaces(app, siwe, s.apiKey)).toEqual({
      me: "siwe",
      account: "siwe",
      graphqlSession: "SIWE",
      graphqlBearer: "IDP",
      agentMe: "absent",
    });
    // the account keeps its strongest sign-in (an IdP account is never downgraded)
    expect((await app.rt.db.account.findUniqueOrThrow({ where: { id: s.accountId } })).authProvider).toBe("idp");
  });
});

describe("the contracts declare exactly the spec's enum", () => {
  test("OpenAPI: AuthProvider is idp, siwe", async ({ app }) => {
    const doc = (await rest(app, "/openapi.json", {})) as {
      components: { schemas: Record<string, { enum?: string[] }> };
    };
    expect(doc.components.schemas.AuthProvider?.enum).toEqual(["idp", "siwe"]);
  });

  test("GraphQL: AuthProvider is IDP, SIWE", async ({ app }) => {
    const res = await fetch(`${app.baseUrl}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: '{ __type(name: "AuthProvider") { enumValues { name } } }' }),
    });
    const body = (await res.json()) as { data: { __type: { enumValues: { name: string }[] } } };
    expect(body.data.__type.enumValues.map((v) => v.name)).toEqual(["IDP", "SIWE"]);
  });
});
