// A V8 .cpuprofile (node --cpu-prof, e.g. the service under BENCH_SERVICE_NODE_ARGS) as folded
// stacks ("root;caller;callee count" lines, Brendan Gregg's format: flamegraph.pl, speedscope,
// inferno read them), or as the top self and inclusive time tables.
//
//   node --import tsx bench/flame.ts /tmp/prof/x.cpuprofile > x.folded
//   node --import tsx bench/flame.ts /tmp/prof/x.cpuprofile --top=20 --from=0.5
//   node --import tsx bench/flame.ts /tmp/prof/x.cpuprofile --svg --from=0.5 > x.svg
//
// --svg draws the folded stacks as a flame graph (a standalone SVG: the root at the bottom, each
// frame as wide as its share of the busy samples, a tooltip per frame with its samples and share;
// frames under 0.1% are left out, idle samples too).
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

/** Escapes text for SVG. */
function esc(v: string): string {
  return v.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");
}

interface Tree {
  name: string;
  count: number;
  children: Map<string, Tree>;
}

/** The busy samples' stacks as a tree (the root is "all"), for the flame graph. */
function treeOf(): Tree {
  const root: Tree = { name: "all", count: 0, children: new Map() };
  for (const [id, c] of counts) {
    const stack = stackOf(id);
    if (stack[stack.length - 1] === "(idle)") continue;
    root.count += c;
    let node = root;
    for (const f of stack.slice(1)) {
      let next = node.children.get(f);
      if (!next) {
        next = { name: f, count: 0, children: new Map() };
        node.children.set(f, next);
      }
      next.count += c;
      node = next;
    }
  }
  return root;
}

/** A flame graph of the busy samples: one rect per frame, width = its share. */
function flameSvg(title: string): string {
  const root = treeOf();
  const width = 1600;
  const rowH = 16;
  const minShare = 0.001;
  const rows: string[] = [];
  let depth = 0;
  const walk = (n: Tree, x: number, d: number) => {
    depth = Math.max(depth, d);
    const w = (n.count / root.count) * width;
    rows.push(JSON.stringify([n.name, x, d, w, n.count]));
    let cx = x;
    for (const c of [...n.children.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (c.count / root.count >= minShare) walk(c, cx, d + 1);
      cx += (c.count / root.count) * width;
    }
  };
  walk(root, 0, 0);
  const height = (depth + 1) * rowH + 40;
  const hue = (name: string) => {
    let h = 0;
    for (const ch of name) h = (h * 31 + ch.charCodeAt(0)) % 360;
    return name.includes("node_modules") || !name.includes("src/") ? 20 + (h % 40) : 180 + (h % 60);
  };
  const rects = rows.map((r) => {
    const [name, x, d, w, count] = JSON.parse(r) as [string, number, number, number, number];
    const y = height - 20 - (d + 1) * rowH;
    const share = ((count / root.count) * 100).toFixed(2);
    const label =
      w > 40 ? `<text x="${(x + 3).toFixed(1)}" y="${y + 11}">${esc(name.slice(0, Math.floor(w / 6.5)))}</text>` : "";
    return `<g><title>${esc(name)} (${count} samples, ${share}%)</title><rect x="${x.toFixed(1)}" y="${y}" width="${Math.max(w - 0.5, 0.1).toFixed(1)}" height="${rowH - 1}" fill="hsl(${hue(name)},70%,65%)"/>${label}</g>`;
  });
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="monospace" font-size="10">`,
    `<title>${esc(title)}: a flame graph of ${root.count} busy samples</title>`,
    `<text x="4" y="14" font-size="12">${esc(title)}: ${root.count} busy samples (frames under ${minShare * 100}% left out)</text>`,
    ...rects,
    "</svg>",
    "",
  ].join("\n");
}

const top = arg("top");
if (process.argv.includes("--svg")) {
  process.stdout.write(flameSvg(arg("title") ?? file));
} else if (!top) {
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
