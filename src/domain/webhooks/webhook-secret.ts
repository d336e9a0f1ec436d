import { randomBytes } from "node:crypto";
import type { SealedSecret, SecretBox } from "../../lib/secret-box.js";

/**
 * An endpoint's signing secret: `whsec_` + base64 of 32 random bytes (the Standard Webhooks format,
 * what `new Webhook(secret)` of the `standardwebhooks` package takes). Shown once, at registration
 * and at each rotation; stored sealed as supplier keys are (AES-256-GCM, `SecretBox`), with the
 * account and endpoint ids as AAD so a ciphertext copied to another row does not open.
 */
export const WEBHOOK_SECRET_BYTES = 32;

export function newWebhookSecret(): string {
  return `whsec_${randomBytes(WEBHOOK_SECRET_BYTES).toString("base64")}`;
}

const aad = (accountId: string, endpointId: string) => `webhook:${accountId}:${endpointId}`;

/** The columns of a sealed secret (webhook_endpoints.secret_*). */
export function sealSecret(box: SecretBox, accountId: string, endpointId: string, secret: string) {
  const s = box.seal(secret, aad(accountId, endpointId));
  return { secretCiphertext: s.ciphertext, secretIv: s.iv, secretTag: s.tag, encryptionKeyId: s.keyId };
}

/** The plaintext, to sign a delivery; never logged, never returned after registration. */
export function openSecret(
  box: SecretBox,
  row: {
    id: string;
    accountId: string;
    secretCiphertext: Uint8Array;
    secretIv: Uint8Array;
    secretTag: Uint8Array;
    encryptionKeyId: string;
  },
): string {
  const sealed = {
    ciphertext: row.secretCiphertext,
    iv: row.secretIv,
    tag: row.secretTag,
    keyId: row.encryptionKeyId,
  } as SealedSecret;
  return box.open(sealed, aad(row.accountId, row.id));
}
