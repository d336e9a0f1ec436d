import { DomainError } from "./errors.js";

/**
 * Opaque keyset cursors for "newest first" lists: base64url of `<ISO instant>|<uuid>`.
 * A malformed cursor is a client mistake (400), never a 500.
 */
export interface CursorKey {
  at: Date;
  id: string;
}

export function encodeCursor(key: CursorKey): string {
  return Buffer.from(`${key.at.toISOString()}|${key.id}`, "utf8").toString("base64url");
}

export function decodeCursor(cursor: string): CursorKey {
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  const m =
    /^((?:19|2\d)\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)\|([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(
      text,
    );
  const at = m ? new Date(m[1] as string) : undefined;
  if (!m || !at || Number.isNaN(at.getTime()) || at.toISOString() !== m[1]) {
    throw new DomainError("invalid_request", "cursor is not valid; pass the nextCursor of a previous page.", {
      field: "cursor",
    });
  }
  return { at, id: m[2] as string };
}

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;
/** An export (the buyer history as CSV) pages too, with larger pages: this is its default and most. */
export const MAX_EXPORT_PAGE_SIZE = 10_000;

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/**
 * The page size a list asks for: `fallback` when absent, else an integer 1–`max` (a 400 naming
 * `limit` otherwise).
 */
export function pageSize(limit: number | undefined, max = MAX_PAGE_SIZE, fallback = DEFAULT_PAGE_SIZE): number {
  if (limit === undefined) return fallback;
  if (!Number.isInteger(limit) || limit < 1 || limit > max) {
    throw new DomainError("invalid_request", `limit must be an integer 1-${max}.`, { field: "limit" });
  }
  return limit;
}

export type Keyset = {
  createdAt?: { lte: Date };
  OR?: ({ createdAt: { lt: Date } } | { createdAt: Date; id: { lt: string } })[];
};

/**
 * Keyset condition "strictly after the cursor" for a newest-first order on (createdAt, id). The time
 * bound (`lte`) is implied by the OR; said alone, an index on (…, createdAt) starts at the cursor and
 * a table partitioned by createdAt (clears) skips the months after it.
 */
export function keysetBefore(after: CursorKey | undefined): Keyset {
  if (!after) return {};
  return {
    createdAt: { lte: after.at },
    OR: [{ createdAt: { lt: after.at } }, { createdAt: after.at, id: { lt: after.id } }],
  };
}

export function pageOf<R, T>(rows: R[], take: number, map: (r: R) => T, key: (r: R) => CursorKey): Page<T> {
  const kept = rows.slice(0, take);
  const last = kept[kept.length - 1];
  return {
    items: kept.map(map),
    nextCursor: rows.length > take && last ? encodeCursor(key(last)) : null,
  };
}
