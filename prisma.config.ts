// Loaded only by the Prisma CLI (generate, migrate). The four fixes below are the verified
// offline recipe from STACK_NOTES §5 plus (5); each one is needed.
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { defineConfig } from "prisma/config";

// (1) prisma#27403: the JS engine cannot deserialize "char"/name columns (+ arrays) → read them as text.
const REMAP: Record<number, number> = { 18: 25, 19: 25, 1002: 1009, 1003: 1009 };
type RowDescription = { fields: { dataTypeID: number }[] };
const Query = (pg as unknown as { Query: { prototype: { handleRowDescription: (m: RowDescription) => unknown } } })
  .Query;
const original = Query.prototype.handleRowDescription;
Query.prototype.handleRowDescription = function (this: unknown, m: RowDescription) {
  for (const f of m.fields) {
    const to = REMAP[f.dataTypeID];
    if (to) f.dataTypeID = to;
  }
  return original.call(this, m);
};

// (2) the wasm engine leaves a 10 s timer behind → the CLI would hang; unref long timers.
const nativeSetTimeout = globalThis.setTimeout;
(globalThis as { setTimeout: unknown }).setTimeout = (fn: () => void, ms?: number, ...args: unknown[]) => {
  const t = nativeSetTimeout(fn, ms, ...args);
  if ((ms ?? 0) >= 5000) (t as unknown as { unref?: () => void }).unref?.();
  return t;
};

// (3) an unresolvable env() makes the CLI download a native engine → always provide a value.
process.env.DATABASE_URL ??= "postgresql://postgres@127.0.0.1:5432/svc";
const u = new URL(process.env.DATABASE_URL);
const cfg = {
  host: u.hostname,
  port: Number(u.port || 5432),
  user: decodeURIComponent(u.username),
  password: decodeURIComponent(u.password),
  database: decodeURIComponent(u.pathname.slice(1)),
  allowExitOnIdle: true, // (2b) else the idle pool keeps the CLI alive
};
const main = new PrismaPg(cfg);

// (5) adapter-pg's executeScript splits migration scripts on every ";" — which breaks plpgsql
// function bodies — and runs the pieces outside a transaction. Send each script whole instead:
// Postgres runs a multi-statement simple query atomically.
type ScriptConn = { executeScript: (s: string) => Promise<void> };
function wholeScripts<T extends ScriptConn>(conn: T): T {
  const inner = conn as unknown as {
    client: { query: (s: string) => Promise<unknown> };
    onError: (e: unknown) => never;
  };
  conn.executeScript = async (script: string) => {
    try {
      await inner.client.query(script);
    } catch (e) {
      inner.onError(e);
    }
  };
  return conn;
}

export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  experimental: { adapter: true },
  engine: "js",
  adapter: async () => ({
    provider: "postgres" as const,
    adapterName: main.adapterName,
    connect: async () => wholeScripts(await main.connect()),
    // (4) migrate dev: the stock shadow database is dropped while still connected → own create/drop.
    async connectToShadowDb() {
      const admin = wholeScripts(await main.connect());
      const db = `prisma_shadow_${crypto.randomUUID().replaceAll("-", "")}`;
      await admin.executeScript(`CREATE DATABASE "${db}"`);
      const shadow = wholeScripts(await new PrismaPg({ ...cfg, database: db }).connect());
      const dispose = shadow.dispose.bind(shadow);
      shadow.dispose = async () => {
        await dispose();
        await admin.executeScript(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`);
        await admin.dispose();
      };
      return shadow;
    },
  }),
});
