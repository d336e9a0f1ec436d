import { startLocalChain } from "../src/local/chain/index.js";
import { appTest } from "./app-test.js";
import { chainEnv } from "./funding.js";

/**
 * The app fixture (app-test.ts) on a local chain: `chain` is an anvil chain with the USDC contract,
 * started once per file and stopped after the app, and the app's options default to `chainEnv(chain)`
 * (the in-process facilitator). A file adds to them with a function of the chain:
 * `test.override("appOptions", ({ chain }) => ({ env: chainEnv(chain, { … }), workers: true }))`.
 */
export const fundingTest = appTest
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern
  .extend("chain", { scope: "file" }, async ({}, { onCleanup }) => {
    const chain = await startLocalChain();
    onCleanup(() => chain.stop());
    return chain;
  })
  .override("appOptions", ({ chain }) => ({ env: chainEnv(chain) }));
