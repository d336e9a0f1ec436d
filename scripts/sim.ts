// `npm run sim`: the seeded money simulation (testkit/sim; docs/decisions.md "Seeded money
// simulation (issue 38)"). Exits 1 on the first failing seed, printing it with its replay command.
//   npm run sim                          seeds 1…100, 200 steps each
//   npm run sim -- --runs=2000           seeds 1…2000 (the acceptance run)
//   npm run sim -- --runs=10000          the long run
//   npm run sim -- --seed=42             seed 42 alone (replay), --trace prints its every step
//   npm run sim -- --seed=42 --runs=500  seeds 42…541
//   npm run sim -- --plant=ancestor-unchecked --runs=50   with a defect planted back (must fail)
import type { PlantedDefect } from "../testkit/memory-stores.js";
import { describeFailure, runSeed, zeroDelaySleeps } from "../testkit/sim/run.js";

const args = process.argv.slice(2);
let seed = 1;
let runs: number | null = null;
let steps = 200;
let trace = false;
const defects: PlantedDefect[] = [];
let single = false;
for (const a of args) {
  const m = /^--(seed|runs|steps)=(\d+)$/.exec(a);
  const plant = /^--plant=([a-z-]+)$/.exec(a);
  if (m?.[1] === "seed") {
    seed = Number(m[2]);
    single = true;
  } else if (m?.[1] === "runs") runs = Number(m[2]);
  else if (m?.[1] === "steps") steps = Number(m[2]);
  else if (plant?.[1]) defects.push(plant[1] as PlantedDefect);
  else if (a === "--trace") trace = true;
  else {
    console.error(`unknown argument ${a}`);
    process.exit(2);
  }
}
const count = runs ?? (single ? 1 : 100);
zeroDelaySleeps();
const started = performance.now();
let requests = 0;
for (let s = seed; s < seed + count; s++) {
  const r = await runSeed({ seed: s, steps, defects });
  requests += r.stats.requests;
  if (trace) for (const line of r.trace) console.log(line);
  if (!r.ok) {
    console.error(describeFailure(r, { steps, defects }));
    process.exit(1);
  }
  if (count > 1 && (s - seed + 1) % 100 === 0) console.log(`${s - seed + 1}/${count} seeds pass`);
}
const secs = ((performance.now() - started) / 1000).toFixed(1);
console.log(`${count} seeds (${seed}…${seed + count - 1}) × ${steps} steps pass: ${requests} requests, ${secs} s`);
process.exit(0);
