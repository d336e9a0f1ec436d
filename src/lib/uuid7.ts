import { randomBytes } from "node:crypto";

/**
 * UUID version 7 (RFC 9562 §5.7): 48 bits of Unix time in milliseconds, then 74 random bits. A
 * request's id is one whose time is the request's arrival, and it is the request's support reference
 * (docs/decisions.md "The support reference is the request id"), so a lookup by reference knows the
 * day, and so the month partitions, to read (older stored references: their time is the request's
 * start). Clear ids are v7 too: what is appended per request lands at the right edge of its indexes
 * instead of on random pages, each a whole page in the WAL after a checkpoint (docs/decisions.md
 * "Record ids in time order"). The random bits (crypto) keep an id unguessable; its time tells its
 * holder only when the request arrived (or, for a clear, ended).
 */
export function uuidV7(at: Date, random: Buffer = randomBytes(10)): string {
  const ms = at.getTime();
  if (!Number.isInteger(ms) || ms < 0 || ms > 0xffff_ffff_ffff) throw new RangeError(`uuidV7: bad time ${ms}`);
  if (random.length < 10) throw new RangeError("uuidV7: needs 10 random bytes");
  const b = Buffer.alloc(16);
  b.writeUIntBE(ms, 0, 6);
  random.copy(b, 6, 0, 10);
  b[6] = 0x70 | ((b[6] ?? 0) & 0x0f); // version 7
  b[8] = 0x80 | ((b[8] ?? 0) & 0x3f); // variant 10
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The time a v7 uuid carries; null for any other uuid (a v4 reference made before v7 ones). */
export function uuidV7Time(id: string): Date | null {
  const m = /^([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.exec(id);
  if (!m) return null;
  return new Date(Number.parseInt(`${m[1]}${m[2]}`, 16));
}
