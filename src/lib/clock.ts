/** Injectable time source: services take a Clock so tests can move time. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** The next 00:00 UTC strictly after `at` (when DIEM expires). */
export function nextUtcMidnight(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1));
}

/** `YYYY-MM-DD` of the UTC day containing `at`. */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}
