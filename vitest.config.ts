import { createRequire } from "node:module";
import { defineConfig } from "vitest/config";

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // graphql ships CJS (main) and ESM (module) builds; Node loads the CJS one for Pothos and yoga,
    // so test files must too, or the two realms collide ("Cannot use GraphQLSchema from another realm").
    alias: [{ find: /^graphql$/, replacement: require.resolve("graphql") }],
  },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["./test/support/global-setup.ts"],
    setupFiles: ["./test/support/setup.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: { LOG_LEVEL: "silent" },
  },
});
