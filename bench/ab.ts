// Alternated A/B runs of one bench section (issue 19: an optimisation is kept only if alternated
// runs show it). Runs `bench/index.ts --only=<sections>` in tree A, then B, then A, … `runs` times
// each, back to back, and prints each run's target figures (and issue 32's `service ÷ portkey`
// figures) and then both series per figure.
//
//   node --import tsx bench/ab.ts --a=HEAD --b=. --only=serial --runs=5
//   node --import tsx bench/ab.ts --a=main~1 --b=main --only=streaming --field=serial.streamed_chat:serverTimingP50Ms.upstream
//
// A side is a directory (e.g. `.`, the working tree with uncommitted changes) or a git revision,
// checked out once as a worktree under $TMPDIR/bench-ab/<sha> (node_modules linked from this tree,
// the Prisma client generated there). Both sides must contain this bench (`--only`). BENCH_*
// variables pass through to every run. Prints JSON lines.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

function arg(name: string): string | undefined {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

function git(args: string[], cwd = ROOT): string {
  return execFileSync("git", args, { cwd, encoding: "utf8" }).trim();
}

/** The directory of one side: itself if it is one, else a worktree of the revision. */
function treeOf(side: string): string {
  if (existsSync(side) && statSync(side).isDirectory()) return resolve(side);
  const sha = git(["rev-parse", "--verify", `${side}^{commit}`]);
  const dir = join(tmpdir(), "bench-ab", sha.slice(0, 12));
  if (!existsSync(join(dir, "package.json"))) {
    mkdirSync(join(tmpdir(), "bench-ab"), { recursive: true });
    git(["worktree", "add", "--detach", dir, sha]);
  }
  if (!existsSync(join(dir, "node_modules"))) symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  if (!existsSync(join(dir, "src", "generated"))) {
    // as `npm run` would: the generators' binaries on the PATH
    const path = `${join(ROOT, "node_modules", ".bin")}:${process.env.PATH ?? ""}`;
    execFileSync(process.execPath, [join(ROOT, "node_modules", "prisma", "build", "index.js"), "generate"], {
      cwd: dir,
      env: { ...process.env, PATH: path },
      stdio: ["ignore", "ignore", "inherit"],
    });
  }
  return dir;
}

type Line = Record<string, unknown> & { bench?: string };

/** One bench run in `dir`; resolves with its JSON lines. */
function runBench(dir: string, only: string): Promise<Line[]> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "bench/index.ts", `--only=${only}`], {
      cwd: dir,
      env: process.env,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d: string) => {
      out += d;
    });
    // "close", not "exit": the last of its output may still be in the pipe when it exits
    child.once("close", (code) => {
      const lines = out
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Line);
      if (code !== 0) reject(new Error(`bench in ${dir} exited with ${code}`));
      else resolvePromise(lines);
    });
  });
}

function pick(o: unknown, path: string): unknown {
  return path
    .split(".")
    .reduce<unknown>((x, k) => (x && typeof x === "object" ? (x as Record<string, unknown>)[k] : undefined), o);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? Number.NaN) : ((s[m - 1] ?? Number.NaN) + (s[m] ?? Number.NaN)) / 2;
}

const a = arg("a");
const b = arg("b");
const only = arg("only");
const runs = Number(arg("runs") ?? 3);
const fields = (arg("field") ?? "").split(",").filter(Boolean);
if (!a || !b || !only || !Number.isInteger(runs) || runs < 1) {
  console.error(
    "usage: bench/ab.ts --a=<rev|dir> --b=<rev|dir> --only=<sections> [--runs=3] [--field=<bench>:<path>,…]",
  );
  process.exit(2);
}
const trees = { a: treeOf(a), b: treeOf(b) };
console.log(JSON.stringify({ ab: "trees", a: { side: a, dir: trees.a }, b: { side: b, dir: trees.b }, only, runs }));
// a tree whose bench predates BENCH_SERVICE_BUILD runs the service from source through tsx; one that
// knows it runs the production build (unless told `source`): say so when the two sides differ
const runsFromSource = (dir: string) =>
  !readFileSync(join(dir, "bench", "market.ts"), "utf8").includes("BENCH_SERVICE_BUILD") ||
  process.env.BENCH_SERVICE_BUILD === "source";
if (runsFromSource(trees.a) !== runsFromSource(trees.b)) {
  console.log(
    JSON.stringify({
      ab: "note",
      note: "one side runs the service through tsx, the other its production build: the difference includes that",
      source: { a: runsFromSource(trees.a), b: runsFromSource(trees.b) },
    }),
  );
}

/** per side: figure name → one value per run */
const series: Record<"a" | "b", Map<string, number[]>> = { a: new Map(), b: new Map() };
const add = (side: "a" | "b", name: string, v: unknown) => {
  if (typeof v !== "number") return;
  const xs = series[side].get(name) ?? [];
  xs.push(v);
  series[side].set(name, xs);
};

for (let i = 0; i < runs; i++) {
  for (const side of ["a", "b"] as const) {
    const lines = await runBench(trees[side], only);
    const figures: Record<string, unknown> = {};
    for (const l of lines) {
      if (typeof l.bench !== "string") continue;
      if (l.bench.startsWith("target.")) {
        add(side, `${l.bench}.service`, l.service);
        add(side, `${l.bench}.floor`, l.floor);
        // against the floor of the same run: noise that hits both cancels
        if (l.unit === "ms" && typeof l.service === "number" && typeof l.floor === "number")
          add(side, `${l.bench}.serviceMinusFloor`, +(l.service - l.floor).toFixed(3));
        add(side, `${l.bench}.ratio`, l.ratio);
        figures[l.bench] = { service: l.service, floor: l.floor, met: l.met };
      }
      if (l.bench.startsWith("vs_portkey.")) {
        // issue 32: the service beside Portkey's gateway, measured in the same rounds
        add(side, `${l.bench}.service`, l.service);
        add(side, `${l.bench}.portkey`, l.portkey);
        add(side, `${l.bench}.ratio`, l.ratio);
        figures[l.bench] = { service: l.service, portkey: l.portkey, ratio: l.ratio };
      }
      for (const f of fields) {
        const [bench, path] = f.split(":");
        if (bench === l.bench && path) {
          add(side, f, pick(l, path));
          figures[f] = pick(l, path);
        }
      }
    }
    console.log(JSON.stringify({ ab: "run", run: i + 1, side, figures }));
  }
}
// both series per figure, and the medians' difference (B − A)
for (const name of new Set([...series.a.keys(), ...series.b.keys()])) {
  const xa = series.a.get(name) ?? [];
  const xb = series.b.get(name) ?? [];
  console.log(
    JSON.stringify({
      ab: name,
      a: xa,
      b: xb,
      medianA: +median(xa).toFixed(3),
      medianB: +median(xb).toFixed(3),
      medianBMinusA: +(median(xb) - median(xa)).toFixed(3),
      // whether the two series overlap at all: if they do, the runs do not separate A from B
      overlap: Math.max(...xa) >= Math.min(...xb) && Math.max(...xb) >= Math.min(...xa),
    }),
  );
}
