import { expect } from "vitest";
import type { Res } from "./actors.js";

/** The service's JSON error envelope `{"error":{"code","message"}}`, as tests check it. */

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
