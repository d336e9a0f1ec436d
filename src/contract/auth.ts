import { authProvider } from "./account.js";
import { timestamp, uuid, walletAddress, z } from "./common.js";

/** SPEC "Identity and session", and the SIWE sign-in (docs/decisions.md). Sessions set `svc_session`. */

export const LOGIN_SURFACE_VALUES = ["wallet", "embedded", "unknown"] as const;

export const idpVerifyBody = z
  .object({
    accessToken: z
      .string({ required_error: "is required" })
      .min(1, { message: "is required" })
      .max(8192)
      .openapi({ description: "identity-provider access JWT" }),
    identityToken: z
      .string({ required_error: "is required" })
      .min(1, { message: "is required" })
      .max(65536)
      .openapi({ description: "identity JWT with `linked_accounts`" }),
    walletAddress: z
      .string({ required_error: "is required" })
      .regex(/^0x[0-9a-fA-F]{40}$/, { message: "must be 0x + 40 hex" })
      .openapi({ pattern: "^0x[0-9a-fA-F]{40}$", description: "must appear in the identity token's linked accounts" }),
    idpLoginSurface: z.enum(LOGIN_SURFACE_VALUES).optional(),
  })
  .openapi("IdpVerifyRequest");

export const siweVerifyBody = z
  .object({
    message: z
      .string({ required_error: "is required" })
      .min(1)
      .max(4096)
      .openapi({ description: "the EIP-4361 message" }),
    signature: z.string({ required_error: "is required" }).min(1).max(1024),
  })
  .openapi("SiweVerifyRequest");

export const siweNonceResponse = z
  .object({
    nonce: z.string(),
    expiresAt: timestamp,
    domain: z.string(),
    uri: z.string(),
    chainId: z.number().int(),
  })
  .openapi("SiweNonce");

/** 200 of `POST /auth/idp/verify` and `POST /auth/siwe/verify`, with `Set-Cookie: svc_session`. */
export const sessionIdentityResponse = z
  .object({
    accountId: uuid,
    walletAddress,
    authProvider,
    sessionExpiresAt: timestamp,
    sessionAbsoluteExpiresAt: timestamp,
    createdAccount: z.boolean(),
  })
  .openapi("SessionIdentity");
