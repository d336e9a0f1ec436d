/**
 * Calls for the same key while one is running share its answer: at most one computation per key at a
 * time in this process. A public aggregate (market stats, model stats) costs the database a scan of
 * many rows and costs its caller one cheap GET; without this, N callers at once are N scans. A caller
 * that joins gets an answer computed from when the running call started (never older), a failure
 * included; the next call after it settles computes anew (docs/decisions.md "Public aggregates run
 * one at a time").
 */
export class SharedCalls<V> {
  private readonly running = new Map<string, Promise<V>>();

  run(key: string, compute: () => Promise<V>): Promise<V> {
    const now = this.running.get(key);
    if (now) return now;
    const call = compute().finally(() => this.running.delete(key));
    this.running.set(key, call);
    return call;
  }

  /** keys with a computation running (for tests and metrics) */
  get size(): number {
    return this.running.size;
  }
}
