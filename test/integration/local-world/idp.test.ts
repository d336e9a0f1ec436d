import { decodeJwt, decodeProtectedHeader } from "jose";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createIdpVerifier, type IdpVerifier } from "../../../src/adapters/idp/verify.js";
import {
  createLocalIdp,
  exportKeyPair,
  importKeyPair,
  type LocalIdp,
  type MintTokenOptions,
} from "../../../src/local/idp/index.js";
import { closedPortUrl, sendJson, startTestServer, type TestServer } from "../../../testkit/stub-server.js";

const APP_ID = "app-local-test";
let idp: LocalIdp;
let verifier: IdpVerifier;
const wallet = privateKeyToAccount(generatePrivateKey()).address;

beforeAll(() => {
  idp = createLocalIdp({ appId: APP_ID });
  verifier = createIdpVerifier({ appId: APP_ID, issuer: "privy.io", verificationKeyPem: idp.publicKeyPem });
});

async function login(opts: MintTokenOptions = {}, walletAddress: string = wallet, v: IdpVerifier = verifier) {
  const tokens = await idp.mintTokens(wallet, opts);
  return v.verifyLogin({ accessToken: tokens.accessToken, identityToken: tokens.identityToken, walletAddress });
}

describe("local IdP tokens look like Privy's", () => {
  test("access and identity token claims", async () => {
    const { accessToken, identityToken, subject } = await idp.mintTokens(wallet);
    expect(decodeProtectedHeader(accessToken)).toEqual({ alg: "ES256", typ: "JWT", kid: idp.kid });
    const access = decodeJwt(accessToken);
    expect(access).toMatchObject({ iss: "privy.io", aud: APP_ID, sub: subject });
    expect(subject).toMatch(/^did:privy:c[0-9a-z]{24}$/);
    expect(typeof access.sid).toBe("string");
    expect((access.exp ?? 0) - (access.iat ?? 0)).toBe(3600);

    const identity = decodeJwt(identityToken);
    expect(identity).toMatchObject({ iss: "privy.io", aud: APP_ID, sub: subject });
    expect(typeof identity.linked_accounts).toBe("string");
    const linked = JSON.parse(identity.linked_accounts as string) as Record<string, unknown>[];
    expect(linked).toContainEqual(
      expect.objectContaining({
        type: "wallet",
        address: wallet,
        chain_type: "ethereum",
        wallet_client_type: "metamask",
      }),
    );
    // same wallet → same user across logins, like Privy
    expect((await idp.mintTokens(wallet.toLowerCase())).subject).toBe(subject);
  });

  test("jwks publishes the signing key", () => {
    expect(idp.jwks.keys).toEqual([expect.objectContaining({ kty: "EC", crv: "P-256", kid: idp.kid, alg: "ES256" })]);
    expect(idp.publicKeyPem).toMatch(/^-----BEGIN PUBLIC KEY-----/);
  });
});

describe("verifyLogin: success", () => {
  test("good tokens verify; wallet match is case-insensitive", async () => {
    const result = await login({}, wallet.toLowerCase());
    expect(result).toMatchObject({
      ok: true,
      value: { linkedWallets: expect.arrayContaining([wallet.toLowerCase()]) },
    });
    if (result.ok) {
      expect(result.value.subject).toMatch(/^did:privy:/);
      expect(result.value.linkedWallets).toEqual([wallet.toLowerCase()]);
      expect(typeof result.value.sessionId).toBe("string");
    }
    expect((await login({}, wallet.toUpperCase().replace("0X", "0x"))).ok).toBe(true);
  });

  test("several linked wallets and an array-valued linked_accounts are accepted", async () => {
    const other = privateKeyToAccount(generatePrivateKey()).address;
    const result = await login({ linkedWallets: [other, wallet], linkedAccountsAs: "array" });
    expect(result.ok && result.value.linkedWallets).toEqual([other.toLowerCase(), wallet.toLowerCase()]);
  });

  test("exported key pair round-trips (dev process persistence)", async () => {
    const exported = idp.exportKeyPair();
    expect(exported).toEqual(exportKeyPair(idp.keyPair));
    const revived = createLocalIdp({
      appId: APP_ID,
      keyPair: importKeyPair({ privateKeyPem: exported.privateKeyPem }),
    });
    expect(revived.kid).toBe(idp.kid);
    expect(revived.publicKeyPem).toBe(idp.publicKeyPem);
    const tokens = await revived.mintTokens(wallet);
    expect((await verifier.verifyLogin({ ...tokens, walletAddress: wallet })).ok).toBe(true);
  });

  describe("via JWKS URL", () => {
    let jwksServer: TestServer;
    beforeAll(async () => {
      jwksServer = await startTestServer((_req, res) => sendJson(res, 200, idp.jwks));
    });
    afterAll(async () => {
      await jwksServer?.close();
    });

    test("verifies against the published JWKS", async () => {
      const v = createIdpVerifier({ appId: APP_ID, issuer: "privy.io", jwksUrl: `${jwksServer.url}/jwks.json` });
      expect((await login({}, wallet, v)).ok).toBe(true);
      const stranger = createLocalIdp({ appId: APP_ID });
      expect(await login({ signWith: stranger.keyPair }, wallet, v)).toMatchObject({
        ok: false,
        failure: { reason: "bad_signature" },
      });
    });

    test("an unreachable JWKS is idp_unavailable", async () => {
      const v = createIdpVerifier({ appId: APP_ID, issuer: "privy.io", jwksUrl: `${await closedPortUrl()}/jwks.json` });
      expect(await login({}, wallet, v)).toMatchObject({ ok: false, failure: { reason: "idp_unavailable" } });
    });
  });
});

describe("verifyLogin: rejection", () => {
  test.each([
    {
      label: "signed with another key",
      opts: { signWith: createLocalIdp({ appId: APP_ID }).keyPair },
      reason: "bad_signature",
    },
    { label: "wrong audience", opts: { audience: "someone-else" }, reason: "wrong_audience" },
    { label: "wrong issuer", opts: { issuer: "evil.example" }, reason: "wrong_issuer" },
    { label: "expired", opts: { expired: true }, reason: "token_expired" },
    { label: "no wallet linked", opts: { linkedWallets: [] }, reason: "wallet_not_linked" },
    {
      label: "only another wallet linked",
      opts: { linkedWallets: [privateKeyToAccount(generatePrivateKey()).address] },
      reason: "wallet_not_linked",
    },
    {
      label: "tokens of different users",
      opts: { identitySubject: "did:privy:someoneelse0000000000000000" },
      reason: "subject_mismatch",
    },
  ] satisfies { label: string; opts: MintTokenOptions; reason: string }[])(
    "$label → $reason",
    async ({ opts, reason }) => {
      expect(await login(opts)).toMatchObject({ ok: false, failure: { reason } });
    },
  );

  test("malformed tokens and wallet addresses", async () => {
    const good = await idp.mintTokens(wallet);
    expect(
      await verifier.verifyLogin({
        accessToken: "not-a-jwt",
        identityToken: good.identityToken,
        walletAddress: wallet,
      }),
    ).toMatchObject({ ok: false, failure: { reason: "malformed_token", token: "access" } });
    expect(
      await verifier.verifyLogin({
        accessToken: good.accessToken,
        identityToken: good.identityToken,
        walletAddress: "0x123",
      }),
    ).toMatchObject({ ok: false, failure: { reason: "invalid_wallet_address" } });
    // same signing key, but minted for another app: the audience check catches it
    const otherApp = createLocalIdp({ appId: "other-app", keyPair: idp.keyPair });
    const foreign = await otherApp.mintTokens(wallet);
    expect(
      await verifier.verifyLogin({
        accessToken: foreign.accessToken,
        identityToken: good.identityToken,
        walletAddress: wallet,
      }),
    ).toMatchObject({ ok: false, failure: { reason: "wrong_audience", token: "access" } });
  });

  test("configuration errors fail at construction", () => {
    expect(() => createIdpVerifier({ appId: APP_ID, issuer: "privy.io" })).toThrow(
      /IDP_VERIFICATION_KEY or IDP_JWKS_URL/,
    );
    expect(() => createIdpVerifier({ appId: APP_ID, issuer: "privy.io", verificationKeyPem: "nope" })).toThrow();
  });
});
