/** A day: the clock skew a newest-first read tolerates between processes. */
const READ_AHEAD_MS = 86_400_000;

/**
 * The newest instant a newest-first read of `inference_requests` or `clears` asks for: now plus a
 * day, or the cursor's time when older. Rows carry the writing process's clock, so none is newer.
 * Said explicitly, the bound lets the planner prune the DEFAULT partition (it is within the months
 * made ahead), which keeps the month partitions in order: a page reads the newest month first and
 * stops once it has its rows (docs/decisions.md "Monthly partitions and retention").
 */
export function newestReadBound(now: Date, cursorAt?: Date): Date {
  const ahead = new Date(now.getTime() + READ_AHEAD_MS);
  return cursorAt && cursorAt.getTime() < ahead.getTime() ? cursorAt : ahead;
}
