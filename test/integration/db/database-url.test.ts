import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createPrisma, ensureDatabase, runMigrations } from "../../../src/adapters/db.js";
import { createSql } from "../../../src/adapters/sql.js";
import { loadConfig } from "../../../src/config.js";
import { type EmbeddedPostgres, startEmbeddedPostgres } from "../../../src/local/dev-services/postgres.js";
import { freePort } from "../../../testkit/harness.js";

/**
 * Issue 38 "Bad input": a DATABASE_URL whose password holds `/`, `+` or `=` works through every path
 * that reads the URL — configuration, database creation, the migration runner (the Prisma CLI and
 * the stored functions), Prisma's pg adapter and the router's pg pool — and a refused password is
 * never printed. The local PostgreSQL trusts every connection from 127.0.0.1 (it would take any
 * password), so this file runs its own cluster (the embedded PostgreSQL of `npm run dev`) with
 * scram-sha-256 authentication: a wrong password is refused there, so a right one is proven.
 */

const PASSWORD = "a/b+c=d";
const ENCODED = encodeURIComponent(PASSWORD); // a%2Fb%2Bc%3Dd (RFC 3986)
const PROD = {
  PAY_TO: "0x1111111111111111111111111111111111111111",
  SESSION_SECRET: "s".repeat(40),
  KEY_ENCRYPTION_KEY: "ab".repeat(32),
};

let server: EmbeddedPostgres;
let port: number;
let stateDir: string;

beforeAll(async () => {
  port = await freePort();
  stateDir = mkdtempSync(join(tmpdir(), "svc-pg-password-"));
  // as root the cluster runs as the user postgres, who must reach the directory
  chmodSync(stateDir, 0o755);
  server = await startEmbeddedPostgres({
    url: new URL(`postgresql://svc:${ENCODED}@127.0.0.1:${port}/postgres`),
    stateDir,
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  rmSync(stateDir, { recursive: true, force: true });
});

function configuredUrl(env: Record<string, string>): string {
  const r = loadConfig({ ...PROD, ...env });
  if (!r.ok) throw new Error(r.errors.join("\n"));
  return r.config.database.url;
}

async function whoAmI(url: string): Promise<{ prisma: string; pg: string }> {
  const db = createPrisma(url, { max: 1 });
  const sql = createSql(url, 1);
  try {
    const [row] = await db.$queryRaw<{ user: string }[]>`SELECT current_user::text AS "user"`;
    const r = await sql.query<{ user: string }>("SELECT current_user AS user");
    return { prisma: row?.user ?? "", pg: r.rows[0]?.user ?? "" };
  } finally {
    await db.$disconnect();
    await sql.end();
  }
}

describe(`a Postgres password with / + = ("${PASSWORD}") under scram-sha-256`, () => {
  test("percent-encoded in DATABASE_URL: created, migrated, and served by Prisma and pg", async () => {
    const url = configuredUrl({ DATABASE_URL: `postgresql://svc:${ENCODED}@127.0.0.1:${port}/svc_pw` });
    await ensureDatabase(url);
    await runMigrations(url);
    expect(await whoAmI(url)).toEqual({ prisma: "svc", pg: "svc" });
    // the migrations ran: the books' tables are there
    const sql = createSql(url, 1);
    try {
      const r = await sql.query("SELECT to_regclass('public.accounts') IS NOT NULL AS ok");
      expect(r.rows[0]?.ok).toBe(true);
    } finally {
      await sql.end();
    }
  }, 180_000);

  test("as it is in DATABASE_PASSWORD (what compose.prod.yml passes): the same", async () => {
    const url = configuredUrl({
      DATABASE_URL: `postgresql://svc@127.0.0.1:${port}/svc_pw2`,
      DATABASE_PASSWORD: PASSWORD,
    });
    await ensureDatabase(url);
    await runMigrations(url);
    expect(await whoAmI(url)).toEqual({ prisma: "svc", pg: "svc" });
  }, 180_000);

  test("a wrong password is refused — and not printed — by database creation and the migration runner", async () => {
    const wrong = "Wr0ng/pass+word=";
    const url = configuredUrl({ DATABASE_URL: `postgresql://svc@127.0.0.1:${port}/svc_pw`, DATABASE_PASSWORD: wrong });
    const created = await ensureDatabase(url).then(
      () => "connected",
      (e: Error) => e.message,
    );
    expect(created).toMatch(
      /^DATABASE_URL: cannot connect to 127\.0\.0\.1:\d+\/svc_pw \(.*password authentication failed/,
    );
    const migrated = await runMigrations(url).then(
      () => "migrated",
      (e: Error) => e.message,
    );
    expect(migrated).toMatch(/^DATABASE_URL: migrations failed \(.*(authentication|P1000)/i);
    for (const message of [created, migrated]) {
      expect(message).not.toContain("Wr0ng");
      expect(message).not.toContain(encodeURIComponent(wrong));
    }
  }, 180_000);
});
