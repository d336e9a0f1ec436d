import { createPublicKey, type KeyObject } from "node:crypto";
import { createRemoteJWKSet, errors, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from "jose";

export interface IdpVerifierOptions {
  /** IDP_APP_ID: expected `aud` of both tokens. */
  appId: string;
  /** IDP_ISSUER: expected `iss` of both tokens (Privy: `privy.io`). */
  issuer: string;
  /** IDP_VERIFICATION_KEY: ES256 public key, SPKI PEM. */
  verificationKeyPem?: string;
  /** IDP_JWKS_URL: where the signing keys are published (used when no PEM is given). */
  jwksUrl?: string;
  /** Accepted clock skew (default 5 s). */
  clockToleranceSec?: number;
}

export type IdpFailureReason =
  /** Not a JWT, or not ES256. */
  | "malformed_token"
  /** Signature does not verify, or no published key matches its `kid`. */
  | "bad_signature"
  | "token_expired"
  | "wrong_issuer"
  | "wrong_audience"
  /** Missing or unusable claims (`sub`, `linked_accounts`, `nbf` in the future…). */
  | "invalid_claims"
  /** The access and identity tokens belong to different users. */
  | "subject_mismatch"
  | "invalid_wallet_address"
  /** `walletAddress` is not among the identity token's linked wallets. */
  | "wallet_not_linked"
  /** The JWKS endpoint could not be fetched. */
  | "idp_unavailable";

export interface IdpFailure {
  reason: IdpFailureReason;
  /** Which token failed, when it is about one token. */
  token?: "access" | "identity";
  message: string;
}

export interface VerifiedLogin {
  /** The IdP user id (`sub`, e.g. `did:privy:…`). */
  subject: string;
  /** Every wallet linked to the user, lower-cased. */
  linkedWallets: string[];
  /** Access-token session id, when present. */
  sessionId?: string;
}

export type IdpResult<T> = { ok: true; value: T } | { ok: false; failure: IdpFailure };

export interface IdpVerifier {
  /**
   * SPEC "Identity and session": verifies both tokens (signature, issuer, audience, expiry), that
   * they name the same user, and that `walletAddress` (any case) is one of that user's linked
   * wallets. Returns data; never throws.
   */
  verifyLogin(input: {
    accessToken: string;
    identityToken: string;
    walletAddress: string;
  }): Promise<IdpResult<VerifiedLogin>>;
}

const WALLET_ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const WALLET_ACCOUNT_TYPES = new Set(["wallet", "smart_wallet"]);

function fail(
  reason: IdpFailureReason,
  message: string,
  token?: "access" | "identity",
): { ok: false; failure: IdpFailure } {
  return { ok: false, failure: { reason, message, ...(token ? { token } : {}) } };
}

function classifyJoseError(error: unknown, token: "access" | "identity"): { ok: false; failure: IdpFailure } {
  if (error instanceof errors.JWTExpired) return fail("token_expired", `${token} token expired`, token);
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === "iss") return fail("wrong_issuer", `${token} token has an unexpected issuer`, token);
    if (error.claim === "aud") return fail("wrong_audience", `${token} token has an unexpected audience`, token);
    return fail("invalid_claims", `${token} token: ${error.message}`, token);
  }
  if (error instanceof errors.JWSSignatureVerificationFailed || error instanceof errors.JWKSNoMatchingKey) {
    return fail("bad_signature", `${token} token signature does not verify`, token);
  }
  if (error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid) {
    return fail("idp_unavailable", `could not load the IdP signing keys: ${error.message}`, token);
  }
  if (error instanceof errors.JOSEError) return fail("malformed_token", `${token} token: ${error.message}`, token);
  if (error instanceof TypeError) {
    // fetch() failures while loading the JWKS.
    return fail("idp_unavailable", `could not load the IdP signing keys: ${error.message}`, token);
  }
  return fail("malformed_token", `${token} token could not be read`, token);
}

/** `linked_accounts` arrives as a JSON string (Privy) or, from some issuers, as an array. */
function linkedWalletsOf(claim: unknown): string[] | undefined {
  let accounts: unknown = claim;
  if (typeof claim === "string") {
    try {
      accounts = JSON.parse(claim);
    } catch {
      return undefined;
    }
  }
  if (!Array.isArray(accounts)) return undefined;
  const wallets: string[] = [];
  for (const account of accounts) {
    if (typeof account !== "object" || account === null) continue;
    const { type, address, chain_type: chainType } = account as Record<string, unknown>;
    if (typeof type !== "string" || !WALLET_ACCOUNT_TYPES.has(type)) continue;
    if (chainType !== undefined && chainType !== "ethereum") continue;
    if (typeof address === "string" && WALLET_ADDRESS.test(address)) wallets.push(address.toLowerCase());
  }
  return wallets;
}

/**
 * Builds the verifier. Throws at construction only for configuration errors (no key source, a PEM
 * that is not a public key), so a misconfigured process fails at start.
 */
export function createIdpVerifier(opts: IdpVerifierOptions): IdpVerifier {
  let key: KeyObject | JWTVerifyGetKey;
  if (opts.verificationKeyPem !== undefined) {
    // Accept PEMs whose newlines were escaped in an env file.
    const pem = opts.verificationKeyPem.replaceAll("\\n", "\n");
    key = createPublicKey(pem);
    if (key.asymmetricKeyType !== "ec") throw new Error("IDP_VERIFICATION_KEY: expected an EC (ES256) public key");
  } else if (opts.jwksUrl !== undefined) {
    key = createRemoteJWKSet(new URL(opts.jwksUrl), { timeoutDuration: 5_000, cooldownDuration: 30_000 });
  } else {
    throw new Error("IdP verifier needs IDP_VERIFICATION_KEY or IDP_JWKS_URL");
  }
  const verifyOptions = {
    issuer: opts.issuer,
    audience: opts.appId,
    algorithms: ["ES256"],
    clockTolerance: opts.clockToleranceSec ?? 5,
    requiredClaims: ["sub", "exp", "iat"],
  };

  async function verifyToken(
    token: string,
    which: "access" | "identity",
  ): Promise<{ ok: true; payload: JWTPayload } | { ok: false; failure: IdpFailure }> {
    try {
      // Two call shapes because jose types the KeyObject and the JWKS-function forms separately.
      const { payload } =
        typeof key === "function"
          ? await jwtVerify(token, key, verifyOptions)
          : await jwtVerify(token, key, verifyOptions);
      return { ok: true, payload };
    } catch (error) {
      return classifyJoseError(error, which);
    }
  }

  return {
    async verifyLogin({ accessToken, identityToken, walletAddress }) {
      if (!WALLET_ADDRESS.test(walletAddress)) {
        return fail("invalid_wallet_address", "walletAddress must be 0x followed by 40 hex characters");
      }
      const [access, identity] = await Promise.all([
        verifyToken(accessToken, "access"),
        verifyToken(identityToken, "identity"),
      ]);
      if (!access.ok) return access;
      if (!identity.ok) return identity;
      const subject = access.payload.sub;
      if (typeof subject !== "string" || subject.length === 0) {
        return fail("invalid_claims", "access token has no subject", "access");
      }
      if (identity.payload.sub !== subject) {
        return fail("subject_mismatch", "access and identity tokens name different users");
      }
      const linkedWallets = linkedWalletsOf(identity.payload.linked_accounts);
      if (linkedWallets === undefined) {
        return fail("invalid_claims", "identity token has no readable linked_accounts", "identity");
      }
      if (!linkedWallets.includes(walletAddress.toLowerCase())) {
        return fail("wallet_not_linked", "walletAddress is not linked to this identity", "identity");
      }
      const sid = access.payload.sid;
      return {
        ok: true,
        value: { subject, linkedWallets, ...(typeof sid === "string" ? { sessionId: sid } : {}) },
      };
    },
  };
}
