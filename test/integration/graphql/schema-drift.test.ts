import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { validateSchema } from "graphql";
import { describe, expect, test } from "vitest";
import { printLiveSchema } from "../../../scripts/print-schema.js";
import { buildSchema } from "../../../src/graphql/schema/index.js";

describe("schema.graphql", () => {
  test("is the printed live schema (run `npm run schema:print` after changing types)", () => {
    const committed = readFileSync(fileURLToPath(new URL("../../../schema.graphql", import.meta.url)), "utf8");
    expect(printLiveSchema()).toBe(committed);
  });

  test("the live schema is valid", () => {
    expect(validateSchema(buildSchema())).toEqual([]);
  });
});
