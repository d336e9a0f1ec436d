import { migrateTemplate } from "../../testkit/template.js";

/** vitest's global setup: the migrated template database every test file clones. */
export async function setup(): Promise<void> {
  await migrateTemplate();
}

export async function teardown(): Promise<void> {}
