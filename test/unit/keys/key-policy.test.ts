import { describe, expect, test } from "vitest";
import { type KeyPolicyChange, policyColumns } from "../../../src/domain/keys/key-policy.js";
import { DomainError } from "../../../src/lib/errors.js";

const NOW = new Date("2026-03-11T08:00:00.000Z");
const CATALOG = new Set(["zai-org-glm-5-1", "venice-uncensored", "wan-2.6-text-to-video"]);
const ctx = { now: NOW, listedModelIds: async (ids: readonly string[]) => new Set(ids.filter((i) => CATALOG.has(i))) };

async function refusal(change: KeyPolicyChange): Promise<{ code: string; field: unknown } | "accepted"> {
  try {
    await policyColumns(change, ctx);
    return "accepted";
  } catch (e) {
    if (!(e instanceof DomainError)) throw e;
    return { code: e.code, field: e.details.field };
  }
}

describe("policyColumns: what is written", () => {
  test("only the fields sent; null removes (models: empty = every model; limitReset: never)", async () => {
    expect(await policyColumns({}, ctx)).toEqual({});
    expect(
      await policyColumns(
        { limitMicroUsdc: null, limitReset: null, maxPriceCentsPerDollar: null, models: null, expiresAt: null },
        ctx,
      ),
    ).toEqual({ limitMicroUsdc: null, limitReset: "never", maxPriceCentsPerDollar: null, models: [], expiresAt: null });
  });

  test("models are stored bare, once each, in the order sent", async () => {
    const out = await policyColumns({ models: ["svc/venice-uncensored", "zai-org-glm-5-1", "venice-uncensored"] }, ctx);
    expect(out.models).toEqual(["venice-uncensored", "zai-org-glm-5-1"]);
  });

  test("a full policy", async () => {
    const expiresAt = new Date("2026-04-01T00:00:00.000Z");
    expect(
      await policyColumns(
        {
          limitMicroUsdc: 1n,
          limitReset: "weekly",
          maxPriceCentsPerDollar: 30,
          models: ["zai-org-glm-5-1"],
          expiresAt,
        },
        ctx,
      ),
    ).toEqual({
      limitMicroUsdc: 1n,
      limitReset: "weekly",
      maxPriceCentsPerDollar: 30,
      models: ["zai-org-glm-5-1"],
      expiresAt,
    });
  });
});

describe("policyColumns: each bad field is refused by name", () => {
  test.each<[string, KeyPolicyChange, string]>([
    ["limit 0", { limitMicroUsdc: 0n }, "limitUsdc"],
    ["limit negative", { limitMicroUsdc: -1n }, "limitUsdc"],
    ["limit above the bound", { limitMicroUsdc: 1_000_000_000_000_001n }, "limitUsdc"],
    ["limitReset unknown", { limitReset: "hourly" as never }, "limitReset"],
    ["ceiling 29", { maxPriceCentsPerDollar: 29 }, "maxPriceCentsPerDollar"],
    ["ceiling 81", { maxPriceCentsPerDollar: 81 }, "maxPriceCentsPerDollar"],
    ["ceiling fractional", { maxPriceCentsPerDollar: 50.5 }, "maxPriceCentsPerDollar"],
    ["models empty", { models: [] }, "models"],
    ["models unknown id", { models: ["zai-org-glm-5-1", "no-such-model"] }, "models"],
    ["models blank id", { models: ["  "] }, "models"],
    ["models 101 ids", { models: Array.from({ length: 101 }, () => "zai-org-glm-5-1") }, "models"],
    ["expiresAt now", { expiresAt: NOW }, "expiresAt"],
    ["expiresAt past", { expiresAt: new Date("2020-01-01T00:00:00Z") }, "expiresAt"],
    ["expiresAt invalid date", { expiresAt: new Date("nope") }, "expiresAt"],
    ["the first bad field in order is named", { maxPriceCentsPerDollar: 10, limitMicroUsdc: 0n }, "limitUsdc"],
  ])("%s", async (_label, change, field) => {
    expect(await refusal(change)).toEqual({ code: "invalid_request", field });
  });

  test("the upper bound itself is accepted", async () => {
    expect(await refusal({ limitMicroUsdc: 1_000_000_000_000_000n })).toBe("accepted");
  });
});
