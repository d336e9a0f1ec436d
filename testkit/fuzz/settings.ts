/**
 * How much the fuzz tests run: `FUZZ_RUNS` generated cases per route or operation (default 30, so
 * the suite stays fast in CI), `FUZZ_SEED` to replay a failure (fast-check prints the seed and the
 * path of the failing case; pass the seed here and rerun the file).
 */
export function fuzzParameters(): { numRuns: number; seed: number | undefined } {
  const runs = Number(process.env.FUZZ_RUNS ?? "30");
  const seed = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
  return { numRuns: Number.isInteger(runs) && runs > 0 ? runs : 30, seed: Number.isInteger(seed) ? seed : undefined };
}
