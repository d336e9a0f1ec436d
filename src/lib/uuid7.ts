import { randomFillSync } from "node:crypto";

/** Random bytes drawn ahead for ids: one fill from the CSPRNG serves this many ids (as Node's `randomUUID` caches). */
const POOL_IDS = 256;
let pool = Buffer.allocUnsafe(0);
let taken = 0;

/** Ten random bytes of the pool (refilled from the CSPRNG when it runs out): where they start in it. */
function tenFromPool(): number {
  if (taken + 10 > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(10 * POOL_IDS));
    taken = 0;
  }
  const at = taken;
  taken += 10;
  return at;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/**
 * UUID version 7 (RFC 9562 §5.7): 48 bits of Unix time in milliseconds, then 74 random bits. A
 * request's id is one whose time is the request's arrival, and it is the request's support reference
 * (docs/decisions.md "The support reference is the request id"), so a lookup by reference knows the
 * day, and so the month partitions, to read (older stored references: their time is the request's
 * start). Clear ids are v7 too: what is appended per request lands at the right edge of its indexes
 * instead of on random pages, each a whole page in the WAL after a checkpoint (docs/decisions.md
 * "Record ids in time order"). The random bits (crypto) keep an id unguessable; its time tells its
 * holder only when the request arrived (or, for a clear, ended). They come from a pool filled from the
 * CSPRNG 256 ids at a time, each byte used once: one system call per id was 4 % of the API process's
 * CPU at saturation (docs/performance.md "Fewer instructions per request").
 */
export function uuidV7(at: Date, random?: Buffer): string {
  const ms = at.getTime();
  if (!Number.isInteger(ms) || ms < 0 || ms > 0xffff_ffff_ffff) throw new RangeError(`uuidV7: bad time ${ms}`);
  if (random !== undefined && random.length < 10) throw new RangeError("uuidV7: needs 10 random bytes");
  // the pool's offset first: drawing may refill it with a new buffer
  const o = random ? 0 : tenFromPool();
  const r = random ?? pool;
  const byte = (i: number) => HEX[r[o + i] ?? 0];
  const high = Math.floor(ms / 0x1_0000); // the first 32 bits of the 48
  const time = `${high.toString(16).padStart(8, "0")}-${(ms % 0x1_0000).toString(16).padStart(4, "0")}`;
  const version = `7${((r[o] ?? 0) & 0x0f).toString(16)}${byte(1)}`; // version 7
  const variant = `${HEX[0x80 | ((r[o + 2] ?? 0) & 0x3f)]}${byte(3)}`; // variant 10
  return `${time}-${version}-${variant}-${byte(4)}${byte(5)}${byte(6)}${byte(7)}${byte(8)}${byte(9)}`;
}

/** The time a v7 uuid carries; null for any other uuid (a v4 reference made before v7 ones). */
export function uuidV7Time(id: string): Date | null {
  const m = /^([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.exec(id);
  if (!m) return null;
  return new Date(Number.parseInt(`${m[1]}${m[2]}`, 16));
}
