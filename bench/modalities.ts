// Issue 19 target 5: every modality on the bench, each with its added latency over the same upstream
// calls sent straight to the simulator (serial, interleaved request by request) and its clears/s
// (closed loop). Video's direct figure is the two upstream calls the service makes for a queue (the
// quote, then the queue), one after the other.
import { performance } from "node:perf_hooks";
import { interleave, post, type Sample, type StreamKind } from "./client.js";
import {
  CHAT_BODY,
  IMAGE_BODY,
  type Market,
  RESPONSES_BODY,
  RESPONSES_STREAM_BODY,
  STREAM_BODY,
  VIDEO_BODY,
} from "./market.js";
import { ms, p50p99, serverTimingP50, targetLine } from "./stats.js";

type Emit = (f: Record<string, unknown>) => void;

interface Modality {
  name: string;
  stream?: StreamKind;
  /** the same work straight at the simulator; `lane` picks the wallet where one job per wallet applies */
  direct: (lane: number, i: number) => Promise<Sample>;
  service: (lane: number, i: number) => Promise<Sample>;
}

function modalities(m: Market): Modality[] {
  const sim = m.sim.baseUrl;
  const svc = m.svcUrl;
  const key = m.directKey;
  const buyer = m.buyer.apiKey;
  const imageBuyer = (lane: number) => m.imageBuyers[lane % m.imageBuyers.length]?.apiKey ?? "";
  return [
    {
      name: "chat",
      direct: () => post(`${sim}/chat/completions`, key, CHAT_BODY),
      service: () => post(`${svc}/v1/chat/completions`, buyer, CHAT_BODY),
    },
    {
      name: "chat_stream",
      stream: "chat",
      direct: () => post(`${sim}/chat/completions`, key, STREAM_BODY, "chat"),
      service: () => post(`${svc}/v1/chat/completions`, buyer, STREAM_BODY, "chat"),
    },
    {
      name: "responses",
      direct: () => post(`${sim}/responses`, key, RESPONSES_BODY),
      service: () => post(`${svc}/v1/responses`, buyer, RESPONSES_BODY),
    },
    {
      name: "responses_stream",
      stream: "responses",
      direct: () => post(`${sim}/responses`, key, RESPONSES_STREAM_BODY, "responses"),
      service: () => post(`${svc}/v1/responses`, buyer, RESPONSES_STREAM_BODY, "responses"),
    },
    {
      name: "image",
      direct: (_lane, i) => post(`${sim}/image/generate`, key, { ...IMAGE_BODY, prompt: `d${i}` }),
      service: (lane, i) => post(`${svc}/v1/image/generate`, imageBuyer(lane), { ...IMAGE_BODY, prompt: `s${i}` }),
    },
    {
      name: "video_queue",
      direct: async () => {
        const t0 = performance.now();
        await post(`${sim}/video/quote`, key, VIDEO_BODY);
        const q = await post(`${sim}/video/queue`, key, VIDEO_BODY);
        return { ...q, totalMs: performance.now() - t0 };
      },
      service: () => post(`${svc}/v1/video/queue`, buyer, VIDEO_BODY),
    },
  ];
}

/** `lanes` workers, lane i sending `perLane` requests one after another (lane = wallet for images). */
async function lanes(n: number, perLane: number, one: (lane: number, i: number) => Promise<Sample>) {
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: n }, async (_, lane) => {
      const xs: Sample[] = [];
      for (let i = 0; i < perLane; i++) xs.push(await one(lane, lane * perLane + i));
      return xs;
    }),
  );
  return { samples: results.flat(), wallMs: performance.now() - t0 };
}

/** A refused or failed request: counted, and left out of the timings. */
const FAILED: Sample = { status: 0, totalMs: Number.NaN, ttfbMs: 0, lastContentMs: 0, usageMs: 0, costMs: 0 };
const ok = (xs: Sample[]) => xs.filter((x) => x.status === 200);

export async function benchModalities(m: Market, emit: Emit): Promise<void> {
  const n = Number(process.env.BENCH_MODALITY_ROUNDS) || 200;
  const concurrency = 16;
  const perLane = Number(process.env.BENCH_MODALITY_PER_LANE) || 40;
  const summary: Record<
    string,
    { addedP50Ms: number; addedP99Ms: number; clearsPerSecond: number; serviceErrors: number }
  > = {};
  // BENCH_MODALITIES=chat,image: a subset, for quick A/B runs
  const only = process.env.BENCH_MODALITIES?.split(",").map((x) => x.trim());
  const chosen = modalities(m).filter((x) => !only || only.includes(x.name));
  for (const mod of chosen) {
    // the service's refusals are figures too (a run goes on and says how many and the first)
    const errors: string[] = [];
    const service = (lane: number, i: number) =>
      mod.service(lane, i).catch((e: unknown) => {
        errors.push(String(e).slice(0, 300));
        return FAILED;
      });
    const targets = { direct: (i: number) => mod.direct(0, i), service: (i: number) => service(0, i) };
    await interleave(40, targets);
    const all = await interleave(n, targets);
    const r = { direct: all.direct, service: ok(all.service) };
    const total = (s: Sample) => s.totalMs;
    const d = p50p99(r.direct, total);
    const s = p50p99(r.service, total);
    // throughput: the service, then the simulator alone at the same concurrency (its ceiling here)
    await lanes(concurrency, 5, service);
    const via = await lanes(concurrency, perLane, service);
    const straight = await lanes(concurrency, perLane, mod.direct);
    const clearsPerSecond = Math.round((ok(via.samples).length / via.wallMs) * 1000);
    const line: Record<string, unknown> = {
      bench: `modality.${mod.name}`,
      rounds: n,
      directP50Ms: ms(d.p50),
      serviceP50Ms: ms(s.p50),
      addedP50Ms: ms(s.p50 - d.p50),
      addedP99Ms: ms(s.p99 - d.p99),
      concurrency,
      clearsPerSecond,
      directPerSecond: Math.round((straight.samples.length / straight.wallMs) * 1000),
      serverTimingP50Ms: serverTimingP50(r.service),
      serviceErrors: errors.length,
      ...(errors.length > 0 ? { firstError: errors[0] } : {}),
    };
    if (mod.stream) {
      const ttfb = (x: Sample) => x.ttfbMs;
      line.addedTtfbP50Ms = ms(p50p99(r.service, ttfb).p50 - p50p99(r.direct, ttfb).p50);
      line.costAfterLastContentP50Ms = ms(p50p99(r.service, (x) => x.costMs - x.lastContentMs).p50);
    }
    emit(line);
    summary[mod.name] = {
      addedP50Ms: ms(s.p50 - d.p50),
      addedP99Ms: ms(s.p99 - d.p99),
      clearsPerSecond,
      serviceErrors: errors.length,
    };
  }
  // a modality counts as measured when every request of it through the service was answered
  const measured = Object.values(summary).filter((x) => x.serviceErrors === 0).length;
  emit(
    targetLine("every_modality", {
      target: chosen.length,
      service: measured,
      floor: null,
      unit: "modalities measured without a refusal",
      higherIsBetter: true,
      modalities: summary,
      method: "added p50/p99 over direct (serial, interleaved) and clears/s at 16 lanes, for each modality",
    }),
  );
}
