// GraphQL over the buyer's media (issue 16 item 5): `myVideoJobs` / `myVideoJob` and the owner-only
// `videoJobUpdated` subscription read the same VideoJobs service as POST /v1/video/*; the image
// history is `myInferenceHistory(modality: "image")`; `marketStats.todayByModality` counts video
// clears. Jobs are queued through REST against the upstream simulator.
import { createClient } from "graphql-sse";
import { beforeAll, describe, expect } from "vitest";
import { call } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { assertBooksBalance } from "../../../testkit/books.js";
import { addSupply, fundedBuyerKey } from "../../../testkit/market.js";
import { withApp } from "../../../testkit/world.js";

test.override("appOptions", { sim: {}, syncCatalog: true });
const world = fileWorld(test);

// wan-2.6 at 720p with audio: 5 s × (0.10 + 0.02) DIEM + 5% markup = 0.63 DIEM; at 40 cents 0.252 USDC
const JOB = { model: "wan-2.6-text-to-video", prompt: "a fox in the snow", duration: "5s", resolution: "720p" };
const JOB_DIEM = "630000";
const JOB_USDC = "252000";

beforeAll(async () => {
  // one 40-cent offer big enough for every job and image of this file
  await addSupply(world.app, world.sim, [{ priceCents: 40, quantityMicroDiem: 50_000_000n }]);
  world.app.rt.services.inference.invalidateBook();
});

interface GqlError {
  message: string;
  extensions?: { code?: string };
}

async function gql<T>(
  query: string,
  variables: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<{ data?: T | null; errors?: GqlError[] }> {
  const r = await call(world.app, { method: "POST", path: "/graphql", headers, body: { query, variables } });
  return r.body as { data?: T | null; errors?: GqlError[] };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A funded buyer with a session cookie and an API key. */
async function buyer(usdcMicro = 2_000_000n) {
  const b = await fundedBuyerKey(world.app, usdcMicro);
  return { ...b, cookie: { cookie: b.user.cookie }, bearer: { authorization: `Bearer ${b.apiKey}` } };
}

async function queueJob(apiKey: string): Promise<{ queueId: string; ref: string }> {
  const r = await call(world.app, {
    method: "POST",
    path: "/v1/video/queue",
    headers: { authorization: `Bearer ${apiKey}` },
    body: JOB,
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return {
    queueId: (r.body as { queue_id: string }).queue_id,
    ref: r.headers.get("x-svc-support-reference") ?? "",
  };
}

function complete(apiKey: string, queueId: string) {
  return call(world.app, {
    method: "POST",
    path: "/v1/video/complete",
    headers: { authorization: `Bearer ${apiKey}` },
    body: { queue_id: queueId },
  });
}

const FIELDS = `queueId model status upstreamStatus quoteDiem chargeUsdc supportReference clearingPriceCents
  createdAt completedAt deliveredAt refundedAt refundDueAt failureReason pollCount`;
const LIST = `query($first: Int, $status: VideoJobStatus) { myVideoJobs(first: $first, status: $status) { ${FIELDS} } }`;
const ONE = `query($q: String!) { myVideoJob(queueId: $q) { ${FIELDS} } }`;

interface Job {
  queueId: string;
  model: string;
  status: string;
  quoteDiem: string;
  chargeUsdc: string;
  supportReference: string;
  clearingPriceCents: number | null;
  createdAt: string;
  refundedAt: string | null;
  pollCount: number;
}

describe("myVideoJobs / myVideoJob", () => {
  test("a queued job is listed (newest first) and viewed with the charge, quote and reference REST gave", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 5, renderMs: 0, defaultOutcome: "mp4" });
    const b = await buyer();
    const older = await queueJob(b.apiKey);
    const newer = await queueJob(b.apiKey);

    const list = await gql<{ myVideoJobs: Job[] }>(LIST, {}, b.cookie);
    expect(list.errors).toBeUndefined();
    expect(list.data?.myVideoJobs.map((j) => j.queueId)).toEqual([newer.queueId, older.queueId]);
    const first = list.data?.myVideoJobs[1];
    expect(first).toMatchObject({
      queueId: older.queueId,
      model: "wan-2.6-text-to-video",
      status: "RENDERING",
      quoteDiem: JOB_DIEM,
      chargeUsdc: JOB_USDC,
      supportReference: older.ref,
      clearingPriceCents: 40,
      refundedAt: null,
      pollCount: 0,
    });
    expect(Math.abs(Date.parse(first?.createdAt ?? "") - Date.now())).toBeLessThan(60_000);

    // the same job by queue id, with a session or the buyer's API key
    for (const headers of [b.cookie, b.bearer]) {
      const one = await gql<{ myVideoJob: Job }>(ONE, { q: older.queueId }, headers);
      expect(one.errors).toBeUndefined();
      expect(one.data?.myVideoJob).toEqual(first);
    }

    // first and status narrow the list
    const top = await gql<{ myVideoJobs: Job[] }>(LIST, { first: 1 }, b.cookie);
    expect(top.data?.myVideoJobs.map((j) => j.queueId)).toEqual([newer.queueId]);
    expect((await complete(b.apiKey, older.queueId)).status).toBe(200);
    const expired = await gql<{ myVideoJobs: Job[] }>(LIST, { status: "EXPIRED" }, b.cookie);
    expect(expired.data?.myVideoJobs.map((j) => [j.queueId, j.status])).toEqual([[older.queueId, "EXPIRED"]]);
    const rendering = await gql<{ myVideoJobs: Job[] }>(LIST, { status: "RENDERING" }, b.cookie);
    expect(rendering.data?.myVideoJobs.map((j) => j.queueId)).toEqual([newer.queueId]);
    await assertBooksBalance(world.app.rt.db);
  });

  test("a buyer without jobs gets an empty list", async () => {
    const b = await buyer(0n);
    const r = await gql<{ myVideoJobs: Job[] }>(LIST, {}, b.cookie);
    expect(r).toEqual({ data: { myVideoJobs: [] } });
  });
});

describe("rejections", () => {
  test.each([
    ["zero", 0],
    ["negative", -1],
    ["above 100", 101],
  ])("myVideoJobs(first: %s) → invalid_request", async (_label, first) => {
    const b = await buyer(0n);
    const r = await gql(LIST, { first }, b.cookie);
    expect(r.data ?? null).toBeNull();
    expect(r.errors?.[0]?.extensions?.code).toBe("invalid_request");
  });

  test("an unknown status value is a GraphQL validation error", async () => {
    const b = await buyer(0n);
    const r = await gql(LIST, { status: "DONE" }, b.cookie);
    expect(r.errors?.length).toBeGreaterThan(0);
  });

  test("myVideoJob of an unknown queue id → not_found", async () => {
    const b = await buyer(0n);
    const r = await gql(ONE, { q: "7c1a8f0e-0000-4000-8000-000000000000" }, b.cookie);
    expect(r.data ?? null).toBeNull();
    expect(r.errors?.[0]?.extensions?.code).toBe("not_found");
  });
});

describe("authorisation", () => {
  test("another buyer's job is not_found by id and absent from their list; anonymous callers are refused", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 5, renderMs: 0, defaultOutcome: "mp4" });
    const owner = await buyer();
    const other = await buyer(0n);
    const job = await queueJob(owner.apiKey);

    const byId = await gql(ONE, { q: job.queueId }, other.cookie);
    expect(byId.data ?? null).toBeNull();
    expect(byId.errors?.[0]?.extensions?.code).toBe("not_found");
    const list = await gql<{ myVideoJobs: Job[] }>(LIST, {}, other.bearer);
    expect(list).toEqual({ data: { myVideoJobs: [] } });

    for (const q of [LIST, ONE]) {
      const anon = await gql(q, { q: job.queueId }, {});
      expect(anon.data ?? null).toBeNull();
      expect(anon.errors?.[0]?.extensions?.code).toBe("authentication_failed");
    }
  });
});

describe("videoJobUpdated subscription", () => {
  type Event = { videoJobUpdated: { queueId: string; status: string; chargeUsdc: string } };

  test("delivers the viewer's own jobs as they are now, and never another buyer's", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 50, renderMs: 0, defaultOutcome: "mp4" });
    const a = await buyer();
    const b = await buyer();
    const warm = await queueJob(a.apiKey);
    const client = createClient({ url: `${world.app.baseUrl}/graphql`, headers: a.cookie, retryAttempts: 0 });
    const received: Event[] = [];
    const errors: unknown[] = [];
    const it = client.iterate<Event>({ query: "subscription { videoJobUpdated { queueId status chargeUsdc } }" });
    const reader = (async () => {
      try {
        for await (const r of it) {
          if (r.data) received.push(r.data);
          if (r.errors) errors.push(r.errors);
        }
      } catch (e) {
        errors.push(e);
      }
    })();
    try {
      // no acknowledgement: nudge A's channel about a job until the stream is live (bounded)
      for (let i = 0; i < 100 && received.length === 0; i++) {
        world.app.rt.bus.publish("videoJobUpdated", a.accountId, {
          accountId: a.accountId,
          queueId: warm.queueId,
          status: "rendering",
          at: new Date().toISOString(),
        });
        await sleep(50);
      }
      expect(received[0]?.videoJobUpdated).toEqual({
        queueId: warm.queueId,
        status: "RENDERING",
        chargeUsdc: JOB_USDC,
      });
      await sleep(300);
      const settled = received.length;

      // B's job changes: nothing reaches A
      const theirs = await queueJob(b.apiKey);
      expect((await complete(b.apiKey, theirs.queueId)).status).toBe(200);
      await sleep(400);
      expect(received.length).toBe(settled);

      // A queues a job (an event) and completes it while rendering (it expires: another event); each
      // event yields the job re-read as it is at delivery, so the last one A sees is EXPIRED
      const mine = await queueJob(a.apiKey);
      expect((await complete(a.apiKey, mine.queueId)).status).toBe(200);
      const expiredSeen = () => received.some((e) => e.videoJobUpdated.status === "EXPIRED");
      for (let i = 0; i < 40 && !expiredSeen(); i++) await sleep(50);
      await sleep(200);
      const mineEvents = received.slice(settled).map((e) => e.videoJobUpdated);
      expect(mineEvents.length).toBeGreaterThanOrEqual(1);
      expect(mineEvents.length).toBeLessThanOrEqual(2);
      for (const e of mineEvents) expect([e.queueId, e.chargeUsdc]).toEqual([mine.queueId, JOB_USDC]);
      expect(mineEvents.at(-1)?.status).toBe("EXPIRED");
      expect(errors).toEqual([]);
    } finally {
      await it.return?.();
      client.dispose();
      await Promise.race([reader, sleep(1000)]);
    }
  });

  test("an anonymous subscription is refused with authentication_failed", async () => {
    const client = createClient({ url: `${world.app.baseUrl}/graphql`, retryAttempts: 0 });
    const results: { errors?: readonly { extensions?: Record<string, unknown> }[] }[] = [];
    const it = client.iterate({ query: "subscription { videoJobUpdated { queueId } }" });
    const reader = (async () => {
      try {
        for await (const r of it) results.push(r as (typeof results)[number]);
      } catch (e) {
        results.push({ errors: [{ extensions: { thrown: String(e) } }] });
      }
    })();
    await Promise.race([reader, sleep(3000)]);
    await it.return?.();
    client.dispose();
    expect(results).toHaveLength(1);
    expect(results[0]?.errors?.[0]?.extensions?.code).toBe("authentication_failed");
  });
});

describe("image history and the market's video figures", () => {
  const HISTORY = `query($m: String) { myInferenceHistory(modality: $m) { items { supportReference modality route model status cost } } }`;
  type History = { myInferenceHistory: { items: { supportReference: string; modality: string; cost: string }[] } };

  test("an image request is in myInferenceHistory with modality image (and not under text)", async () => {
    const b = await buyer();
    const r = await call(world.app, {
      method: "POST",
      path: "/v1/image/generate",
      headers: b.bearer,
      body: { model: "venice-sd35", prompt: "a red fox" },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const ref = r.headers.get("x-svc-support-reference");
    // the request's record is written as it ends
    await expect
      .poll(async () => (await gql<History>(HISTORY, { m: "image" }, b.cookie)).data?.myInferenceHistory.items)
      .toEqual([
        {
          supportReference: ref,
          modality: "image",
          route: expect.any(String),
          model: "venice-sd35",
          status: expect.any(String),
          cost: "4000", // 0.01 DIEM at 40 cents
        },
      ]);
    const text = await gql<History>(HISTORY, { m: "text" }, b.cookie);
    expect(text.data?.myInferenceHistory.items).toEqual([]);
    const bad = await gql(HISTORY, { m: "IMAGE" }, b.cookie);
    expect(bad.errors?.[0]?.extensions?.code).toBe("invalid_request");
  });

  test("a queued video job moves marketStats.todayByModality for video (clears, burn, gross)", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 5, renderMs: 0, defaultOutcome: "mp4" });
    const STATS = "{ marketStats { todayClears todayByModality { modality clears burn gross } } }";
    type Stats = {
      marketStats: {
        todayClears: number;
        todayByModality: { modality: string; clears: number; burn: string; gross: string }[];
      };
    };
    const video = async () => {
      const s = await gql<Stats>(STATS, {}, {});
      const v = s.data?.marketStats.todayByModality.find((m) => m.modality === "video");
      if (!v) throw new Error(`no video row: ${JSON.stringify(s)}`);
      return { clears: v.clears, burn: BigInt(v.burn), gross: BigInt(v.gross) };
    };
    const before = await video();
    const b = await buyer();
    await queueJob(b.apiKey);
    await expect.poll(video).toEqual({
      clears: before.clears + 1,
      burn: before.burn + BigInt(JOB_DIEM),
      gross: before.gross + BigInt(JOB_USDC),
    });
    await assertBooksBalance(world.app.rt.db);
  });
});

describe("query count", () => {
  test("myVideoJobs issues the same statements for 1 job or 4", async () => {
    world.sim.state.setVideoConfig({ processingPolls: 5, renderMs: 0, defaultOutcome: "mp4" });
    let queries: string[] = [];
    await withApp({ beside: world.app, onQuery: (q) => queries.push(q) }, async (counted) => {
      const countFor = async (cookie: string) => {
        queries = [];
        const r = await call(counted, { method: "POST", path: "/graphql", headers: { cookie }, body: { query: LIST } });
        expect((r.body as { errors?: unknown }).errors).toBeUndefined();
        expect((r.body as { data: { myVideoJobs: unknown[] } }).data.myVideoJobs.length).toBeGreaterThan(0);
        return queries.filter((q) => !/^\s*(BEGIN|COMMIT|ROLLBACK)/i.test(q) && !/sessions/i.test(q)).length;
      };
      const few = await buyer();
      await queueJob(few.apiKey);
      const many = await buyer();
      for (let i = 0; i < 4; i++) await queueJob(many.apiKey);
      const a = await countFor(few.user.cookie);
      const b = await countFor(many.user.cookie);
      expect(a).toBeGreaterThan(0);
      expect(b).toBe(a);
    });
  });
});
