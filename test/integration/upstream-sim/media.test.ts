import { afterEach, beforeEach, describe, expect, test } from "vitest";
import {
  DEFAULT_SIM_MODELS,
  quoteVideoMicro,
  SIM_MP4_BYTES,
  type SimVideoModel,
  type UpstreamSimulator,
} from "../../../src/local/upstream-sim/index.js";
import { diemOf, post, startSim } from "../../../testkit/upstream-sim.js";

const START = 5_000_000n;
let sim: UpstreamSimulator;

function videoModel(id: string): SimVideoModel {
  const m = DEFAULT_SIM_MODELS.find((x) => x.id === id);
  if (m?.type !== "video") throw new Error(`no video model ${id}`);
  return m;
}

beforeEach(async () => {
  sim = await startSim([{ key: "k1", diemMicro: START }]);
});

afterEach(async () => {
  await sim.close();
});

describe("POST /image/generate", () => {
  test.each([
    {
      label: "flat generation price × variants",
      body: { model: "venice-sd35", variants: 3 },
      charge: 30_000n,
      images: 3,
    },
    {
      label: "resolution-tiered, explicit 2K",
      body: { model: "nano-banana-pro", resolution: "2K" },
      charge: 230_000n,
      images: 1,
    },
    { label: "resolution-tiered, default 1K", body: { model: "nano-banana-pro" }, charge: 180_000n, images: 1 },
    {
      label: "quality matrix 4K low × 2",
      body: { model: "gpt-image-2", resolution: "4K", quality: "low", variants: 2 },
      charge: 140_000n,
      images: 2,
    },
    { label: "quality matrix defaults (1K high)", body: { model: "gpt-image-2" }, charge: 260_000n, images: 1 },
  ])("$label → debited up front", async ({ body, charge, images }) => {
    const res = await post(sim, "/image/generate", { prompt: "a red fox", ...body });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-venice-balance-diem")).toBe("5");
    expect(res.headers.get("x-venice-is-content-violation")).toBe("false");
    expect(res.headers.get("x-venice-is-adult-model-content-violation")).toBe("false");
    const json = (await res.json()) as {
      id: string;
      images: string[];
      timing: object;
      request: { data: { format: string } };
    };
    expect(json.images).toHaveLength(images);
    expect(
      Buffer.from(json.images[0] ?? "", "base64")
        .subarray(0, 4)
        .toString("ascii"),
    ).toBe("RIFF");
    expect(json.request.data.format).toBe("webp");
    expect(json.timing).toHaveProperty("total");
    expect(START - diemOf(sim)).toBe(charge);
    expect(sim.state.listRequests()[0]?.burnMicroDiem).toBe(charge);
  });

  test("invalid resolution / quality / unknown field → 400; unknown model → 404; text model → 400", async () => {
    expect(
      (await post(sim, "/image/generate", { model: "nano-banana-pro", prompt: "x", resolution: "8K" })).status,
    ).toBe(400);
    expect((await post(sim, "/image/generate", { model: "gpt-image-2", prompt: "x", quality: "ultra" })).status).toBe(
      400,
    );
    const strict = await post(sim, "/image/generate", { model: "venice-sd35", prompt: "x", n: 2 });
    expect(strict.status).toBe(400);
    expect(((await strict.json()) as { issues: { keys?: string[] }[] }).issues[0]?.keys).toEqual(["n"]);
    expect((await post(sim, "/image/generate", { model: "venice-sd35", prompt: "x", variants: 5 })).status).toBe(400);
    expect((await post(sim, "/image/generate", { model: "nope", prompt: "x" })).status).toBe(404);
    expect((await post(sim, "/image/generate", { model: "qwen3-4b", prompt: "x" })).status).toBe(400);
    expect(diemOf(sim)).toBe(START);
  });

  test("return_binary → raw image bytes", async () => {
    const res = await post(sim, "/image/generate", {
      model: "venice-sd35",
      prompt: "x",
      return_binary: true,
      format: "png",
    });
    expect(res.headers.get("content-type")).toBe("image/png");
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.subarray(1, 4).toString("ascii")).toBe("PNG");
  });

  test("content violation → 200 flagged, debited like any image (the reference does not say otherwise)", async () => {
    const res = await post(sim, "/image/generate", { model: "venice-sd35", prompt: "bad [[sim:content_violation]]" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-venice-is-content-violation")).toBe("true");
    expect(res.headers.get("x-venice-is-adult-model-content-violation")).toBe("false");
    expect(diemOf(sim)).toBe(START - 10_000n);
  });

  test("content violation the provider does not bill ([[sim:content_violation_free]]) → flagged, nothing debited", async () => {
    const res = await post(sim, "/image/generate", {
      model: "venice-sd35",
      prompt: "bad [[sim:content_violation_free]]",
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-venice-is-content-violation")).toBe("true");
    expect(diemOf(sim)).toBe(START);
  });

  test("adult-model content violation → its own header, debited", async () => {
    const res = await post(sim, "/image/generate", {
      model: "venice-sd35",
      prompt: "x [[sim:adult_content_violation]]",
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-venice-is-content-violation")).toBe("false");
    expect(res.headers.get("x-venice-is-adult-model-content-violation")).toBe("true");
    expect(diemOf(sim)).toBe(START - 10_000n);
  });

  test("prepaid: one currency must cover the whole price, else 402", async () => {
    sim.state.addKey({ key: "thin", diemMicro: 100_000n, usdMicro: 150_000n });
    const res = await post(sim, "/image/generate", { model: "nano-banana-pro", prompt: "x" }, "thin");
    expect(res.status).toBe(402);
    expect(sim.state.getKey("thin")).toMatchObject({ diemMicro: 100_000n, usdMicro: 150_000n });
    const ok = await post(sim, "/image/generate", { model: "gpt-image-2", prompt: "x", quality: "medium" }, "thin");
    expect(ok.status).toBe(200);
    expect(sim.state.getKey("thin")).toMatchObject({ diemMicro: 30_000n, usdMicro: 150_000n });
  });
});

describe("POST /images/generations (OpenAI-compatible)", () => {
  test("b64_json by default, n max 1, unknown model falls back to the default image model", async () => {
    const res = await post(sim, "/images/generations", { model: "dall-e-3", prompt: "a cat", size: "1024x1024" });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { created: number; data: { b64_json?: string }[] };
    expect(body.data).toHaveLength(1);
    expect(body.data[0]?.b64_json).toBeTruthy();
    expect(sim.state.listRequests()[0]?.model).toBe("venice-sd35");
    expect(START - diemOf(sim)).toBe(10_000n);
    expect((await post(sim, "/images/generations", { prompt: "a cat", n: 2 })).status).toBe(400);
    const url = (await (
      await post(sim, "/images/generations", { prompt: "a cat", response_format: "url" })
    ).json()) as {
      data: { url: string }[];
    };
    expect(url.data[0]?.url).toMatch(/^data:image\/png;base64,/);
  });
});

describe("video", () => {
  test("quote is deterministic and free", async () => {
    const res = await post(sim, "/video/quote", {
      model: "wan-2.6-text-to-video",
      duration: "10s",
      resolution: "1080p",
    });
    expect(res.status).toBe(200);
    const expected = quoteVideoMicro(videoModel("wan-2.6-text-to-video"), { duration: "10s", resolution: "1080p" });
    expect(expected).toBe(1_700_000n); // 10 s × (0.15 + 0.02 audio)
    expect(await res.json()).toEqual({ quote: 1.7 });
    const silent = await post(sim, "/video/quote", {
      model: "wan-2.6-text-to-video",
      duration: "10s",
      resolution: "1080p",
      audio: false,
    });
    expect(await silent.json()).toEqual({ quote: 1.5 });
    expect(diemOf(sim)).toBe(START);
    expect((await post(sim, "/video/quote", { model: "wan-2.6-text-to-video", duration: "7s" })).status).toBe(400);
  });

  test("queue → PROCESSING → mp4 → complete → 404; quote debited at queue", async () => {
    const queued = await post(sim, "/video/queue", {
      model: "wan-2.6-text-to-video",
      prompt: "a drone shot",
      duration: "5s",
      resolution: "720p",
      aspect_ratio: "16:9",
    });
    expect(queued.status).toBe(200);
    const { queue_id, model } = (await queued.json()) as { queue_id: string; model: string };
    expect(model).toBe("wan-2.6-text-to-video");
    expect(START - diemOf(sim)).toBe(600_000n);

    const first = await post(sim, "/video/retrieve", { model, queue_id });
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await first.json()).toMatchObject({ status: "PROCESSING", average_execution_time: 145000 });

    const done = await post(sim, "/video/retrieve", { model, queue_id });
    expect(done.status).toBe(200);
    expect(done.headers.get("content-type")).toBe("video/mp4");
    expect(Buffer.from(await done.arrayBuffer()).equals(SIM_MP4_BYTES)).toBe(true);

    expect(await (await post(sim, "/video/complete", { model, queue_id })).json()).toEqual({ success: true });
    const gone = await post(sim, "/video/retrieve", { model, queue_id });
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { error: string }).error).toMatch(/^Media could not be found/);
    expect(START - diemOf(sim)).toBe(600_000n);
  });

  test("queue validation: duration, aspect ratio, image_url for image-to-video, other key's job is 404", async () => {
    expect(
      (await post(sim, "/video/queue", { model: "wan-2.6-text-to-video", prompt: "x", duration: "6s" })).status,
    ).toBe(400);
    expect(
      (
        await post(sim, "/video/queue", {
          model: "wan-2.6-text-to-video",
          prompt: "x",
          duration: "5s",
          aspect_ratio: "4:3",
        })
      ).status,
    ).toBe(400);
    expect(
      (await post(sim, "/video/queue", { model: "kling-2.6-pro-image-to-video", prompt: "x", duration: "5s" })).status,
    ).toBe(400);
    expect(diemOf(sim)).toBe(START);
    const ok = await post(sim, "/video/queue", {
      model: "kling-2.6-pro-image-to-video",
      prompt: "x",
      duration: "5s",
      image_url: "https://example.com/a.png",
    });
    expect(ok.status).toBe(200);
    const { queue_id } = (await ok.json()) as { queue_id: string };
    sim.state.addKey({ key: "other", diemMicro: START });
    expect(
      (await post(sim, "/video/retrieve", { model: "kling-2.6-pro-image-to-video", queue_id }, "other")).status,
    ).toBe(404);
  });

  test("queue → 402 when the quote is not covered by one currency", async () => {
    sim.state.addKey({ key: "poor", diemMicro: 400_000n, usdMicro: 400_000n });
    const res = await post(
      sim,
      "/video/queue",
      { model: "wan-2.6-text-to-video", prompt: "x", duration: "5s", resolution: "720p" },
      "poor",
    );
    expect(res.status).toBe(402);
    expect(sim.state.getKey("poor")).toMatchObject({ diemMicro: 400_000n, usdMicro: 400_000n });
  });

  test("failed and content-policy jobs are refunded", async () => {
    sim.state.setVideoProcessingPolls(0);
    const failedQ = (await (
      await post(sim, "/video/queue", {
        model: "wan-2.6-text-to-video",
        prompt: "[[sim:video=failed]]",
        duration: "5s",
      })
    ).json()) as { queue_id: string };
    expect(diemOf(sim)).toBeLessThan(START);
    const failed = await post(sim, "/video/retrieve", { model: "wan-2.6-text-to-video", queue_id: failedQ.queue_id });
    expect(failed.status).toBe(200);
    expect(((await failed.json()) as { status: string }).status).toBe("failed");
    expect(diemOf(sim)).toBe(START);

    const policyQ = (await (
      await post(sim, "/video/queue", {
        model: "wan-2.6-text-to-video",
        prompt: "[[sim:video=content_policy]]",
        duration: "5s",
      })
    ).json()) as { queue_id: string };
    const policy = await post(sim, "/video/retrieve", { model: "wan-2.6-text-to-video", queue_id: policyQ.queue_id });
    expect(policy.status).toBe(422);
    expect(await policy.json()).toMatchObject({ error: { type: "provider_content_policy", credits_refunded: true } });
    expect(diemOf(sim)).toBe(START);
    const queueRecords = sim.state.listRequests({ route: "/video/queue" });
    expect(queueRecords.map((r) => r.refundedMicro)).toEqual(queueRecords.map((r) => r.burnMicroDiem));
  });

  test("download_url model: JSON COMPLETED and an unauthenticated download", async () => {
    const queued = (await (
      await post(sim, "/video/queue", { model: "grok-imagine-text-to-video-private", prompt: "x", duration: "6s" })
    ).json()) as { queue_id: string; download_url: string };
    expect(queued.download_url).toMatch(/^http:\/\/.+\/__media\/.+\.mp4$/);
    expect((await fetch(queued.download_url)).status).toBe(404); // not ready yet
    await post(sim, "/video/retrieve", { model: "grok-imagine-text-to-video-private", queue_id: queued.queue_id });
    const done = await post(sim, "/video/retrieve", {
      model: "grok-imagine-text-to-video-private",
      queue_id: queued.queue_id,
    });
    expect(done.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await done.json()).toMatchObject({ status: "COMPLETED" });
    const file = await fetch(queued.download_url);
    expect(file.status).toBe(200);
    expect(file.headers.get("content-type")).toBe("video/mp4");
  });
});
