// A V8 .cpuprofile (node --cpu-prof, e.g. the service under BENCH_SERVICE_NODE_ARGS) as folded
// stacks ("root;caller;callee count" lines, Brendan Gregg's format: flamegraph.pl, speedscope,
// inferno read them), or as the top self and inclusive time tables.
//
//   node --import tsx bench/flame.ts /tmp/prof/x.cpuprofile > x.folded
//   node --import tsx bench/flame.ts /tmp/prof/x.cpuprofile --top=20 --from=0.5
//
// --from=F keeps only the samples after fraction F of the profile's wall time (0.5: the later half,
// the steady state once the warm-up is over). A frame is "function file:line" (the file relative to
// the working directory, node_modules kept short); counts are samples (--cpu-prof samples every
// ~1 ms by default).
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

function arg(name: string): string | undefined {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

function frameName(f: CallFrame): string {
  const fn = f.functionName || "(anonymous)";
  if (!f.url) return fn;
  let file = f.url.startsWith("file://") ? fileURLToPath(f.url) : f.url;
  const nm = file.lastIndexOf("node_modules/");
  file = nm >= 0 ? file.slice(nm + "node_modules/".length) : relative(process.cwd(), file);
  // ";" separates frames in the folded format
  // tsx emits a module on one line: the column tells its functions apart
  const at = f.lineNumber === 0 && f.columnNumber > 0 ? `1:${f.columnNumber + 1}` : `${f.lineNumber + 1}`;
  return `${fn} ${file}:${at}`.replaceAll(";", ",");
}

const file = process.argv.slice(2).find((a) => !a.startsWith("--"));
if (!file) {
  process.stderr.write("usage: flame.ts <file.cpuprofile> [--top=N] [--from=0..1]\n");
  process.exit(2);
}
const p = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// the samples kept: those after `from` of the wall time
const from = Number(arg("from") ?? 0);
const cut = p.startTime + (p.endTime - p.startTime) * from;
const counts = new Map<number, number>();
let t = p.startTime;
let kept = 0;
for (let i = 0; i < p.samples.length; i++) {
  t += p.timeDeltas[i] ?? 0;
  if (t < cut) continue;
  const id = p.samples[i] as number;
  counts.set(id, (counts.get(id) ?? 0) + 1);
  kept++;
}

function stackOf(id: number): string[] {
  const names: string[] = [];
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const n = byId.get(cur);
    if (n) names.push(frameName(n.callFrame));
  }
  return names.reverse();
}

const top = arg("top");
if (!top) {
  const folded = new Map<string, number>();
  for (const [id, c] of counts) {
    const key = stackOf(id).join(";");
    folded.set(key, (folded.get(key) ?? 0) + c);
  }
  for (const [k, c] of [...folded].sort((a, b) => (a[0] < b[0] ? -1 : 1))) process.stdout.write(`${k} ${c}\n`);
} else {
  const n = Number(top);
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  for (const [id, c] of counts) {
    const stack = stackOf(id);
    const leaf = stack[stack.length - 1] ?? "?";
    self.set(leaf, (self.get(leaf) ?? 0) + c);
    // a recursive frame counts once per sample
    for (const f of new Set(stack)) incl.set(f, (incl.get(f) ?? 0) + c);
  }
  // shares of the busy samples: an idle process's profile says nothing of where its work goes
  const idle = self.get("(idle)") ?? 0;
  const busy = kept - idle;
  self.delete("(idle)");
  const table = (title: string, m: Map<string, number>) => {
    process.stdout.write(`\n${title}: % of ${busy} busy samples (${idle} idle left out)\n`);
    const rows = [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
    for (const [f, c] of rows)
      process.stdout.write(`${((c / busy) * 100).toFixed(1).padStart(5)}%  ${String(c).padStart(6)}  ${f}\n`);
  };
  table("self", self);
  // the root and the program's wrappers are 100%: drop those that every sample has
  for (const [f, c] of incl) if (c === kept) incl.delete(f);
  incl.delete("(idle)");
  table("inclusive", incl);
}
