import { describe, expect, test } from "vitest";
import { uuidV7 } from "../../../src/lib/uuid7.js";

// Its own file: vitest gives each test file its own module state, so the first id drawn here is the
// first this module makes, from a pool not filled yet.
describe("uuidV7's pool of random bytes", () => {
  test("from the first id on, across refills, no id's random bits are zero or another's", () => {
    const at = new Date("2026-11-30T10:00:00.000Z");
    // 256 ids a fill: 3 fills and a few more, all at one instant, so only the random bits differ
    const ids = Array.from({ length: 3 * 256 + 5 }, () => uuidV7(at));
    const randomBits = ids.map((id) => id.replaceAll("-", "").slice(12).replace(/^7/, ""));
    for (const bits of randomBits) expect(bits).not.toMatch(/^0{3}[89ab]0{15}$/);
    expect(new Set(randomBits).size).toBe(ids.length);
    // and no two share even their last six bytes
    expect(new Set(ids.map((id) => id.slice(-12))).size).toBe(ids.length);
  });
});
