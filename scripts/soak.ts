// `npm run soak`: the service under faults and load, as 3 API + 2 worker processes on a Postgres
// database, a Redis, an upstream simulator and a chain of its own (docs/operations.md "Soak").
// One JSON line per figure; exits 1 when an invariant fails.
//   npm run soak                      the full run (≥ 10,000 requests from 200 buyers)
//   npm run soak -- --short           the CI-sized run (what test/soak runs)
//   npm run soak -- --requests=20000 --buyers=300 --concurrency=64 --seed=7
//   npm run soak -- --redis-cluster --read-replica   on a Redis Cluster and a streaming read replica
import { FULL_SOAK, runSoak, SHORT_SOAK, type SoakOptions } from "../testkit/soak/run.js";

const args = process.argv.slice(2);
const opts: SoakOptions = { ...(args.includes("--short") ? SHORT_SOAK : FULL_SOAK) };
/** the flags a run takes, each the option it sets */
const FLAGS: Record<string, Partial<SoakOptions>> = {
  "--short": {},
  "--redis-cluster": { redisCluster: true },
  "--read-replica": { readReplica: true },
};
for (const a of args) {
  const m = /^--(requests|buyers|concurrency|seed)=(\d+)$/.exec(a);
  if (m?.[1] && m[2]) opts[m[1] as "requests" | "buyers" | "concurrency" | "seed"] = Number(m[2]);
  else if (Object.hasOwn(FLAGS, a)) Object.assign(opts, FLAGS[a]);
  else {
    console.error(`unknown argument ${a}`);
    process.exit(2);
  }
}

try {
  const report = await runSoak(opts, (line) => console.log(JSON.stringify(line)));
  process.exit(report.ok ? 0 : 1);
} catch (e) {
  console.error(e);
  process.exit(1);
}
