// `node --import tsx scripts/claude-code.ts ["prompt"]`: Claude Code in print mode (`claude -p`) against
// a local service (its own database, Redis prefix and upstream simulator, as the tests start them), with
// ANTHROPIC_BASE_URL at the service, ANTHROPIC_AUTH_TOKEN a funded buyer's key, ANTHROPIC_MODEL a
// catalog model and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (docs/decisions.md "Anthropic Messages
// API"). Claude Code is not a dependency (its native binary is ~400 MB): the script runs the `claude`
// named by CLAUDE_BIN, else the one on PATH, and says so when there is none. One JSON line per
// figure: what Claude Code printed, its exit code, each request the service recorded for the key
// (route, model, status, cost) and the balance change. Exits 1 when Claude Code did not answer or a
// request was not charged as recorded.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setLogLevel } from "../src/lib/logger.js";
import { formatDecimal6 } from "../src/lib/money.js";
import { addSupply, confirmedOf, fundedBuyerKey } from "../testkit/market.js";
import { migrateTemplate } from "../testkit/template.js";
import { startWorld } from "../testkit/world.js";

const MODEL = process.env.SVC_MODEL ?? "zai-org-glm-5-1";
const PROMPT = process.argv[2] ?? "Reply with one short sentence: what is 2 + 2?";
const print = (line: Record<string, unknown>) => console.log(JSON.stringify(line));

function claudeBinary(): string | undefined {
  if (process.env.CLAUDE_BIN) return process.env.CLAUDE_BIN;
  const found = spawnSync("sh", ["-c", "command -v claude"], { encoding: "utf8" });
  return found.status === 0 ? found.stdout.trim() || undefined : undefined;
}

function run(bin: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(bin, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const bin = claudeBinary();
if (!bin) {
  print({
    skipped: "no claude binary: npm install -g @anthropic-ai/claude-code, or set CLAUDE_BIN to its path",
  });
  process.exit(0);
}
setLogLevel(process.env.LOG_LEVEL === "debug" ? "debug" : "warn");
await migrateTemplate();
const world = await startWorld({ sim: {}, syncCatalog: true });
const home = mkdtempSync(join(tmpdir(), "svc-claude-code-"));
let ok = false;
try {
  const { app } = world;
  if (!world.sim) throw new Error("the world has no simulator");
  await addSupply(app, world.sim, [{ priceCents: 40, quantityMicroDiem: 500_000_000n }]);
  app.rt.services.inference.invalidateBook();
  const buyer = await fundedBuyerKey(app, 50_000_000n);
  const before = await confirmedOf(app, buyer.accountId);
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    // a home of its own: no login, settings or history of the machine's user
    HOME: home,
    ANTHROPIC_BASE_URL: app.baseUrl,
    ANTHROPIC_AUTH_TOKEN: buyer.apiKey,
    ANTHROPIC_MODEL: MODEL,
    // the small model Claude Code uses for its side requests: a catalog model too
    ANTHROPIC_SMALL_FAST_MODEL: MODEL,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: MODEL,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
  };
  const started = Date.now();
  const r = await run(bin, ["-p", PROMPT], env, Number(process.env.CLAUDE_TIMEOUT_MS ?? 180_000));
  const after = await confirmedOf(app, buyer.accountId);
  const requests = await app.rt.db.inferenceRequest.findMany({
    where: { accountId: buyer.accountId },
    orderBy: { startedAt: "asc" },
  });
  print({
    claude: bin,
    exitCode: r.code,
    ms: Date.now() - started,
    stdout: r.stdout.slice(0, 2000),
    stderr: r.stderr.slice(0, 2000),
  });
  for (const q of requests) {
    print({
      route: q.route,
      model: q.model,
      stream: q.stream,
      status: q.status,
      errorCode: q.errorCode,
      promptTokens: q.promptTokens,
      completionTokens: q.completionTokens,
      costUsdc: q.costMicroUsdc === null ? null : formatDecimal6(q.costMicroUsdc),
    });
  }
  const charged = requests.reduce((a, q) => a + (q.costMicroUsdc ?? 0n), 0n);
  print({ balanceChangeUsdc: formatDecimal6(before - after), chargedUsdc: formatDecimal6(charged) });
  ok =
    r.code === 0 &&
    r.stdout.trim().length > 0 &&
    requests.some((q) => q.route === "messages" && q.status === "succeeded") &&
    before - after === charged;
} finally {
  await world.close();
  rmSync(home, { recursive: true, force: true });
}
process.exit(ok ? 0 : 1);
