import { createPrivateKey, type KeyObject, randomBytes } from "node:crypto";
import { SignJWT } from "jose";

/**
 * CDP (Coinbase Developer Platform) API-key auth for the hosted x402 facilitator.
 *
 * What is implemented — the REST "Bearer JWT" scheme of CDP's own SDK (`@coinbase/cdp-sdk/auth`
 * `generateJwt`), re-done with jose so we need no extra dependency:
 * - one short-lived JWT per request: header `{ alg, kid: <key id>, typ: "JWT", nonce: <16 random
 *   bytes hex> }`, claims `{ sub: <key id>, iss: "cdp", aud: ["cdp_service"], uris: ["<METHOD>
 *   <host><path>"], iat, nbf, exp: iat + 120 }`, sent as `Authorization: Bearer <jwt>`;
 * - both CDP key formats: an EC P-256 private key in PEM (SEC1 or PKCS#8) signs ES256; a base64
 *   Ed25519 key (64 bytes: seed ‖ public key) signs EdDSA. Literal `\n` sequences in the secret
 *   (common when the PEM comes from an env file) are turned into newlines.
 *
 * Limits: no `X-Wallet-Auth` (only CDP's server-wallet endpoints need it, not /verify, /settle,
 * /supported); no `Correlation-Context` header; the token is bound to the exact method + host +
 * path, so a facilitator behind a proxy that rewrites paths will reject it; validity depends on
 * this machine's clock (CDP allows 120 s). Checked here against our own JWT verification, never
 * against the live CDP service (this environment is offline).
 */
export type CdpAuthHeaders = (method: string, url: URL) => Promise<Record<string, string>>;

interface CdpSigningKey {
  alg: "ES256" | "EdDSA";
  key: KeyObject;
}

function parseCdpSecret(secret: string): CdpSigningKey {
  const text = secret.includes("\\n") ? secret.replaceAll("\\n", "\n") : secret;
  if (text.includes("-----BEGIN")) {
    const key = createPrivateKey(text);
    if (key.asymmetricKeyType !== "ec" || key.asymmetricKeyDetails?.namedCurve !== "prime256v1") {
      throw new Error("CDP_API_KEY_SECRET: PEM key must be an EC P-256 private key");
    }
    return { alg: "ES256", key };
  }
  const raw = Buffer.from(text.trim(), "base64");
  if (raw.length !== 64) {
    throw new Error("CDP_API_KEY_SECRET: expected an EC PEM key or a base64 Ed25519 key (64 bytes)");
  }
  const key = createPrivateKey({
    key: {
      kty: "OKP",
      crv: "Ed25519",
      d: raw.subarray(0, 32).toString("base64url"),
      x: raw.subarray(32).toString("base64url"),
    },
    format: "jwk",
  });
  return { alg: "EdDSA", key };
}

/** Builds the per-request header factory. Throws at construction when the secret is unusable. */
export function createCdpAuthHeaders(keyId: string, keySecret: string): CdpAuthHeaders {
  const signing = parseCdpSecret(keySecret);
  return async (method, url) => {
    const now = Math.floor(Date.now() / 1000);
    const jwt = await new SignJWT({
      sub: keyId,
      iss: "cdp",
      aud: ["cdp_service"],
      uris: [`${method.toUpperCase()} ${url.host}${url.pathname}`],
    })
      .setProtectedHeader({ alg: signing.alg, kid: keyId, typ: "JWT", nonce: randomBytes(16).toString("hex") })
      .setIssuedAt(now)
      .setNotBefore(now)
      .setExpirationTime(now + 120)
      .sign(signing.key);
    return { Authorization: `Bearer ${jwt}` };
  };
}
