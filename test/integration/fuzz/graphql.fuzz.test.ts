import fc from "fast-check";
import type { GraphQLSchema } from "graphql";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { buildSchema } from "../../../src/graphql/schema/index.js";
import { createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import {
  type FuzzOperation,
  type GraphQLCase,
  graphqlAccepts,
  operationArbitrary,
  operationsOf,
} from "../../../testkit/fuzz/graphql-fuzz.js";
import {
  type Answer,
  graphqlProblem,
  graphqlResults,
  percentEncode,
  sendRaw,
} from "../../../testkit/fuzz/http-fuzz.js";
import { ownSupply } from "../../../testkit/fuzz/own-supply.js";
import { recordsChecksum } from "../../../testkit/fuzz/records-checksum.js";
import { fuzzParameters } from "../../../testkit/fuzz/settings.js";
import { addSupply, fundConfirmed } from "../../../testkit/market.js";

/**
 * Issue 18 Deliver 1, GraphQL: every query, mutation and subscription field of the live schema gets
 * operations with malformed arguments, wrong variables, a wrong selection, excessive depth, aliases
 * and tokens, and broken syntax (testkit/fuzz/graphql-fuzz.ts), sent anonymously, with a session
 * (and its Origin) and with a Bearer key. No answer may be a 5xx or hang; every error carries a
 * string `extensions.code` and none is a masked `internal_error`; a refused mutation or subscription
 * returns no data; and the books and records are the same afterwards (checked after every request on
 * a mutation). The caller owns keys and an offer, whose ids the ID arguments take.
 */

test.override("appOptions", { sim: {}, syncCatalog: true, env: { GRAPHQL_COST_PER_MINUTE: "1000000000" } });
const world = fileWorld(test);

const SCHEMA: GraphQLSchema = buildSchema();
const OPERATIONS = operationsOf(SCHEMA).sort((a, b) =>
  `${a.kind} ${a.field.name}`.localeCompare(`${b.kind} ${b.field.name}`),
);
const { numRuns, seed } = fuzzParameters();
const ran = new Map<string, number>();

let user: SignedInUser;
let apiKey: string;
let ids: string[];

beforeAll(async () => {
  user = await signIn(world.app);
  const key = await createKey(world.app, user);
  apiKey = key.apiKey;
  await fundConfirmed(world.app, user.accountId, 50_000_000n);
  await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
  const own = await ownSupply(world, user.accountId);
  ids = [own.freeKeyId, own.offerId, own.offeredKeyId, key.id];
});

afterAll(async () => {
  await assertBooksBalance(world.app.rt.db);
});

/** The request a case describes, with a credential's headers. */
function send(c: GraphQLCase, credential: Record<string, string>): Promise<Answer> {
  const accept = c.transport === "sse" ? "text/event-stream" : "application/json";
  if (c.transport === "get") {
    const params = [`query=${percentEncode(String(c.query))}`];
    if (c.variables !== undefined) params.push(`variables=${percentEncode(JSON.stringify(c.variables))}`);
    if (c.operationName !== undefined) params.push(`operationName=${percentEncode(String(c.operationName))}`);
    return sendRaw(world.app.baseUrl, "GET", `/graphql?${params.join("&")}`, { ...credential, accept }, undefined);
  }
  const body = JSON.stringify({ query: c.query, variables: c.variables, operationName: c.operationName });
  return sendRaw(
    world.app.baseUrl,
    "POST",
    "/graphql",
    { ...credential, accept, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) },
    body,
  );
}

/**
 * A query may answer data (it writes nothing); it must not fail inside: no 5xx, every error with a
 * string code that is not internal_error, and errors when the operation is one the server must refuse.
 */
function queryProblem(a: Answer, mustRefuse: boolean): string | null {
  if (a.status >= 500) return `server error ${a.status}`;
  if (mustRefuse || a.status >= 400) {
    const p = graphqlProblem(a);
    // a refused query may still answer data for the fields it could resolve
    return p === "data returned for a refused operation" ? null : p;
  }
  for (const r of graphqlResults(a) ?? []) {
    for (const e of r?.errors ?? []) {
      const code = e.extensions?.code;
      if (typeof code !== "string") return `an error without extensions.code: ${String(e.message).slice(0, 200)}`;
      if (code === "internal_error") return `a masked internal error: ${String(e.message).slice(0, 200)}`;
    }
  }
  return null;
}

describe("GraphQL fuzz: every root field of the live schema", () => {
  test("every query, mutation and subscription field is listed", () => {
    const kinds = new Set(OPERATIONS.map((o) => o.kind));
    expect([...kinds].sort()).toEqual(["mutation", "query", "subscription"]);
    expect(OPERATIONS.length).toBeGreaterThan(25);
  });

  test.each(OPERATIONS.map((o) => [`${o.kind} ${o.field.name}`, o] as const))(
    "%s",
    async (_name, op: FuzzOperation) => {
      const db = world.app.rt.db;
      const session = await signIn(world.app, { address: user.walletAddress, privateKey: user.privateKey });
      const credentials: Record<string, string>[] = [
        {},
        { cookie: session.cookie, origin: new URL(world.app.rt.config.urls.base).origin },
        { authorization: `Bearer ${apiKey}` },
      ];
      const before = await recordsChecksum(db);
      const writes = op.kind === "mutation";
      let count = 0;
      await fc.assert(
        fc.asyncProperty(operationArbitrary(SCHEMA, op, ids), async (c) => {
          const mustRefuse = !graphqlAccepts(SCHEMA, c);
          const start = writes ? await recordsChecksum(db) : "";
          for (const credential of credentials) {
            const answer = await send(c, credential);
            count++;
            const problem = op.kind === "query" ? queryProblem(answer, mustRefuse) : graphqlProblem(answer);
            const changed = writes && (await recordsChecksum(db)) !== start;
            if (problem || changed) {
              throw new Error(
                `${problem ?? "the books and records changed"}\n${c.transport.toUpperCase()} with ${Object.keys(credential).join("+") || "no credential"}\n` +
                  `did: ${c.labels.join("; ")}\nquery: ${String(c.query).slice(0, 400)}\nvariables: ${JSON.stringify(c.variables)?.slice(0, 200)}\n` +
                  `answer ${answer.status}: ${answer.text.slice(0, 400)}`,
              );
            }
          }
        }),
        { numRuns, seed },
      );
      ran.set(`${op.kind} ${op.field.name}`, count);
      expect(count).toBeGreaterThanOrEqual(numRuns);
      expect(await recordsChecksum(db), "books and records unchanged").toBe(before);
    },
  );

  test("every operation was fuzzed", () => {
    const missing = OPERATIONS.filter((o) => !ran.has(`${o.kind} ${o.field.name}`)).map(
      (o) => `${o.kind} ${o.field.name}`,
    );
    expect(missing).toEqual([]);
  });
});
