// `npm run sim`: the seeded money simulation (testkit/sim; docs/decisions.md "Seeded money
// simulation (issue 38)"). Exits 1 on the first failing seed, printing it with its replay command.
//   npm run sim                          seeds 1…100, 200 steps each
//   npm run sim -- --runs=2000           seeds 1…2000 (the acceptance run)
//   npm run sim -- --runs=10000          the long run
//   npm run sim -- --seed=42             seed 42 alone (replay), --trace prints its every step
//   npm run sim -- --seed=42 --runs=500  seeds 42…541
//   npm run sim -- --plant=ancestor-unchecked --runs=50   with a defect planted back (must fail)
//   npm run sim -- --jobs=3              seeds on three databases at once (default 2; one for --seed)
// Every seed runs on the stored functions in a database cloned from the migrated template.
// The funding side (testkit/sim/funding: x402 payments on a real database and a local chain):
//   npm run sim -- --funding             seeds 1…20, 60 steps each
//   npm run sim -- --funding --seed=7 --trace     (replay), --runs=N, --steps=N
//   npm run sim -- --funding --plant=cancel-ignored --runs=20   a defect planted back (must fail)
import { FUNDING_DEFECTS, type FundingDefect } from "../testkit/sim/funding/plants.js";
import { describeFundingFailure, runFundingSeed } from "../testkit/sim/funding/run.js";
import { sharedRedis } from "../testkit/sim/funding/world.js";
import { isPlantedDefect, PLANTED_DEFECTS } from "../testkit/sim/plants.js";
import { describeFailure, runSeeds, zeroDelaySleeps } from "../testkit/sim/run.js";
import { migrateTemplate } from "../testkit/template.js";

const args = process.argv.slice(2);
let seed = 1;
let runs: number | null = null;
let steps: number | null = null;
let jobs: number | null = null;
let trace = false;
let funding = false;
const plants: string[] = [];
let single = false;
for (const a of args) {
  const m = /^--(seed|runs|steps|jobs)=(\d+)$/.exec(a);
  const plant = /^--plant=([a-z-]+)$/.exec(a);
  if (m?.[1] === "seed") {
    seed = Number(m[2]);
    single = true;
  } else if (m?.[1] === "runs") runs = Number(m[2]);
  else if (m?.[1] === "steps") steps = Number(m[2]);
  else if (m?.[1] === "jobs") jobs = Number(m[2]);
  else if (plant?.[1]) plants.push(plant[1]);
  else if (a === "--trace") trace = true;
  else if (a === "--funding") funding = true;
  else {
    console.error(`unknown argument ${a}`);
    process.exit(2);
  }
}
process.exit(funding ? await runFunding() : await runMarket());

async function runMarket(): Promise<number> {
  const count = runs ?? (single ? 1 : 100);
  const n = steps ?? 200;
  const unknown = plants.filter((d) => !isPlantedDefect(d));
  if (unknown.length > 0) {
    console.error(`unknown defect ${unknown.join(", ")} (one of ${PLANTED_DEFECTS.join(", ")})`);
    return 2;
  }
  const defects = plants.filter(isPlantedDefect);
  zeroDelaySleeps();
  await migrateTemplate();
  const started = performance.now();
  // a database per lane, cloned from the template with the defects planted, emptied per seed
  let requests = 0;
  let passed = 0;
  const failed = await runSeeds({ from: seed, count, steps: n, defects, jobs: jobs ?? (count > 1 ? 2 : 1) }, (r) => {
    requests += r.stats.requests;
    if (trace) for (const line of r.trace) console.log(line);
    if (r.ok && count > 1 && ++passed % 100 === 0) console.log(`${passed}/${count} seeds pass`);
  });
  if (failed) {
    console.error(describeFailure(failed, { steps: n, defects }));
    return 1;
  }
  const secs = ((performance.now() - started) / 1000).toFixed(1);
  console.log(`${count} seeds (${seed}…${seed + count - 1}) × ${n} steps pass: ${requests} requests, ${secs} s`);
  return 0;
}

async function runFunding(): Promise<number> {
  const count = runs ?? (single ? 1 : 20);
  const n = steps ?? 60;
  const unknown = plants.filter((d) => !(FUNDING_DEFECTS as readonly string[]).includes(d));
  if (unknown.length > 0) {
    console.error(`unknown funding defect ${unknown.join(", ")} (one of ${FUNDING_DEFECTS.join(", ")})`);
    return 2;
  }
  const defects = plants as FundingDefect[];
  await migrateTemplate();
  const redis = sharedRedis();
  const started = performance.now();
  let calls = 0;
  let payments = 0;
  try {
    for (let s = seed; s < seed + count; s++) {
      const r = await runFundingSeed({ seed: s, steps: n, defects }, redis);
      calls += r.stats.calls;
      payments += r.stats.payments;
      if (trace) for (const line of r.trace) console.log(line);
      if (!r.ok) {
        console.error(describeFundingFailure(r, { steps: n, defects }));
        return 1;
      }
      if (count > 1) console.log(`funding seed ${s} passes (${r.stats.payments} payments, ${r.stats.ms} ms)`);
    }
  } finally {
    redis.disconnect();
  }
  const secs = ((performance.now() - started) / 1000).toFixed(1);
  console.log(
    `${count} funding seeds (${seed}…${seed + count - 1}) × ${n} steps pass: ${calls} funding calls, ${payments} payments, ${secs} s`,
  );
  return 0;
}
