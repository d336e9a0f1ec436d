import { createCipheriv, createDecipheriv, createHash, createHmac, hash, randomBytes } from "node:crypto";

/**
 * Authenticated encryption of secrets at rest (supplier upstream keys): AES-256-GCM with a
 * random 96-bit IV per secret and a key id for rotation. The key id is the first 8 hex chars of
 * sha256(key), so it identifies the key without revealing it.
 */
export interface SealedSecret {
  ciphertext: Uint8Array<ArrayBuffer>;
  iv: Uint8Array<ArrayBuffer>;
  tag: Uint8Array<ArrayBuffer>;
  keyId: string;
}

/** A plain copy (Prisma's Bytes columns take Uint8Array<ArrayBuffer>, not pooled Buffers). */
function bytes(b: Buffer): Uint8Array<ArrayBuffer> {
  return new Uint8Array(b);
}

export class SecretBox {
  readonly keyId: string;
  private readonly keys: Map<string, Buffer>;

  /** `key` encrypts; `previous` keys still decrypt (rotation). */
  constructor(key: Buffer, previous: Buffer[] = []) {
    if (key.length !== 32) throw new Error("SecretBox needs a 32-byte key");
    this.keyId = keyIdOf(key);
    this.keys = new Map([[this.keyId, key], ...previous.map((k) => [keyIdOf(k), k] as [string, Buffer])]);
  }

  seal(plaintext: string, aad = ""): SealedSecret {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key(this.keyId), iv);
    cipher.setAAD(Buffer.from(aad, "utf8"));
    const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return { ciphertext: bytes(ciphertext), iv: bytes(iv), tag: bytes(cipher.getAuthTag()), keyId: this.keyId };
  }

  /** Throws when the ciphertext, tag or AAD was tampered with or the key is unknown. */
  open(sealed: SealedSecret, aad = ""): string {
    const decipher = createDecipheriv("aes-256-gcm", this.key(sealed.keyId), sealed.iv);
    decipher.setAAD(Buffer.from(aad, "utf8"));
    decipher.setAuthTag(sealed.tag);
    return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]).toString("utf8");
  }

  /** Keyed fingerprint (HMAC-SHA256) to detect duplicates without storing the secret. */
  fingerprint(plaintext: string): string {
    return createHmac("sha256", this.key(this.keyId)).update(plaintext, "utf8").digest("hex");
  }

  private key(id: string): Buffer {
    const k = this.keys.get(id);
    if (!k) throw new Error(`unknown encryption key id ${id}`);
    return k;
  }
}

function keyIdOf(key: Buffer): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 8);
}

/** sha256 hex, for API keys and session tokens (high-entropy secrets: no salt needed). */
export function sha256Hex(s: string): string {
  return hash("sha256", s, "hex");
}
