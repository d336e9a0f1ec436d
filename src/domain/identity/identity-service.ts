import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { type Hex, isAddress, verifyMessage } from "viem";
import { generateSiweNonce, parseSiweMessage, validateSiweMessage } from "viem/siwe";
import type { Db } from "../../adapters/db.js";
import type { IdpVerifier } from "../../adapters/idp/verify.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import { sha256Hex } from "../../lib/secret-box.js";
import type { SignInProvider } from "../accounts/account-types.js";
import { upsertAccountByWallet } from "../accounts/account-upsert.js";
import { signInProviderOf } from "../accounts/auth-provider.js";

/**
 * Session lifetime (docs/decisions.md "Sessions"): sliding 7 days of inactivity, at most 30 days
 * from sign-in. Activity extends the sliding expiry at most once an hour (no write per request).
 */
export const SESSION_IDLE_MS = 7 * 24 * 3600 * 1000;
export const SESSION_ABSOLUTE_MS = 30 * 24 * 3600 * 1000;
const SESSION_TOUCH_MS = 3600 * 1000;
/** SIWE nonces are single-use and live 10 minutes. */
export const SIWE_NONCE_TTL_MS = 10 * 60 * 1000;
export const LOGIN_SURFACES = ["wallet", "embedded", "unknown"] as const;
export type LoginSurface = (typeof LOGIN_SURFACES)[number];

export interface SessionIdentity {
  sessionId: string;
  accountId: string;
  walletAddress: string;
  /** how this session was signed in (stored on the session; the account may have used the other too) */
  authProvider: SignInProvider;
  expiresAt: Date;
  absoluteExpiresAt: Date;
}

export interface SignedIn {
  identity: SessionIdentity;
  /** the `svc_session` cookie value (never stored; only its hash is) */
  cookieValue: string;
  createdAccount: boolean;
}

export interface IdentityConfig {
  sessionSecret: string;
  /** hosts a SIWE message may name as its domain (from BASE_URL and WEB_URL) */
  siweDomains: string[];
  /** the URI to put in SIWE messages we describe */
  siweUri: string;
  chainId: number;
}

/**
 * Sign-in and sessions. The cookie is `<32 random bytes>.<HMAC-SHA256 under SESSION_SECRET>`
 * (base64url): forged cookies are refused before any database read, and the database keeps only
 * sha256 of the whole value.
 */
export class IdentityService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly idp: IdpVerifier | null,
    private readonly cfg: IdentityConfig,
  ) {}

  /**
   * POST /auth/idp/verify: verifies the access and identity tokens, requires the wallet among the
   * identity token's linked wallets, upserts the account (a SIWE or x402 account upgrades in place)
   * and opens a session. Writes nothing when verification fails.
   * @throws authentication_failed (401), not_configured (503) when no IdP is configured
   */
  async signInWithIdp(input: {
    accessToken: string;
    identityToken: string;
    walletAddress: string;
    idpLoginSurface?: LoginSurface;
    userAgent?: string;
  }): Promise<SignedIn> {
    if (!this.idp) {
      throw new DomainError("not_configured", "Identity-provider sign-in is not configured on this deployment.");
    }
    const result = await this.idp.verifyLogin({
      accessToken: input.accessToken,
      identityToken: input.identityToken,
      walletAddress: input.walletAddress,
    });
    if (!result.ok) {
      if (result.failure.reason === "idp_unavailable") {
        logger.warn({ reason: result.failure.reason }, "identity provider keys unavailable");
        // transient, unlike a deployment without an IdP: a short Retry-After
        throw new DomainError("not_configured", "The identity provider's keys could not be fetched; try again.", {
          retryAfterSeconds: 5,
        });
      }
      throw new DomainError("authentication_failed", `Identity verification failed: ${result.failure.reason}.`, {
        reason: result.failure.reason,
      });
    }
    return this.db.$transaction(async (tx) => {
      const account = await upsertAccountByWallet(tx, {
        walletAddress: input.walletAddress,
        provider: "idp",
        idpSubject: result.value.subject,
      });
      const s = await this.openSession(tx, {
        accountId: account.id,
        authProvider: "idp",
        idpLoginSurface: input.idpLoginSurface,
        userAgent: input.userAgent,
      });
      return {
        identity: { ...s.identity, walletAddress: account.walletAddress },
        cookieValue: s.cookieValue,
        createdAccount: account.created,
      };
    });
  }

  /** POST /auth/siwe/nonce: a single-use EIP-4361 nonce and the fields the message must carry. */
  async createSiweNonce(): Promise<{ nonce: string; expiresAt: Date; domain: string; uri: string; chainId: number }> {
    const now = this.clock.now();
    const nonce = generateSiweNonce();
    const expiresAt = new Date(now.getTime() + SIWE_NONCE_TTL_MS);
    await this.db.siweNonce.create({ data: { nonce, expiresAt } });
    return {
      nonce,
      expiresAt,
      domain: this.cfg.siweDomains[0] ?? "",
      uri: this.cfg.siweUri,
      chainId: this.cfg.chainId,
    };
  }

  /**
   * POST /auth/siwe/verify: checks the EIP-4361 message (our domain, unexpired, one of our unused
   * nonces) and its signature, consumes the nonce, upserts a `siwe` account and opens a session.
   * @throws invalid_request (400) for a message that does not parse; authentication_failed (401)
   */
  async signInWithSiwe(input: { message: string; signature: string; userAgent?: string }): Promise<SignedIn> {
    const parsed = parseSiweMessage(input.message);
    if (!parsed.address || !parsed.nonce || !parsed.domain || !parsed.uri || !parsed.version) {
      throw new DomainError("invalid_request", "message is not an EIP-4361 (SIWE) message.", { field: "message" });
    }
    if (!/^0x[0-9a-fA-F]+$/.test(input.signature)) {
      throw new DomainError("invalid_request", "signature must be 0x-prefixed hex.", { field: "signature" });
    }
    const now = this.clock.now();
    const domainOk = this.cfg.siweDomains.some((domain) => validateSiweMessage({ message: parsed, domain, time: now }));
    if (!domainOk) {
      throw new DomainError("authentication_failed", "SIWE message is for another domain, expired or not yet valid.");
    }
    let uriHost: string | undefined;
    try {
      uriHost = new URL(parsed.uri).host;
    } catch {
      uriHost = undefined;
    }
    if (!uriHost || !this.cfg.siweDomains.includes(uriHost) || parsed.chainId !== this.cfg.chainId) {
      throw new DomainError("authentication_failed", "SIWE message names another URI or chain.");
    }
    let signatureOk = false;
    try {
      signatureOk = await verifyMessage({
        address: parsed.address,
        message: input.message,
        signature: input.signature as Hex,
      });
    } catch {
      signatureOk = false;
    }
    if (!signatureOk) throw new DomainError("authentication_failed", "SIWE signature does not match the address.");

    const wallet = parsed.address.toLowerCase();
    return this.db.$transaction(async (tx) => {
      // single use: the nonce is consumed in the same transaction that opens the session
      const used = await tx.siweNonce.updateMany({
        where: { nonce: parsed.nonce, usedAt: null, expiresAt: { gt: now } },
        data: { usedAt: now },
      });
      if (used.count !== 1) throw new DomainError("authentication_failed", "SIWE nonce is unknown, used or expired.");
      const account = await upsertAccountByWallet(tx, { walletAddress: wallet, provider: "siwe" });
      const s = await this.openSession(tx, { accountId: account.id, authProvider: "siwe", userAgent: input.userAgent });
      return {
        identity: { ...s.identity, walletAddress: account.walletAddress },
        cookieValue: s.cookieValue,
        createdAccount: account.created,
      };
    });
  }

  /**
   * Resolves a cookie value to a live session, sliding its expiry (at most one write an hour).
   * Returns null for anything forged, unknown, revoked or expired.
   */
  async resolveSession(cookieValue: string): Promise<SessionIdentity | null> {
    if (!this.verifyCookieSignature(cookieValue)) return null;
    const now = this.clock.now();
    const s = await this.db.session.findUnique({
      where: { tokenHash: sha256Hex(cookieValue) },
      include: { account: { select: { walletAddress: true } } },
    });
    if (!s || s.revokedAt || s.expiresAt <= now || s.absoluteExpiresAt <= now) return null;
    // sessions are only opened by an IdP or a SIWE sign-in
    const authProvider = signInProviderOf(s.authProvider);
    if (!authProvider) return null;
    let expiresAt = s.expiresAt;
    if (now.getTime() - s.lastSeenAt.getTime() > SESSION_TOUCH_MS) {
      expiresAt = new Date(Math.min(now.getTime() + SESSION_IDLE_MS, s.absoluteExpiresAt.getTime()));
      await this.db.session.updateMany({
        where: { id: s.id, revokedAt: null },
        data: { lastSeenAt: now, expiresAt },
      });
    }
    return {
      sessionId: s.id,
      accountId: s.accountId,
      walletAddress: s.account.walletAddress,
      authProvider,
      expiresAt,
      absoluteExpiresAt: s.absoluteExpiresAt,
    };
  }

  /** POST /auth/logout: revokes the session (idempotent). */
  async logout(sessionId: string): Promise<void> {
    await this.db.session.updateMany({
      where: { id: sessionId, revokedAt: null },
      data: { revokedAt: this.clock.now() },
    });
  }

  private async openSession(
    tx: Pick<Db, "session">,
    input: { accountId: string; authProvider: SignInProvider; idpLoginSurface?: string; userAgent?: string },
  ): Promise<{ identity: SessionIdentity; cookieValue: string }> {
    const now = this.clock.now();
    const secret = randomBytes(32).toString("base64url");
    const cookieValue = `${secret}.${this.sign(secret)}`;
    const absoluteExpiresAt = new Date(now.getTime() + SESSION_ABSOLUTE_MS);
    const expiresAt = new Date(now.getTime() + SESSION_IDLE_MS);
    const s = await tx.session.create({
      data: {
        accountId: input.accountId,
        tokenHash: sha256Hex(cookieValue),
        authProvider: input.authProvider,
        idpLoginSurface: input.idpLoginSurface ?? null,
        userAgent: input.userAgent?.slice(0, 256) ?? null,
        expiresAt,
        absoluteExpiresAt,
        lastSeenAt: now,
      },
    });
    return {
      identity: {
        sessionId: s.id,
        accountId: input.accountId,
        walletAddress: "",
        authProvider: input.authProvider,
        expiresAt,
        absoluteExpiresAt,
      },
      cookieValue,
    };
  }

  private sign(secret: string): string {
    return createHmac("sha256", this.cfg.sessionSecret).update(secret).digest("base64url");
  }

  private verifyCookieSignature(value: string): boolean {
    const dot = value.indexOf(".");
    if (dot <= 0 || value.length > 200) return false;
    const expected = Buffer.from(this.sign(value.slice(0, dot)));
    const given = Buffer.from(value.slice(dot + 1));
    return expected.length === given.length && timingSafeEqual(expected, given);
  }
}

/** A wallet address as the spec accepts it: 0x + 40 hex (any case). */
export function isWalletAddress(v: unknown): v is string {
  return typeof v === "string" && /^0x[0-9a-fA-F]{40}$/.test(v) && isAddress(v, { strict: false });
}
