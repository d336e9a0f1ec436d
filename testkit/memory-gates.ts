// In-flight gates in memory (`GateLeases` without Redis), for the pipeline's tests and the seeded
// money simulation: a gate is a count per process, no rule of money or routing.
import { randomUUID } from "node:crypto";
import type { InFlightGates } from "../src/domain/inference/settlement/stores.js";

/**
 * In-flight gates in memory (`GateLeases` without Redis): at most `limit` slots of a gate in use
 * at once; this process is the only holder.
 */
export class MemoryGates implements InFlightGates {
  readonly id = randomUUID();
  private readonly used = new Map<string, number>();
  closed = false;

  async acquire(gate: string, limit: number): Promise<boolean> {
    if (this.closed) throw new Error("gates closed");
    const n = this.used.get(gate) ?? 0;
    if (n >= limit) return false;
    this.used.set(gate, n + 1);
    return true;
  }

  release(gate: string): void {
    const n = this.used.get(gate) ?? 0;
    if (n <= 0) {
      if (!this.closed) throw new Error(`gate ${gate} released twice`);
      return;
    }
    if (n === 1) this.used.delete(gate);
    else this.used.set(gate, n - 1);
  }

  claimed(gate: string): number {
    return this.used.get(gate) ?? 0;
  }

  inUse(gate: string): number {
    return this.used.get(gate) ?? 0;
  }

  yieldIdle(): void {}

  /** every gate with a slot in use (a test's "nothing left held") */
  held(): string[] {
    return [...this.used.keys()];
  }

  async close(): Promise<void> {
    this.closed = true;
    this.used.clear();
  }
}
