import type { AppConfig } from "./config";

/** JSON over fetch for the REST routes the app calls (sign-in, top-up), with the cookie. */

/** sessionStorage key of the dev wallet that signed in (lib/wallet.ts) */
export const DEV_WALLET_KEY = "svc.devWallet";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
    readonly body: Record<string, unknown>,
  ) {
    super(message);
  }
}

export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(url, {
    method: "POST",
    credentials: "include",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  let json: Record<string, unknown> = {};
  try {
    json = (await res.json()) as Record<string, unknown>;
  } catch {
    json = {};
  }
  return { status: res.status, body: json, headers: res.headers };
}

export function failure(status: number, body: Record<string, unknown>): ApiError {
  const error = (body.error ?? {}) as { code?: string; message?: string };
  return new ApiError(status, error.code, error.message ?? `Request failed (${status}).`, body);
}

export async function signOut(config: AppConfig): Promise<void> {
  await postJson(`${config.baseUrl}/auth/logout`, {});
  sessionStorage.removeItem(DEV_WALLET_KEY);
}
