// Prints the live Pothos schema to schema.graphql (npm run schema:print). A test fails on drift.
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { lexicographicSortSchema, printSchema } from "graphql";
import { buildSchema } from "../src/graphql/schema/index.js";

export function printLiveSchema(): string {
  return `${printSchema(lexicographicSortSchema(buildSchema()))}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const out = fileURLToPath(new URL("../schema.graphql", import.meta.url));
  writeFileSync(out, printLiveSchema());
  console.log(`wrote ${out}`);
}
