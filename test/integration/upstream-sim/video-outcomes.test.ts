import { afterEach, beforeEach, describe, expect, test } from "vitest";
import {
  DEFAULT_SIM_MODELS,
  quoteVideoMicro,
  SIM_MP4_BYTES,
  type SimVideoModel,
  type UpstreamSimulator,
} from "../../../src/local/upstream-sim/index.js";
import { admin, diemOf, post, startSim } from "../../../testkit/upstream-sim.js";

const START = 5_000_000n;
const MODEL = "wan-2.6-text-to-video";
const PRIVATE_MODEL = "grok-imagine-text-to-video-private";
const T0 = Date.parse("2026-03-10T12:00:00.000Z");

let sim: UpstreamSimulator;
/** the sim's injected base clock; tests move it by assignment */
let clockMs = T0;

function quoteOf(id: string, duration: string): bigint {
  const m = DEFAULT_SIM_MODELS.find((x) => x.id === id);
  if (m?.type !== "video") throw new Error(`no video model ${id}`);
  return quoteVideoMicro(m as SimVideoModel, { duration });
}

const QUOTE = quoteOf(MODEL, "5s");
const PRIVATE_QUOTE = quoteOf(PRIVATE_MODEL, "6s");

interface Queued {
  queue_id: string;
  model: string;
  download_url?: string;
}

async function queue(prompt: string, key = "k1", model = MODEL): Promise<Queued> {
  const res = await post(sim, "/video/queue", { model, prompt, duration: model === MODEL ? "5s" : "6s" }, key);
  expect(res.status).toBe(200);
  return (await res.json()) as Queued;
}

function retrieve(job: Queued, key = "k1"): Promise<Response> {
  return post(sim, "/video/retrieve", { model: job.model, queue_id: job.queue_id }, key);
}

/** status, content type and a comparable body (mp4 bytes → "<mp4>") */
async function answer(res: Response): Promise<{ status: number; type: string; body: unknown }> {
  const type = res.headers.get("content-type") ?? "";
  if (type === "video/mp4") {
    expect(Buffer.from(await res.arrayBuffer()).equals(SIM_MP4_BYTES)).toBe(true);
    return { status: res.status, type, body: "<mp4>" };
  }
  return { status: res.status, type, body: await res.json() };
}

beforeEach(async () => {
  clockMs = T0;
  sim = await startSim(
    [
      { key: "k1", diemMicro: START },
      { key: "k2", diemMicro: START },
    ],
    () => new Date(clockMs),
  );
});

afterEach(async () => {
  await sim.close();
});

describe("outcomes through queue → retrieve", () => {
  test.each([
    {
      label: "mp4 (no directive)",
      prompt: "a drone shot",
      model: MODEL,
      final: { status: 200, type: "video/mp4", body: "<mp4>" },
      refunded: false,
    },
    {
      label: "failed",
      prompt: "x [[sim:video=failed]]",
      model: MODEL,
      final: { status: 200, type: "application/json", body: { status: "failed" } },
      refunded: true,
    },
    {
      label: "content_policy",
      prompt: "x [[sim:video=content_policy]]",
      model: MODEL,
      final: {
        status: 422,
        type: "application/json",
        body: { error: { type: "provider_content_policy", credits_refunded: true } },
      },
      refunded: true,
    },
    {
      label: "completed_no_media",
      prompt: "x [[sim:video=completed_no_media]]",
      model: MODEL,
      final: { status: 200, type: "application/json", body: { status: "COMPLETED", average_execution_time: 145000 } },
      refunded: false,
    },
    {
      label: "download_url (private model)",
      prompt: "x",
      model: PRIVATE_MODEL,
      final: { status: 200, type: "application/json", body: { status: "COMPLETED" } },
      refunded: false,
    },
  ])(
    "$label: PROCESSING, then the same final answer on every later retrieve",
    async ({ prompt, model, final, refunded }) => {
      const quote = model === MODEL ? QUOTE : PRIVATE_QUOTE;
      const job = await queue(prompt, "k1", model);
      expect(START - diemOf(sim)).toBe(quote);

      const first = await answer(await retrieve(job));
      expect(first).toMatchObject({ status: 200, body: { status: "PROCESSING", average_execution_time: 145000 } });

      for (let i = 0; i < 3; i++) {
        const later = await answer(await retrieve(job));
        expect(later.status).toBe(final.status);
        expect(later.type.startsWith(final.type)).toBe(true);
        if (typeof final.body === "string") expect(later.body).toBe(final.body);
        else expect(later.body).toMatchObject(final.body);
      }
      // refunded (once) or not, whatever the number of retrieves
      expect(START - diemOf(sim)).toBe(refunded ? 0n : quote);
      expect(sim.state.listVideoJobs()[0]).toMatchObject({ key: "k1", quoteMicro: quote, refunded });
    },
  );

  test("completed_no_media: no download_url even on a private model, COMPLETED with timings, never media, never refunded", async () => {
    sim.state.setVideoProcessingPolls(0);
    sim.state.setVideoRenderMs(30_000);
    const job = await queue("x [[sim:video=completed_no_media]]", "k1", PRIVATE_MODEL);
    expect(job).toEqual({ model: PRIVATE_MODEL, queue_id: expect.any(String) });
    expect(await (await retrieve(job)).json()).toEqual({
      status: "PROCESSING",
      average_execution_time: 145000,
      execution_duration: 0,
    });
    clockMs += 45_000;
    for (let i = 0; i < 3; i++) {
      clockMs += 1_000;
      const res = await retrieve(job);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      // execution_duration is the render's length, fixed once a retrieve saw it over
      expect(await res.json()).toEqual({
        status: "COMPLETED",
        average_execution_time: 145000,
        execution_duration: 46_000,
      });
    }
    expect((await fetch(`${sim.baseUrl.replace("/api/v1", "")}/__media/${job.queue_id}.mp4`)).status).toBe(404);
    expect(START - diemOf(sim)).toBe(PRIVATE_QUOTE);
    expect(sim.state.videoBurnByKey().get("k1")).toEqual({
      chargedMicro: PRIVATE_QUOTE,
      refundedMicro: 0n,
      netMicro: PRIVATE_QUOTE,
      jobs: 1,
    });
    expect(sim.state.listRequests({ route: "/video/queue" })[0]?.refundedMicro).toBe(0n);
  });

  test("a failed private-model job still got its download_url at queue; the URL never serves", async () => {
    sim.state.setVideoProcessingPolls(0);
    const job = await queue("x [[sim:video=failed]]", "k1", PRIVATE_MODEL);
    expect(job.download_url).toMatch(/\/__media\/.+\.mp4$/);
    expect(await (await retrieve(job)).json()).toMatchObject({ status: "failed" });
    expect((await fetch(job.download_url ?? "")).status).toBe(404);
    expect(diemOf(sim)).toBe(START);
  });
});

describe("render time on the sim clock", () => {
  test("renderMs from the config: PROCESSING until it has elapsed since queue", async () => {
    sim.state.setVideoProcessingPolls(0);
    sim.state.setVideoRenderMs(10_000);
    const job = await queue("x");
    expect(sim.state.listVideoJobs()[0]?.renderMs).toBe(10_000);
    expect(await (await retrieve(job)).json()).toMatchObject({ status: "PROCESSING", execution_duration: 0 });
    clockMs += 9_999;
    expect(await (await retrieve(job)).json()).toMatchObject({ status: "PROCESSING", execution_duration: 9_999 });
    clockMs += 1;
    expect((await retrieve(job)).headers.get("content-type")).toBe("video/mp4");
    // once over, it stays over (even if the clock is set back)
    clockMs -= 5_000;
    expect((await retrieve(job)).headers.get("content-type")).toBe("video/mp4");
  });

  test("[[sim:render_ms=N]] overrides the config per job; the admin clock counts too", async () => {
    sim.state.setVideoProcessingPolls(0);
    sim.state.setVideoRenderMs(60_000);
    const quick = await queue("x [[sim:render_ms=2000]]");
    const slow = await queue("x");
    expect((await (await retrieve(quick)).json()) as object).toMatchObject({ status: "PROCESSING" });
    const advanced = await admin(sim, "POST", "/clock", { advanceMs: 2_000 });
    expect(advanced.status).toBe(200);
    expect((await retrieve(quick)).headers.get("content-type")).toBe("video/mp4");
    expect(await (await retrieve(slow)).json()).toMatchObject({ status: "PROCESSING", execution_duration: 2_000 });
  });

  test("polls and render time both have to be spent", async () => {
    sim.state.setVideoProcessingPolls(2);
    sim.state.setVideoRenderMs(1_000);
    const late = await queue("x");
    clockMs += 5_000; // render time over, polls still left
    expect(await (await retrieve(late)).json()).toMatchObject({ status: "PROCESSING" });
    expect(await (await retrieve(late)).json()).toMatchObject({ status: "PROCESSING" });
    expect((await retrieve(late)).headers.get("content-type")).toBe("video/mp4");

    const early = await queue("x [[sim:polls=1]]");
    expect(await (await retrieve(early)).json()).toMatchObject({ status: "PROCESSING" });
    // polls spent, render time not over
    expect(await (await retrieve(early)).json()).toMatchObject({ status: "PROCESSING" });
    clockMs += 1_000;
    expect((await retrieve(early)).headers.get("content-type")).toBe("video/mp4");
  });
});

describe("admin /__admin/video/config", () => {
  test("GET and POST return the config; a partial POST keeps the other fields", async () => {
    expect(await (await admin(sim, "GET", "/video/config")).json()).toEqual({
      processingPolls: 1,
      renderMs: 0,
      defaultOutcome: "mp4",
    });
    const set = await admin(sim, "POST", "/video/config", { renderMs: 2_500, defaultOutcome: "completed_no_media" });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({ processingPolls: 1, renderMs: 2_500, defaultOutcome: "completed_no_media" });
    expect(sim.state.videoConfig()).toEqual({
      processingPolls: 1,
      renderMs: 2_500,
      defaultOutcome: "completed_no_media",
    });
  });

  test("defaultOutcome applies to jobs without a directive on non-download models only", async () => {
    const set = await admin(sim, "POST", "/video/config", { processingPolls: 0, defaultOutcome: "failed" });
    expect(await set.json()).toEqual({ processingPolls: 0, renderMs: 0, defaultOutcome: "failed" });

    const plain = await queue("x");
    expect(await (await retrieve(plain)).json()).toMatchObject({ status: "failed" });
    const forcedMp4 = await queue("x [[sim:video=mp4]]");
    expect((await retrieve(forcedMp4)).headers.get("content-type")).toBe("video/mp4");
    const policy = await queue("x [[sim:video=content_policy]]");
    expect((await retrieve(policy)).status).toBe(422);
    const privateJob = await queue("x", "k1", PRIVATE_MODEL);
    expect(privateJob.download_url).toBeDefined();
    expect(await (await retrieve(privateJob)).json()).toMatchObject({ status: "COMPLETED" });

    expect(sim.state.listVideoJobs().map((j) => j.outcome)).toEqual([
      "failed",
      "mp4",
      "content_policy",
      "download_url",
    ]);
  });

  test.each([
    { label: "negative processingPolls", body: { processingPolls: -1 } },
    { label: "fractional renderMs", body: { renderMs: 1.5 } },
    { label: "string renderMs", body: { renderMs: "100" } },
    { label: "renderMs beyond the limit", body: { renderMs: 2_000_000_000 } },
    { label: "download_url is not selectable", body: { defaultOutcome: "download_url" } },
    { label: "unknown outcome", body: { defaultOutcome: "exploded" } },
    { label: "unknown field", body: { processingPoll: 2 } },
    { label: "not an object", body: [1] },
    { label: "one good, one bad field", body: { processingPolls: 3, defaultOutcome: "nope" } },
  ])("$label → 400 and the config is unchanged", async ({ body }) => {
    const res = await admin(sim, "POST", "/video/config", body);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBeTruthy();
    expect(sim.state.videoConfig()).toEqual({ processingPolls: 1, renderMs: 0, defaultOutcome: "mp4" });
  });

  test("SimState setters reject bad values", () => {
    expect(() => sim.state.setVideoRenderMs(-1)).toThrow(/renderMs/);
    expect(() => sim.state.setVideoProcessingPolls(0.5)).toThrow(/processingPolls/);
    // @ts-expect-error not a selectable outcome
    expect(() => sim.state.setVideoDefaultOutcome("download_url")).toThrow(/defaultOutcome/);
  });
});

describe("burn accounting", () => {
  test("charged and refunded per key; a failed job refunded exactly once under 5 concurrent retrieves", async () => {
    sim.state.setVideoProcessingPolls(0);
    const failed = await queue("x [[sim:video=failed]]");
    await queue("x"); // mp4, never retrieved
    const noMedia = await queue("x [[sim:video=completed_no_media]]");
    const policy = await queue("x [[sim:video=content_policy]]", "k2");
    await queue("x", "k2", PRIVATE_MODEL);

    const answers = await Promise.all(Array.from({ length: 5 }, () => retrieve(failed)));
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ status: "failed" });
    }
    const policyAnswers = await Promise.all(Array.from({ length: 5 }, () => retrieve(policy, "k2")));
    expect(policyAnswers.map((r) => r.status)).toEqual([422, 422, 422, 422, 422]);
    for (const res of policyAnswers) await res.body?.cancel();
    for (let i = 0; i < 3; i++) expect((await retrieve(noMedia)).status).toBe(200);

    const burn = sim.state.videoBurnByKey();
    expect(burn.get("k1")).toEqual({
      chargedMicro: 3n * QUOTE,
      refundedMicro: QUOTE,
      netMicro: 2n * QUOTE,
      jobs: 3,
    });
    expect(burn.get("k2")).toEqual({
      chargedMicro: QUOTE + PRIVATE_QUOTE,
      refundedMicro: QUOTE,
      netMicro: PRIVATE_QUOTE,
      jobs: 2,
    });
    // the balances moved by exactly the net
    expect(START - diemOf(sim, "k1")).toBe(2n * QUOTE);
    expect(START - diemOf(sim, "k2")).toBe(PRIVATE_QUOTE);
    // the queue records agree: one refund each, of the whole quote
    const refunds = sim.state.listRequests({ route: "/video/queue" }).map((r) => r.refundedMicro);
    expect(refunds).toEqual([QUOTE, 0n, 0n, QUOTE, 0n]);
    expect(sim.state.listVideoJobs().map((j) => j.refunded)).toEqual([true, false, false, true, false]);

    const viaAdmin = await admin(sim, "GET", "/video/burn");
    expect(await viaAdmin.json()).toEqual({
      data: [
        {
          key: "k1",
          chargedMicro: (3n * QUOTE).toString(),
          refundedMicro: QUOTE.toString(),
          netMicro: (2n * QUOTE).toString(),
          jobs: 3,
        },
        {
          key: "k2",
          chargedMicro: (QUOTE + PRIVATE_QUOTE).toString(),
          refundedMicro: QUOTE.toString(),
          netMicro: PRIVATE_QUOTE.toString(),
          jobs: 2,
        },
      ],
    });
    const oneKey = (await (await admin(sim, "GET", "/video/burn?key=k2")).json()) as { data: { key: string }[] };
    expect(oneKey.data.map((d) => d.key)).toEqual(["k2"]);
  });

  test("a job whose failure no retrieve has seen yet is not refunded; the admin job list shows the fields", async () => {
    sim.state.setVideoRenderMs(10_000);
    const failed = await queue("x [[sim:video=failed]]");
    expect(await (await retrieve(failed)).json()).toMatchObject({ status: "PROCESSING" });
    expect(sim.state.videoBurnByKey().get("k1")?.refundedMicro).toBe(0n);
    const jobs = (await (await admin(sim, "GET", "/video/jobs")).json()) as { data: Record<string, unknown>[] };
    expect(jobs.data[0]).toMatchObject({
      key: "k1",
      quoteMicro: QUOTE.toString(),
      outcome: "failed",
      refunded: false,
      renderMs: 10_000,
    });
  });
});

describe("POST /video/complete", () => {
  test("on a job still rendering: success, then retrieve 404", async () => {
    sim.state.setVideoRenderMs(60_000);
    const job = await queue("x");
    expect(await (await retrieve(job)).json()).toMatchObject({ status: "PROCESSING" });
    const done = await post(sim, "/video/complete", { model: job.model, queue_id: job.queue_id });
    expect(done.status).toBe(200);
    expect(await done.json()).toEqual({ success: true });
    clockMs += 120_000;
    expect((await retrieve(job)).status).toBe(404);
    expect(START - diemOf(sim)).toBe(QUOTE);
  });

  test("after the media was delivered: success, then retrieve 404; a second complete is 404", async () => {
    sim.state.setVideoProcessingPolls(0);
    const job = await queue("x");
    expect((await retrieve(job)).headers.get("content-type")).toBe("video/mp4");
    expect(await (await post(sim, "/video/complete", { model: job.model, queue_id: job.queue_id })).json()).toEqual({
      success: true,
    });
    expect((await retrieve(job)).status).toBe(404);
    expect((await post(sim, "/video/complete", { model: job.model, queue_id: job.queue_id })).status).toBe(404);
  });
});
