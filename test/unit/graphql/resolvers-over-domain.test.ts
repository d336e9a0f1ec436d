// Issue 27 Deliver 3 (GraphQL part) and 4: GraphQL arguments are parsed by the contract's zod
// schemas and answer the same 400 as before; uuids have one check; resolvers re-derive no rule.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { requestDetailArgs } from "../../../src/contract/account.js";
import { assertUuid, idParam, isUuid } from "../../../src/contract/common.js";
import { recentClearsArgs } from "../../../src/contract/market.js";
import {
  maskedKey,
  postOfferInput,
  registerUpstreamKeyBody,
  soldMicroDiem,
  updateOfferInput,
} from "../../../src/contract/supply.js";
import { videoJobsArgs } from "../../../src/contract/video-jobs.js";
import { withArgs, withInput } from "../../../src/graphql/validate.js";
import { parse } from "../../../src/http/validate.js";
import { DomainError } from "../../../src/lib/errors.js";

/** What a resolver wrapped by `withArgs(schema)` answers for `args`: the parsed args, or the 400. */
function run(schema: Parameters<typeof withArgs>[0], args: object): unknown {
  const resolve = withArgs(schema, (_root: null, a: object) => a);
  try {
    return resolve(null, args, {}, {});
  } catch (e) {
    if (!(e instanceof DomainError)) throw e;
    return { code: e.code, message: e.message, field: e.details.field };
  }
}

/** What a mutation wrapped by `withInput(schema)` answers for `input`: the parsed input, or the 400. */
function runInput(schema: Parameters<typeof withInput>[0], input: object): unknown {
  const resolve = withInput(schema, (_root: null, a: { input: object }) => a.input);
  try {
    return resolve(null, { input }, {}, {});
  } catch (e) {
    if (!(e instanceof DomainError)) throw e;
    return { code: e.code, message: e.message, field: e.details.field };
  }
}

const refused = (field: string, message: string) => ({ code: "invalid_request", message, field });

describe("GraphQL arguments through the contract", () => {
  test.each([
    ["recentClears limit 0", recentClearsArgs, { limit: 0 }, refused("limit", "limit must be an integer 1-100.")],
    ["recentClears limit 101", recentClearsArgs, { limit: 101 }, refused("limit", "limit must be an integer 1-100.")],
    ["recentClears limit null → 20", recentClearsArgs, { limit: null }, { limit: 20 }],
    ["recentClears limit 100", recentClearsArgs, { limit: 100 }, { limit: 100 }],
    ["myVideoJobs first -1", videoJobsArgs, { first: -1 }, refused("first", "first must be an integer 1-100.")],
    ["myVideoJobs first 101", videoJobsArgs, { first: 101 }, refused("first", "first must be an integer 1-100.")],
    ["myVideoJobs keeps status", videoJobsArgs, { first: 5, status: "delivered" }, { first: 5, status: "delivered" }],
    [
      "myInferenceRequest not a uuid",
      requestDetailArgs,
      { supportReference: "not-a-uuid" },
      refused("supportReference", "supportReference must be a uuid."),
    ],
    [
      "myInferenceRequest lower-cased",
      requestDetailArgs,
      { supportReference: "0B4F3A52-5D0E-4F43-9A43-8D6D5D3C1A11" },
      { supportReference: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11" },
    ],
  ])("%s", (_label, schema, args, expected) => {
    expect(run(schema, args)).toEqual(expected);
  });

  // the supply mutations: the rules the services used to re-check by hand on `unknown` input
  const KEY = "0B4F3A52-5D0E-4F43-9A43-8D6D5D3C1A11";
  const offer = (o: object) => ({ priceCentsPerDollar: 40, quantity: 1_000_000n, upstreamKeyId: KEY, ...o });
  const PRICE = (f: string) => refused(f, `${f}: must be an integer 1-80`);
  const updateOffer = idParam.merge(updateOfferInput);
  test.each([
    ["postOffer price 0", postOfferInput, offer({ priceCentsPerDollar: 0 }), PRICE("priceCentsPerDollar")],
    ["postOffer price 81", postOfferInput, offer({ priceCentsPerDollar: 81 }), PRICE("priceCentsPerDollar")],
    ["postOffer price 40.5", postOfferInput, offer({ priceCentsPerDollar: 40.5 }), PRICE("priceCentsPerDollar")],
    [
      "postOffer quantity 0",
      postOfferInput,
      offer({ quantity: 0n }),
      refused("quantity", "quantity: must be greater than 0"),
    ],
    [
      "postOffer quantity above 1 000 000 DIEM",
      postOfferInput,
      offer({ quantity: 1_000_000_000_001n }),
      refused("quantity", "quantity: must be at most 1000000 DIEM"),
    ],
    [
      "postOffer dailyQuantity 0",
      postOfferInput,
      offer({ dailyQuantity: 0n }),
      refused("dailyQuantity", "dailyQuantity: must be greater than 0"),
    ],
    [
      "postOffer a key id not a uuid",
      postOfferInput,
      offer({ upstreamKeyId: "nope" }),
      refused("upstreamKeyId", "upstreamKeyId must be a uuid."),
    ],
    [
      "postOffer a schedule step at 81",
      postOfferInput,
      offer({ schedule: [{ fromUtc: "18:00", priceCentsPerDollar: 81 }] }),
      PRICE("schedule.0.priceCentsPerDollar"),
    ],
    ["updateOffer price 0", updateOffer, { id: KEY, priceCentsPerDollar: 0 }, PRICE("priceCentsPerDollar")],
    [
      "updateOffer keeps null (a cap or schedule removed) and lower-cases the id",
      updateOffer,
      { id: KEY, dailyQuantity: null, schedule: null, status: "paused" },
      { id: KEY.toLowerCase(), dailyQuantity: null, schedule: null, status: "paused" },
    ],
    ["cancelOffer id not a uuid", idParam, { id: "x" }, refused("id", "id must be a uuid.")],
    [
      "registerUpstreamKey label of 65",
      registerUpstreamKeyBody,
      { upstreamApiKey: "vk-abc", label: "x".repeat(65) },
      refused("label", "label: must be 1-64 characters"),
    ],
    [
      "registerUpstreamKey label blank",
      registerUpstreamKeyBody,
      { upstreamApiKey: "vk-abc", label: "   " },
      refused("label", "label: must be 1-64 characters"),
    ],
    [
      "registerUpstreamKey a secret with a space",
      registerUpstreamKeyBody,
      { upstreamApiKey: "vk abc", label: "mine" },
      refused("upstreamApiKey", "upstreamApiKey: must be 1-512 printable characters without spaces"),
    ],
    [
      "registerUpstreamKey trims the label",
      registerUpstreamKeyBody,
      { upstreamApiKey: "vk-abc", label: "  mine " },
      { upstreamApiKey: "vk-abc", label: "mine" },
    ],
  ])("%s", (_label, schema, input, expected) => {
    expect(runInput(schema, input)).toEqual(expected);
  });

  test("a refusal is the DomainError the REST routes throw for the same schema", () => {
    let rest: unknown;
    try {
      parse(recentClearsArgs, { limit: 0 });
    } catch (e) {
      rest = e instanceof DomainError ? { code: e.code, message: e.message, field: e.details.field } : e;
    }
    expect(run(recentClearsArgs, { limit: 0 })).toEqual(rest);
  });
});

describe("one uuid check", () => {
  test("assertUuid, isUuid and the contract's id schema agree", () => {
    const good = "0B4F3A52-5d0e-4f43-9a43-8d6d5d3c1a11";
    for (const v of [good, good.toLowerCase()]) {
      expect(isUuid(v)).toBe(true);
      expect(assertUuid(v, "id")).toBe(good.toLowerCase());
      expect(parse(idParam, { id: v }).id).toBe(good.toLowerCase());
    }
    for (const v of ["", "x", `${good}0`, good.replace(/-/g, ""), 42, null, `urn:uuid:${good}`]) {
      expect(isUuid(v)).toBe(false);
      expect(() => assertUuid(v, "upstreamKeyId")).toThrow("upstreamKeyId must be a uuid.");
    }
  });

  test("no other uuid pattern in the source (lib/cursor.ts matches its own cursor format)", () => {
    const files: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const p = join(dir, name);
        if (statSync(p).isDirectory()) {
          if (name !== "generated" && name !== "web") walk(p);
        } else if (p.endsWith(".ts")) files.push(p);
      }
    };
    walk("src");
    walk("workers");
    const offenders = files.filter(
      (f) => f !== join("src", "lib", "cursor.ts") && /\{8\}-\[0-9a-f/i.test(readFileSync(f, "utf8")),
    );
    expect(offenders).toEqual([]);
  });
});

describe("GraphQL resolvers re-derive no supply rule", () => {
  test("derived figures come from contract/supply.ts", () => {
    expect(maskedKey("1a2b")).toBe("…1a2b");
    expect(soldMicroDiem({ quantityMicroDiem: 5_000_000n, remainingMicroDiem: 1_250_000n })).toBe(3_750_000n);
  });

  test("no schema file writes a masked key, a sold figure or an ownership/status where of its own", () => {
    const dir = join("src", "graphql", "schema");
    const offenders: string[] = [];
    for (const name of readdirSync(dir)) {
      const text = readFileSync(join(dir, name), "utf8");
      for (const [rule, re] of [
        ["masked key", /`…\$\{/],
        ["sold", /quantityMicroDiem\s*-\s*\w+\.remainingMicroDiem/],
        ["status where", /where:\s*\{[^}]*status\s*:/],
        ["ownership where", /where:\s*\{[^}]*accountId\s*:/],
        ["direct clear read", /\.clear\.find/],
      ] as const) {
        if (re.test(text)) offenders.push(`${name}: ${rule}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
