/**
 * The simulation's one source of chance: a seeded PRNG (sfc32, seeded through splitmix32), so a
 * seed replays the same schedule exactly. Nothing in the simulation calls Math.random.
 */
export class Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(readonly seed: number) {
    let s = seed >>> 0;
    const next = () => {
      s = (s + 0x9e3779b9) | 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** a uniform 32-bit unsigned integer */
  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** an integer in [0, n) */
  int(n: number): number {
    if (n <= 0) throw new Error("int(n) needs n > 0");
    return this.u32() % n;
  }

  /** an integer in [lo, hi] */
  between(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  /** a bigint in [lo, hi] (spans up to 2^52) */
  big(lo: bigint, hi: bigint): bigint {
    const span = hi - lo + 1n;
    const r = BigInt(this.u32()) * 0x100000n + BigInt(this.u32() & 0xfffff);
    return lo + (r % span);
  }

  /** true with probability p */
  chance(p: number): boolean {
    return this.u32() / 0x1_0000_0000 < p;
  }

  pick<T>(xs: readonly T[]): T {
    const x = xs[this.int(xs.length)];
    if (x === undefined) throw new Error("pick from an empty list");
    return x;
  }

  /** one of `weights`' keys, with the given relative weights */
  weighted<K extends string>(weights: Record<K, number>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((s, [, w]) => s + w, 0);
    let r = this.int(total);
    for (const [k, w] of entries) {
      if (r < w) return k;
      r -= w;
    }
    return (entries.at(-1) as [K, number])[0];
  }
}
