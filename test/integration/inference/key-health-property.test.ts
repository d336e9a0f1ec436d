// Issue 39 acceptance: no sequence of buyer requests (any model, any route, any body) changes a
// supplier key's health. A seeded property drives random routes, models and bodies through the real
// pipeline (Postgres, Redis, the upstream simulator) while the simulator answers with random
// documented refusals, and checks each key against what the simulator knows of it: a key changes
// only when it answered a key's-fault answer (a 402, the documented invalid-key 401 outside
// /responses) or is really revoked — and a revoked key that was asked leaves routing.
// Replay a failure with FUZZ_SEED=<seed>; FUZZ_RUNS sets the number of cases (default 60).
import fc from "fast-check";
import { beforeAll, expect } from "vitest";
import { SIM_FAULT_KINDS, type SimFaultKind } from "../../../src/local/upstream-sim/faults.js";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { addSupply, fundedBuyerKey, type SupplierKey } from "../../../testkit/market.js";

test.override("appOptions", { sim: {}, syncCatalog: true, env: { KEY_MAX_IN_FLIGHT: "64" } });
const world = fileWorld(test);

const RUNS = Number(process.env.FUZZ_RUNS ?? "60");
const SEED = Number(process.env.FUZZ_SEED ?? "39");

/** The service's inference routes, with a body each that the upstream would take. */
const ROUTES = {
  chat: { path: "/v1/chat/completions", base: { messages: [{ role: "user", content: "hi" }] } },
  responses: { path: "/v1/responses", base: { input: "hi" } },
  image: { path: "/v1/image/generate", base: { prompt: "a fox" } },
  images_openai: { path: "/v1/images/generations", base: { prompt: "a fox" } },
  video_quote: { path: "/v1/video/quote", base: { prompt: "a fox", duration: "5s" } },
  video_queue: { path: "/v1/video/queue", base: { prompt: "a fox", duration: "5s" } },
} as const;
type Route = keyof typeof ROUTES;

/** The route's own models (kling is region-restricted), and others: not live, unknown, another modality. */
const TEXT = ["zai-org-glm-5-1", "kimi-k2-5"];
const IMAGE = ["venice-sd35", "nano-banana-pro"];
const VIDEO = ["wan-2.6-text-to-video", "kling-2.6-pro-image-to-video"];
const MODELS: Record<Route, string[]> = {
  chat: TEXT,
  responses: TEXT,
  image: IMAGE,
  images_openai: IMAGE,
  video_quote: VIDEO,
  video_queue: VIDEO,
};
const OTHER_MODELS = ["llama-3.2-3b", "no-such-model", ...TEXT, ...IMAGE, ...VIDEO];
/** Body fields a buyer may add, documented or not. */
const EXTRA_FIELDS = ["temperature", "max_tokens", "top_p", "n", "seed", "user", "resolution", "audio", "foo"];

/** Every documented answer the simulator can give: not the key's fault, and the key's-fault ones (402, the invalid-key 401). */
const REFUSALS: SimFaultKind[] = SIM_FAULT_KINDS.filter((k) => k.startsWith("http_"));

type Scenario =
  | { kind: "fault"; fault: SimFaultKind; key: number | "*"; count: number; route?: string }
  | { kind: "revoke"; key: number }
  | { kind: "alpha_off"; key: number | "*" }
  | { kind: "region"; region: string };

const KEYS = 4;
const keyIndex = fc.integer({ min: 0, max: KEYS - 1 });
const scenario: fc.Arbitrary<Scenario> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("fault" as const),
      fault: fc.constantFrom(...REFUSALS),
      key: fc.oneof({ weight: 2, arbitrary: fc.constant("*" as const) }, { weight: 1, arbitrary: keyIndex }),
      count: fc.integer({ min: 1, max: 3 }),
      // sometimes on the rate-limits read a confirmation makes instead of the inference call
      route: fc.oneof(
        { weight: 5, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: fc.constant("/api_keys/rate_limits") },
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("revoke" as const), key: keyIndex }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("alpha_off" as const),
      key: fc.oneof(keyIndex, fc.constant("*" as const)),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("region" as const), region: fc.constantFrom("DE", "FR", "GB") }),
  },
);

const request = fc.constantFrom(...(Object.keys(ROUTES) as Route[])).chain((route) =>
  fc.record({
    route: fc.constant(route),
    model: fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom(...MODELS[route]) },
      { weight: 1, arbitrary: fc.constantFrom(...OTHER_MODELS) },
    ),
    stream: fc.boolean(),
    extra: fc.oneof(
      { weight: 3, arbitrary: fc.constant({}) },
      {
        weight: 1,
        arbitrary: fc.dictionary(
          fc.oneof(fc.constantFrom(...EXTRA_FIELDS), fc.string({ minLength: 1, maxLength: 10 })),
          fc.jsonValue({ maxDepth: 2 }),
          { maxKeys: 3 },
        ),
      },
    ),
  }),
);

let keys: SupplierKey[] = [];
let apiKey = "";

beforeAll(async () => {
  const s = await addSupply(
    world.app,
    world.sim,
    [35, 40, 45, 50].map((priceCents) => ({ priceCents, quantityMicroDiem: 500_000_000n })),
  );
  keys = s.keys;
  apiKey = (await fundedBuyerKey(world.app, 1_000_000_000n)).apiKey;
});

/** Waits until the simulator saw no call for a moment (a 402's balance refresh runs after its request). */
async function quiet(): Promise<void> {
  const sim = world.sim.state;
  for (let i = 0; i < 40; i++) {
    const seen = sim.listRequests().length;
    await new Promise((r) => setTimeout(r, 25));
    if (sim.listRequests().length === seen && sim.listKeys().every((k) => k.inFlight === 0)) return;
  }
}

/** Every key healthy in the simulator and in the service; no fault, no restriction. */
async function restore(): Promise<void> {
  await quiet();
  const sim = world.sim.state;
  sim.clearFaults();
  sim.setCallerRegion("US");
  for (const k of keys) {
    sim.revokeKey(k.secret, false);
    sim.setAlphaAccess(k.secret, true);
    sim.setBalance(k.secret, { diemMicro: 100_000_000n, spentDiemEpochMicro: 0n });
  }
  await world.app.rt.db.upstreamKey.updateMany({
    where: { id: { in: keys.map((k) => k.upstreamKeyId) } },
    data: { status: "active", authFailedAt: null, cooldownUntil: null, lastBalanceMicroDiem: 100_000_000n },
  });
  world.app.rt.services.inference.invalidateBook();
}

function apply(s: Scenario): void {
  const sim = world.sim.state;
  const secretOf = (i: number) => keys[i]?.secret ?? "";
  switch (s.kind) {
    case "fault":
      sim.injectFault(s.key === "*" ? "*" : secretOf(s.key), {
        kind: s.fault,
        count: s.count,
        ...(s.route ? { route: s.route } : {}),
      });
      return;
    case "revoke":
      sim.revokeKey(secretOf(s.key));
      return;
    case "alpha_off":
      for (const k of s.key === "*" ? keys : [keys[s.key]]) if (k) sim.setAlphaAccess(k.secret, false);
      return;
    case "region":
      sim.setCallerRegion(s.region);
  }
}

test("random requests and documented refusals change a key's health only for the key's own fault", async () => {
  expect(keys).toHaveLength(KEYS);
  await fc.assert(
    fc.asyncProperty(fc.array(scenario, { minLength: 1, maxLength: 3 }), request, async (scenarios, req) => {
      await restore();
      for (const s of scenarios) apply(s);
      const since = world.sim.state.listRequests().length;
      const body = {
        ...ROUTES[req.route].base,
        model: req.model,
        ...(req.route === "chat" || req.route === "responses" ? { stream: req.stream } : {}),
        ...(req.model.startsWith("kling") ? { image_url: "https://example.com/fox.png" } : {}),
        ...req.extra,
      };
      const r = await call(world.app, {
        method: "POST",
        path: ROUTES[req.route].path,
        headers: { authorization: `Bearer ${apiKey}` },
        body,
      });
      // bad input is a documented status, never a 500
      expect(r.status, JSON.stringify(r.body)).not.toBe(500);
      await quiet();

      const asked = world.sim.state.listRequests().slice(since);
      const rows = await world.app.rt.db.upstreamKey.findMany({
        where: { id: { in: keys.map((k) => k.upstreamKeyId) } },
      });
      for (const k of keys) {
        const row = rows.find((x) => x.id === k.upstreamKeyId);
        const mine = asked.filter((a) => a.key === k.secret);
        const what = `${k.priceCents}: ${JSON.stringify({ scenarios, req: { ...req, extra: undefined } })} → ${r.status}`;
        if (world.sim.state.getKey(k.secret)?.revoked === true) {
          // a revoked key answers "Authentication failed" everywhere: marked at once, except on
          // /responses, whose refusals are confirmed by a rate-limits read (at most one a minute)
          if (mine.some((a) => a.route !== "/responses")) {
            expect(row?.status, `revoked and asked ${what}`).toBe("auth_failed");
          }
          continue;
        }
        // the key's own answers (docs/decisions.md "Venice's answers: whose fault"): a 402, the
        // documented invalid-key 401 outside /responses, any 401/403 of the rate-limits read
        const keysFault = mine.some(
          (a) =>
            a.status === 402 ||
            (a.fault === "http_401_auth" && a.route !== "/responses") ||
            (a.route === "/api_keys/rate_limits" && (a.status === 401 || a.status === 403)),
        );
        if (keysFault) continue;
        expect(row?.status, `key untouched ${what}`).toBe("active");
        expect(row?.cooldownUntil, `no cooldown ${what}`).toBeNull();
      }
    }),
    { numRuns: RUNS, seed: SEED },
  );
  await restore();
  // every key is still routed: each answers a chat when the cheaper ones are faulted away
  for (const [i, k] of keys.entries()) {
    for (const cheaper of keys.slice(0, i)) world.sim.state.injectFault(cheaper.secret, { kind: "http_500", count: 1 });
    const r = await call(world.app, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { authorization: `Bearer ${apiKey}` },
      body: { model: "zai-org-glm-5-1", messages: [{ role: "user", content: "hi" }] },
    });
    expect([r.status, r.headers.get("x-svc-clearing-price-cents")]).toEqual([200, String(k.priceCents)]);
  }
});
