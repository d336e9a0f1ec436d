import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type JsonWebKey,
  type KeyObject,
  randomBytes,
} from "node:crypto";
import { SignJWT } from "jose";
import { getAddress, isAddress } from "viem";

/**
 * Local identity provider that issues tokens shaped like Privy's, so the service's real verifier
 * (src/adapters/idp/verify.ts) runs unchanged in local mode and tests:
 * - access token: ES256, header `{alg, typ, kid}`, claims `sid, iss, iat, aud, sub, exp` (1 h);
 * - identity token: ES256, claims `cr, linked_accounts, iss, iat, aud, sub, exp` (10 h), where
 *   `linked_accounts` is — as Privy sends it — a JSON *string* of an array of linked accounts.
 */

export interface IdpKeyPair {
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** Key id: base64url of the SHA-256 of the public key (SPKI DER), first 16 bytes. */
  kid: string;
}

export interface ExportedIdpKeyPair {
  /** PKCS#8 PEM. Secret: keep it out of logs. */
  privateKeyPem: string;
  /** SPKI PEM: what IDP_VERIFICATION_KEY takes. */
  publicKeyPem: string;
  kid: string;
}

export interface Jwks {
  keys: (JsonWebKey & { kid: string; alg: "ES256"; use: "sig" })[];
}

export interface MintTokenOptions {
  /** Both tokens expired a minute ago. */
  expired?: boolean;
  /** Override the audience (default: the app id). */
  audience?: string;
  /** Override the issuer (default: the IdP's issuer). */
  issuer?: string;
  /** Sign with another key (e.g. `createLocalIdp(...).keyPair` of a different IdP). kid stays ours. */
  signWith?: IdpKeyPair | KeyObject;
  /** Wallets listed in `linked_accounts` (default: just `walletAddress`). `[]` = none linked. */
  linkedWallets?: string[];
  /** Subject of both tokens (default: a stable `did:privy:…` derived from the wallet). */
  subject?: string;
  /** Subject of the identity token only (to test a subject mismatch). */
  identitySubject?: string;
  /** Session id (`sid`) of the access token (default: random). */
  sessionId?: string;
  /** `wallet_client_type` of the linked wallets (default `metamask`). */
  walletClientType?: string;
  /** Encode `linked_accounts` as Privy does (`string`, default) or as a plain JSON array. */
  linkedAccountsAs?: "string" | "array";
}

export interface MintedTokens {
  accessToken: string;
  identityToken: string;
  subject: string;
}

export interface LocalIdp {
  readonly appId: string;
  readonly issuer: string;
  readonly kid: string;
  /** SPKI PEM of the signing key: IDP_VERIFICATION_KEY. */
  readonly publicKeyPem: string;
  /** JWKS document (serve it to test IDP_JWKS_URL). */
  readonly jwks: Jwks;
  readonly keyPair: IdpKeyPair;
  mintTokens(walletAddress: string, opts?: MintTokenOptions): Promise<MintedTokens>;
  exportKeyPair(): ExportedIdpKeyPair;
}

export interface CreateLocalIdpOptions {
  appId: string;
  issuer?: string;
  /** Reuse a persisted key (see `exportKeyPair` / `importKeyPair`); default: a fresh P-256 key. */
  keyPair?: IdpKeyPair;
}

const ACCESS_TOKEN_TTL_SEC = 3600;
const IDENTITY_TOKEN_TTL_SEC = 36_000;

function kidOf(publicKey: KeyObject): string {
  const der = publicKey.export({ type: "spki", format: "der" });
  return createHash("sha256").update(der).digest().subarray(0, 16).toString("base64url");
}

/** A fresh ES256 (P-256) key pair. */
export function generateIdpKeyPair(): IdpKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  return { privateKey, publicKey, kid: kidOf(publicKey) };
}

/** PEM export so a dev process can persist its key between restarts. */
export function exportKeyPair(keyPair: IdpKeyPair): ExportedIdpKeyPair {
  return {
    privateKeyPem: keyPair.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicKeyPem: keyPair.publicKey.export({ type: "spki", format: "pem" }).toString(),
    kid: keyPair.kid,
  };
}

/** Inverse of `exportKeyPair`; the public key is derived from the private one. */
export function importKeyPair(exported: { privateKeyPem: string }): IdpKeyPair {
  const privateKey = createPrivateKey(exported.privateKeyPem);
  if (privateKey.asymmetricKeyType !== "ec" || privateKey.asymmetricKeyDetails?.namedCurve !== "prime256v1") {
    throw new Error("IdP key must be an EC P-256 private key");
  }
  const publicKey = createPublicKey(privateKey);
  return { privateKey, publicKey, kid: kidOf(publicKey) };
}

/** Privy-style DID (`did:privy:` + 25 lowercase alphanumerics), stable per app and wallet. */
function subjectFor(appId: string, walletAddress: string): string {
  const digest = createHash("sha256").update(`${appId}:${walletAddress.toLowerCase()}`).digest();
  let id = "";
  for (const byte of digest.subarray(0, 24)) id += (byte % 36).toString(36);
  return `did:privy:c${id}`;
}

function linkedWalletAccount(address: string, walletClientType: string, at: number) {
  return {
    type: "wallet",
    address: isAddress(address) ? getAddress(address) : address,
    chain_type: "ethereum",
    wallet_client_type: walletClientType,
    connector_type: walletClientType === "privy" ? "embedded" : "injected",
    verified_at: at,
    first_verified_at: at,
    latest_verified_at: at,
  };
}

export function createLocalIdp(opts: CreateLocalIdpOptions): LocalIdp {
  const appId = opts.appId;
  const issuer = opts.issuer ?? "privy.io";
  const keyPair = opts.keyPair ?? generateIdpKeyPair();
  const publicKeyPem = keyPair.publicKey.export({ type: "spki", format: "pem" }).toString();
  const jwks: Jwks = {
    keys: [{ ...keyPair.publicKey.export({ format: "jwk" }), kid: keyPair.kid, alg: "ES256", use: "sig" }],
  };

  async function mintTokens(walletAddress: string, o: MintTokenOptions = {}): Promise<MintedTokens> {
    const now = Math.floor(Date.now() / 1000);
    const signingKey =
      o.signWith === undefined ? keyPair.privateKey : "privateKey" in o.signWith ? o.signWith.privateKey : o.signWith;
    const audience = o.audience ?? appId;
    const iss = o.issuer ?? issuer;
    const subject = o.subject ?? subjectFor(appId, walletAddress);
    const times = (ttl: number) => (o.expired ? { iat: now - ttl - 60, exp: now - 60 } : { iat: now, exp: now + ttl });
    const header = { alg: "ES256", typ: "JWT", kid: keyPair.kid };

    const access = times(ACCESS_TOKEN_TTL_SEC);
    const accessToken = await new SignJWT({ sid: o.sessionId ?? randomBytes(12).toString("hex") })
      .setProtectedHeader(header)
      .setIssuer(iss)
      .setAudience(audience)
      .setSubject(subject)
      .setIssuedAt(access.iat)
      .setExpirationTime(access.exp)
      .sign(signingKey);

    const identity = times(IDENTITY_TOKEN_TTL_SEC);
    const wallets = o.linkedWallets ?? [walletAddress];
    const linkedAccounts = [
      // Non-wallet accounts also carry an `address`; the verifier must look at `type`.
      {
        type: "email",
        address: `${subject.slice(-8)}@example.test`,
        verified_at: identity.iat,
        first_verified_at: identity.iat,
        latest_verified_at: identity.iat,
      },
      ...wallets.map((w) => linkedWalletAccount(w, o.walletClientType ?? "metamask", identity.iat)),
    ];
    const identityToken = await new SignJWT({
      cr: String(identity.iat - 86_400),
      linked_accounts: o.linkedAccountsAs === "array" ? linkedAccounts : JSON.stringify(linkedAccounts),
    })
      .setProtectedHeader(header)
      .setIssuer(iss)
      .setAudience(audience)
      .setSubject(o.identitySubject ?? subject)
      .setIssuedAt(identity.iat)
      .setExpirationTime(identity.exp)
      .sign(signingKey);

    return { accessToken, identityToken, subject };
  }

  return {
    appId,
    issuer,
    kid: keyPair.kid,
    publicKeyPem,
    jwks,
    keyPair,
    mintTokens,
    exportKeyPair: () => exportKeyPair(keyPair),
  };
}
