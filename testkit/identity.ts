import { createHash } from "node:crypto";
import { expect } from "vitest";
import type { SignedInUser } from "./actors.js";
import type { TestApp } from "./harness.js";

/** What the identity tests read from the database: sessions, keys, accounts and their ceilings. */

/** The raw `svc_session` value of a `svc_session=<value>` cookie header. */
export function cookieValueOf(cookie: string): string {
  return cookie.slice("svc_session=".length);
}

/** How the service stores a session token or an API key: its SHA-256, in hex. */
export function sha256Hex(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

export async function countAccounts(app: TestApp): Promise<number> {
  return app.rt.db.account.count();
}

export async function countSessions(app: TestApp): Promise<number> {
  return app.rt.db.session.count();
}

export async function activeKeyCount(app: TestApp, accountId: string): Promise<number> {
  return app.rt.db.apiKey.count({ where: { accountId, status: "active" } });
}

export async function maxPriceOf(app: TestApp, accountId: string): Promise<number> {
  const a = await app.rt.db.account.findUniqueOrThrow({ where: { id: accountId } });
  return a.maxPriceCentsPerDollar;
}

/** Puts the user's session past its sliding expiry (`expires_at` one minute ago). */
export async function expireSession(app: TestApp, user: SignedInUser): Promise<void> {
  const s = await app.rt.db.session.findUniqueOrThrow({ where: { tokenHash: sha256Hex(cookieValueOf(user.cookie)) } });
  await app.rt.db.session.update({ where: { id: s.id }, data: { expiresAt: new Date(Date.now() - 60_000) } });
}

/** Runs `fn` and expects it to have created no account and no session. */
export async function nothingCreated(app: TestApp, fn: () => Promise<void>): Promise<void> {
  const accounts = await countAccounts(app);
  const sessions = await countSessions(app);
  await fn();
  expect(await countAccounts(app), "accounts").toBe(accounts);
  expect(await countSessions(app), "sessions").toBe(sessions);
}
