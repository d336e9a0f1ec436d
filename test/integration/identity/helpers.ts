import { createHash, randomUUID } from "node:crypto";
import { expect } from "vitest";
import type { SignedInUser } from "../../../testkit/actors.js";
import type { TestApp } from "../../../testkit/harness.js";

/** Helpers shared by the identity suite (no state: every test file owns its own app and database). */

export type Res = { status: number; body: unknown; headers: Headers };

export function bearer(apiKey: string): Record<string, string> {
  return { authorization: `Bearer ${apiKey}` };
}

/** The raw `svc_session` value of a `svc_session=<value>` cookie header. */
export function cookieValueOf(cookie: string): string {
  return cookie.slice("svc_session=".length);
}

export function sha256Hex(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

export function errorCodeOf(body: unknown): string | undefined {
  return (body as { error?: { code?: string } } | null)?.error?.code;
}

/** The JSON error envelope with `X-Svc-Error-Code`. */
export function expectError(res: Res, status: number, code: string, label?: string): void {
  expect(res.status, `${label ?? ""} status (body ${JSON.stringify(res.body)})`).toBe(status);
  expect(res.headers.get("content-type") ?? "", `${label ?? ""} content-type`).toMatch(/^application\/json/);
  const body = res.body as { error?: { code?: unknown; message?: unknown } };
  expect(body.error, `${label ?? ""} error envelope`).toBeTypeOf("object");
  expect(body.error?.code, `${label ?? ""} error.code`).toBe(code);
  expect(body.error?.message, `${label ?? ""} error.message`).toBeTypeOf("string");
  expect(res.headers.get("x-svc-error-code"), `${label ?? ""} X-Svc-Error-Code`).toBe(code);
}

export function expectAuthFailed(res: Res, label?: string): void {
  expectError(res, 401, "authentication_failed", label);
}

/** Sends a raw (possibly malformed) body. */
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

/** Inserts one buyer inference request row (as the router would after key resolution). */
export async function insertRequest(
  app: TestApp,
  accountId: string,
  overrides: {
    id?: string;
    apiKeyId?: string | null;
    supportReference?: string;
    startedAt?: Date;
    model?: string;
    status?: "in_progress" | "succeeded" | "incomplete" | "failed" | "settle_failed";
    clearingPriceCents?: number | null;
    costMicroUsdc?: bigint | null;
    burnMicroDiem?: bigint | null;
    promptTokens?: number | null;
    completionTokens?: number | null;
    attemptCount?: number;
    firstByteAt?: Date | null;
    completedAt?: Date | null;
    stream?: boolean;
    errorCode?: string | null;
  } = {},
) {
  return app.rt.db.inferenceRequest.create({
    data: {
      id: overrides.id ?? randomUUID(),
      supportReference: overrides.supportReference ?? randomUUID(),
      accountId,
      apiKeyId: overrides.apiKeyId ?? null,
      route: "chat",
      modality: "text",
      model: overrides.model ?? "llama-3.3-70b",
      maxPriceCents: 80,
      stream: overrides.stream ?? false,
      status: overrides.status ?? "in_progress",
      errorCode: overrides.errorCode ?? null,
      clearingPriceCents: overrides.clearingPriceCents ?? null,
      costMicroUsdc: overrides.costMicroUsdc ?? null,
      burnMicroDiem: overrides.burnMicroDiem ?? null,
      promptTokens: overrides.promptTokens ?? null,
      completionTokens: overrides.completionTokens ?? null,
      attemptCount: overrides.attemptCount ?? 0,
      startedAt: overrides.startedAt ?? new Date(),
      firstByteAt: overrides.firstByteAt ?? null,
      completedAt: overrides.completedAt ?? null,
    },
  });
}
