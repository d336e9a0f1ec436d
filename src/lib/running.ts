/**
 * Work in progress, counted so a clean shutdown can wait for it: `enter` when a piece starts,
 * `leave` once when it is done; `idle(ms)` resolves when none is left, or after `ms` (false).
 */
export class Running {
  #count = 0;
  #waiters: (() => void)[] = [];

  get size(): number {
    return this.#count;
  }

  enter(): void {
    this.#count++;
  }

  leave(): void {
    if (this.#count === 0) return;
    this.#count--;
    if (this.#count === 0) for (const w of this.#waiters.splice(0)) w();
  }

  idle(timeoutMs: number): Promise<boolean> {
    if (this.#count === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), timeoutMs);
      t.unref();
      this.#waiters.push(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }
}
