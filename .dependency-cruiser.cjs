/**
 * The layering, enforced by `npm run lint` (docs/decisions.md "Inference pipeline"):
 *
 *   composition root (src/main.ts, src/dev.ts, src/boot.ts, src/runtime.ts, src/services.ts, src/app.ts)
 *     → transports (src/http, src/graphql, src/mcp, workers)
 *       → domain (src/domain) → adapters (src/adapters) → lib (src/lib)
 *   and beside them src/contract: the API's zod schemas (requests, responses, the OpenAPI
 *   registry), shared by the REST routes, /openapi.json and the MCP tools; it imports only lib.
 *
 * Type-only imports count: a type pulled from a transport couples the layers just the same.
 * test/unit/lint/dependency-rules.test.ts plants each kind of violation in a copy and sees it fail.
 */

const TRANSPORTS = "^(src/(http|graphql|mcp)/|workers/)";
const COMPOSITION_ROOT = "^src/(main|dev|boot|runtime|services|app)\\.ts$";
/** what the production build leaves out: the local world, the dev entry, the web build and the browser app */
const DEV_ONLY = "^src/(local/|dev\\.ts$|web/)";
const FRAMEWORKS =
  "(^|/)node_modules/(express|graphql|graphql-yoga|graphql-sse|@graphql-yoga|@pothos|bullmq|@modelcontextprotocol)/";

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "domain-not-to-transports",
      comment: "domain, adapters and lib never reach up into a transport (HTTP, GraphQL, MCP, workers).",
      severity: "error",
      from: { path: "^src/(domain|adapters|lib)/" },
      to: { path: TRANSPORTS },
    },
    {
      name: "not-to-composition-root",
      comment: "only transports and the entry points may see the wiring (runtime, services, main).",
      severity: "error",
      from: { path: "^src/(domain|adapters|lib)/" },
      to: { path: COMPOSITION_ROOT },
    },
    {
      name: "adapters-not-to-domain",
      comment:
        "adapters talk to the outside world (Postgres, Redis, chain, upstream); the domain uses them, not the reverse.",
      severity: "error",
      from: { path: "^src/adapters/" },
      to: { path: "^src/domain/" },
    },
    {
      name: "lib-is-a-leaf",
      comment: "src/lib holds pure helpers (money, clock, errors, SSE framing): it depends on no layer above it.",
      severity: "error",
      from: { path: "^src/lib/" },
      to: { path: "^src/(domain|adapters|local|http|graphql|mcp)/" },
    },
    {
      name: "contract-is-pure",
      comment: "the API contract (zod schemas) is shared by the transports: it imports only zod and lib",
      severity: "error",
      from: { path: "^src/contract/" },
      to: { path: "^src/(domain|adapters|local|http|graphql|mcp)/|^src/(main|runtime|services)\\.ts$|^workers/" },
    },
    {
      name: "domain-no-framework",
      comment: "the domain is transport-neutral: no Express, GraphQL, Pothos, yoga, BullMQ or MCP SDK.",
      severity: "error",
      from: { path: "^src/domain/" },
      to: { path: FRAMEWORKS },
    },
    {
      name: "no-cycles",
      comment: "no import cycle anywhere in the service, the workers or the test kit (type-only imports included).",
      severity: "error",
      from: { path: "^(src|workers|testkit)/", pathNot: "^src/generated/" },
      to: { circular: true },
    },
    {
      name: "production-not-to-tests",
      comment: "the service and its workers never import the tests, the test kit or the bench.",
      severity: "error",
      from: { path: "^(src|workers)/" },
      to: { path: "^(test|testkit|bench)/" },
    },
    {
      name: "testkit-not-to-tests",
      comment: "testkit is shared by the tests and the bench: it depends on neither.",
      severity: "error",
      from: { path: "^testkit/" },
      to: { path: "^(test|bench)/" },
    },
    {
      name: "bench-not-to-test",
      comment: "the bench builds its world with testkit/, never with the tests' own helpers.",
      severity: "error",
      from: { path: "^bench/" },
      to: { path: "^test/" },
    },
    {
      name: "production-not-to-dev-deps",
      comment: "what `npm start` loads must be installed by `npm ci --omit=dev`.",
      severity: "error",
      from: { path: "^(src|workers)/", pathNot: DEV_ONLY },
      to: { dependencyTypes: ["npm-dev"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "production-entry-not-to-dev-only",
      comment:
        "the production entry (src/main.ts, bundled by `npm run build`) never reaches the local world, the dev entry or the web build, by any path: `npm run dev` (src/dev.ts) brings them",
      severity: "error",
      from: { path: "^src/main\\.ts$" },
      to: { path: DEV_ONLY, reachable: true },
    },
    {
      name: "only-the-dev-entry-to-local",
      comment: "the local world is brought in by the dev entry alone (and the test kit, tests, bench and scripts)",
      severity: "error",
      from: { path: "^(src|workers)/", pathNot: DEV_ONLY },
      to: { path: "^src/local/" },
    },
    {
      name: "web-is-a-front-end",
      comment:
        "src/web/app runs in the browser: it reaches the service only through HTTP and GraphQL, never by importing the domain, adapters, transports, the local world, the wiring or a Node built-in.",
      severity: "error",
      from: { path: "^src/web/app/" },
      to: {
        path: "^src/(domain|adapters|lib|http|graphql|mcp|local|contract|generated)/|^src/(main|runtime|services|config)\\.ts$|^(workers|testkit|test|bench)/",
      },
    },
    {
      name: "web-app-no-node-builtins",
      comment: "browser code: no Node built-in modules.",
      severity: "error",
      from: { path: "^src/web/app/" },
      to: { dependencyTypes: ["core"] },
    },
    {
      name: "web-build-not-to-domain",
      comment: "the web build (src/web/vite.ts) only builds and serves the front end; it knows no domain or adapter.",
      severity: "error",
      from: { path: "^src/web/" },
      to: { path: "^src/(domain|adapters)/" },
    },
    {
      name: "not-to-unresolvable",
      comment: "every import resolves to a file or an installed package.",
      severity: "error",
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^src/generated/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".tsx", ".js", ".mjs", ".cjs", ".json", ".d.ts"],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
