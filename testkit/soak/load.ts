import type { PrivateKeyAccount } from "viem/accounts";
import type { PaymentRequirements } from "x402/types";

/**
 * The soak's clients: buyers that use the service the way agents do (x402 signup and refill,
 * buffered and streamed chat and Responses, images, video quote → queue → retrieve, balance
 * reads), spread over every API process, tolerating every error and counting it by status and
 * code. What a client was told it paid (and what it was refused with a support reference) is kept
 * so the books can be checked against it at the end.
 */

/** A paid call waits for settlement on chain: clients give it this long, whatever the load's timeout. */
const PAYMENT_TIMEOUT_MS = 60_000;

export const CHAT_MODEL = "zai-org-glm-5-1";
export const IMAGE_MODEL = "venice-sd35";
export const VIDEO_MODEL = "wan-2.6-text-to-video";

export type Kind =
  | "chat"
  | "chat_stream"
  | "responses"
  | "responses_stream"
  | "image"
  | "video_quote"
  | "video_queue"
  | "video_retrieve"
  | "funding_signup"
  | "funding_refill"
  | "agent_me";

/** Relative weights of the mix (funding_signup happens once per buyer, before the load). */
export const DEFAULT_MIX: Record<Exclude<Kind, "funding_signup">, number> = {
  chat: 28,
  chat_stream: 22,
  responses: 9,
  responses_stream: 8,
  image: 10,
  video_quote: 4,
  video_queue: 3,
  video_retrieve: 10,
  funding_refill: 1.5,
  agent_me: 4.5,
};

export interface Buyer {
  index: number;
  account: PrivateKeyAccount;
  apiKey: string;
  accountId: string;
}

interface VideoJob {
  buyer: Buyer;
  queueId: string;
  outcome: string;
  delivered: boolean;
  retrieves: number;
}

/** Parsed micro-units of a six-decimal string (the service's own rendering). */
export function microOf(decimal: string): bigint {
  const [w = "0", f = ""] = decimal.split(".");
  return BigInt(w) * 1_000_000n + BigInt(`${f}000000`.slice(0, 6));
}

/** Small deterministic PRNG (mulberry32), so a run's mix is reproducible from its seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface LoadOptions {
  /** base URLs of the API processes, by index */
  apis: string[];
  /** requests in the load (not counting signups) */
  requests: number;
  concurrency: number;
  /** a client gives up on an answer after this long (it leaves; the service must let go) */
  clientTimeoutMs: number;
  /** at most this many requests started per second (0 = as fast as the lanes go) */
  maxRps: number;
  /** share of streams that run long (seconds), so some are open whenever an API is killed */
  longStreamShare: number;
  seed: number;
  mix?: Partial<Record<Exclude<Kind, "funding_signup">, number>>;
  /**
   * Each paid buffered request is read back at once by its support reference
   * (`GET /v1/agent/requests/{ref}`) from another API than the one that answered it: with a read
   * replica, the caller's own write must show (read-your-writes across processes).
   */
  readBack?: boolean;
}

type Result = { status: string; latencyMs: number };

export class SoakLoad {
  /** kind → status key → count */
  readonly counts = new Map<Kind, Map<string, number>>();
  readonly latencies = new Map<Kind, number[]>();
  /** what clients were told they paid: support reference → micro-USDC */
  readonly paid = new Map<string, bigint>();
  /** refusals that named a support reference (a non-2xx answer): must not be charged */
  readonly refused = new Set<string>();
  /** streams that ended without the final cost frame (cut, killed, timed out), by reference */
  readonly unfinishedStreams = new Set<string>();
  /** payments the service answered 200 for: transaction → micro-USDC */
  readonly settled = new Map<string, bigint>();
  readonly buyers: Buyer[] = [];
  /**
   * Each 402 insufficient_balance and the buyer's balance read right after it (agent/me): a
   * refusal while the confirmed balance covers the request many times over is what issue 18
   * finding 5 forbids; near exhaustion it is the documented cost of per-process escrow slices.
   */
  readonly balanceRefusals: { kind: Kind; confirmedMicroUsdc: bigint | null; availableMicroUsdc: bigint | null }[] = [];
  readonly openStreams: number[];
  /** read-backs of one's own paid requests (`readBack`): status key → count */
  readonly readBacks = new Map<string, number>();
  /** support references a read-back did not find (404): the caller's own write was not visible */
  readonly readBackMissing: string[] = [];
  /**
   * APIs known to be down (a killed process until it is back), as a load balancer's health check
   * would mark them: new requests go to the others. Requests already on it fail with it.
   */
  readonly down = new Set<number>();
  done = 0;
  private started = 0;
  private readonly videoJobs: VideoJob[] = [];
  private videoCursor = 0;
  private readonly rand: () => number;
  private readonly mix: [Exclude<Kind, "funding_signup">, number][];
  private readonly mixTotal: number;
  private x402: Promise<typeof import("x402/client")> | null = null;

  constructor(private readonly opts: LoadOptions) {
    this.rand = prng(opts.seed);
    this.openStreams = opts.apis.map(() => 0);
    this.mix = Object.entries({ ...DEFAULT_MIX, ...opts.mix }) as [Exclude<Kind, "funding_signup">, number][];
    this.mixTotal = this.mix.reduce((s, [, w]) => s + w, 0);
  }

  private count(kind: Kind, r: Result): void {
    const m = this.counts.get(kind) ?? new Map<string, number>();
    this.counts.set(kind, m);
    m.set(r.status, (m.get(r.status) ?? 0) + 1);
    const l = this.latencies.get(kind) ?? [];
    this.latencies.set(kind, l);
    l.push(r.latencyMs);
  }

  private pick<T>(xs: readonly T[]): T {
    const x = xs[Math.floor(this.rand() * xs.length)];
    if (x === undefined) throw new Error("pick from an empty list");
    return x;
  }

  private int(lo: number, hi: number): number {
    return lo + Math.floor(this.rand() * (hi - lo + 1));
  }

  // ───────────────────────────── funding ─────────────────────────────

  /**
   * A paid x402 call: the challenge (402), then the same call with the buyer's signed authorization.
   * Returns the status key and the 200 body.
   */
  private async pay(
    api: number,
    path: string,
    account: PrivateKeyAccount,
    body: Record<string, unknown>,
    headers: Record<string, string> = {},
  ): Promise<{ status: string; body?: Record<string, unknown> }> {
    const url = `${this.opts.apis[api]}${path}`;
    const init = (extra: Record<string, string>) => ({
      method: "POST",
      headers: { "content-type": "application/json", ...headers, ...extra },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(PAYMENT_TIMEOUT_MS),
    });
    const challenge = await fetch(url, init({}));
    const cbody = (await challenge.json().catch(() => ({}))) as { accepts?: PaymentRequirements[] };
    if (challenge.status !== 402 || !cbody.accepts?.[0]) return { status: statusKey(challenge.status, cbody) };
    this.x402 ??= import("x402/client");
    const { createPaymentHeader } = await this.x402;
    const payment = await createPaymentHeader(account as never, 1, cbody.accepts[0]);
    const res = await fetch(url, init({ "x-payment": payment }));
    const rbody = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (res.status === 200 && typeof rbody.transaction === "string") {
      this.settled.set(rbody.transaction, BigInt(body.amountMicroUsdc as number));
    }
    return { status: statusKey(res.status, rbody), body: rbody };
  }

  /** Signs every buyer up through x402 (spread over the APIs), `concurrency` at a time. */
  async signUp(accounts: PrivateKeyAccount[], amountMicroUsdc: number, concurrency: number): Promise<void> {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < accounts.length) {
          const index = next++;
          const account = accounts[index];
          if (!account) break;
          for (let attempt = 0; attempt < 5; attempt++) {
            const t0 = performance.now();
            const r = await this.pay(index % this.opts.apis.length, "/v1/x402/signup", account, {
              amountMicroUsdc,
              keyName: `soak ${index}`,
            }).catch((e: unknown) => ({ status: netKey(e), body: undefined }));
            this.count("funding_signup", { status: r.status, latencyMs: performance.now() - t0 });
            if (typeof r.body?.apiKey === "string") {
              this.buyers.push({ index, account, apiKey: r.body.apiKey, accountId: String(r.body.accountId) });
              break;
            }
          }
        }
      }),
    );
  }

  // ───────────────────────────── the load ─────────────────────────────

  /** Runs the mix until `requests` have been sent; resolves when every lane is done. */
  async run(): Promise<void> {
    if (this.buyers.length === 0) throw new Error("no buyer signed up");
    const t0 = Date.now();
    await Promise.all(
      Array.from({ length: this.opts.concurrency }, async () => {
        while (this.started < this.opts.requests) {
          const i = this.started++;
          if (this.opts.maxRps > 0) {
            const due = t0 + (i * 1000) / this.opts.maxRps;
            if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
          }
          await this.one();
          this.done++;
        }
      }),
    );
  }

  /** A random API among those not known to be down. */
  private pickApi(): number {
    const up = this.opts.apis.map((_, i) => i).filter((i) => !this.down.has(i));
    return up.length > 0 ? this.pick(up) : Math.floor(this.rand() * this.opts.apis.length);
  }

  private chooseKind(): Exclude<Kind, "funding_signup"> {
    let x = this.rand() * this.mixTotal;
    for (const [k, w] of this.mix) {
      x -= w;
      if (x < 0) return k;
    }
    return "chat";
  }

  private async one(): Promise<void> {
    let kind = this.chooseKind();
    if (kind === "video_retrieve" && this.videoJobs.length === 0) kind = "video_quote";
    const buyer = this.pick(this.buyers);
    const api = this.pickApi();
    const t0 = performance.now();
    let status: string;
    try {
      status = await this.send(kind, buyer, api);
    } catch (e) {
      status = netKey(e);
    }
    this.count(kind, { status, latencyMs: performance.now() - t0 });
    if (status === "402:insufficient_balance") this.balanceRefusals.push({ kind, ...(await this.balanceOf(buyer)) });
  }

  /** The buyer's confirmed and available balance as the service reports it (not counted in the load). */
  private async balanceOf(
    buyer: Buyer,
  ): Promise<{ confirmedMicroUsdc: bigint | null; availableMicroUsdc: bigint | null }> {
    try {
      const res = await fetch(`${this.opts.apis[this.pickApi()]}/v1/agent/me`, {
        headers: { authorization: `Bearer ${buyer.apiKey}` },
        signal: AbortSignal.timeout(10_000),
      });
      const me = (await res.json()) as { confirmedUsdc?: string; availableUsdc?: string };
      return {
        confirmedMicroUsdc: me.confirmedUsdc ? microOf(me.confirmedUsdc) : null,
        availableMicroUsdc: me.availableUsdc ? microOf(me.availableUsdc) : null,
      };
    } catch {
      return { confirmedMicroUsdc: null, availableMicroUsdc: null };
    }
  }

  private async send(kind: Exclude<Kind, "funding_signup">, buyer: Buyer, api: number): Promise<string> {
    const n = this.int(8, 48);
    switch (kind) {
      case "chat":
        return this.buffered(api, buyer, "/v1/chat/completions", {
          model: CHAT_MODEL,
          messages: [{ role: "user", content: `soak chat [[sim:tokens=${n}]]` }],
          max_tokens: 64,
        });
      case "chat_stream":
        return this.streamed(api, buyer, "/v1/chat/completions", {
          model: CHAT_MODEL,
          messages: [{ role: "user", content: `soak stream [[sim:tokens=${n}]] ${this.streamShape()}` }],
          max_tokens: 64,
          stream: true,
        });
      case "responses":
        return this.buffered(api, buyer, "/v1/responses", {
          model: CHAT_MODEL,
          input: `soak responses [[sim:tokens=${n}]]`,
          max_output_tokens: 64,
        });
      case "responses_stream":
        return this.streamed(api, buyer, "/v1/responses", {
          model: CHAT_MODEL,
          input: `soak responses stream [[sim:tokens=${n}]] ${this.streamShape()}`,
          max_output_tokens: 64,
          stream: true,
        });
      case "image":
        return this.buffered(api, buyer, "/v1/image/generate", {
          model: IMAGE_MODEL,
          prompt: `soak image ${this.int(0, 1e6)}`,
          variants: 1,
        });
      case "video_quote": {
        const r = await this.post(api, buyer, "/v1/video/quote", this.videoBody("mp4", 1));
        return statusKey(r.status, await r.json().catch(() => ({})));
      }
      case "video_queue":
        return this.videoQueue(api, buyer);
      case "video_retrieve":
        return this.videoRetrieve(api);
      case "funding_refill": {
        const r = await this.pay(
          api,
          "/v1/x402/refill",
          buyer.account,
          { amountMicroUsdc: 1_000_000 },
          { authorization: `Bearer ${buyer.apiKey}` },
        );
        return r.status;
      }
      case "agent_me": {
        const res = await fetch(`${this.opts.apis[api]}/v1/agent/me`, {
          headers: { authorization: `Bearer ${buyer.apiKey}` },
          signal: AbortSignal.timeout(this.opts.clientTimeoutMs),
        });
        return statusKey(res.status, await res.json().catch(() => ({})));
      }
    }
  }

  /** Stream pacing directives: most streams are short; a share runs for seconds. */
  private streamShape(): string {
    if (this.rand() < this.opts.longStreamShare) return "[[sim:chunks=12]] [[sim:chunk_delay_ms=250]]";
    return `[[sim:chunks=${this.int(3, 8)}]] [[sim:chunk_delay_ms=${this.int(0, 30)}]]`;
  }

  private post(api: number, buyer: Buyer, path: string, body: unknown): Promise<Response> {
    return fetch(`${this.opts.apis[api]}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${buyer.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(this.opts.clientTimeoutMs),
    });
  }

  private async buffered(api: number, buyer: Buyer, path: string, body: unknown): Promise<string> {
    const res = await this.post(api, buyer, path, body);
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    const ref = res.headers.get("x-svc-support-reference");
    if (res.status === 200) {
      const cost = res.headers.get("x-svc-cost-usdc");
      if (ref && cost) this.paid.set(ref, microOf(cost));
      if (ref && this.opts.readBack) await this.readBack(api, buyer, ref);
    } else if (ref) {
      this.refused.add(ref);
    }
    return statusKey(res.status, json);
  }

  /** The buyer reads its request back by support reference from another API (not counted in the load). */
  private async readBack(answeredBy: number, buyer: Buyer, ref: string): Promise<void> {
    const others = this.opts.apis.map((_, i) => i).filter((i) => i !== answeredBy && !this.down.has(i));
    const api = others.length > 0 ? this.pick(others) : answeredBy;
    let status: string;
    try {
      const res = await fetch(`${this.opts.apis[api]}/v1/agent/requests/${ref}`, {
        headers: { authorization: `Bearer ${buyer.apiKey}` },
        signal: AbortSignal.timeout(this.opts.clientTimeoutMs),
      });
      status = statusKey(res.status, await res.json().catch(() => ({})));
      if (res.status === 404) this.readBackMissing.push(ref);
    } catch (e) {
      status = netKey(e);
    }
    this.readBacks.set(status, (this.readBacks.get(status) ?? 0) + 1);
  }

  /**
   * A streamed answer read to its end. Status keys: `200` (cost frame seen), `200:error:<code>`
   * (an in-band error frame), `200:cut` (ended without either), or the error status.
   */
  private async streamed(api: number, buyer: Buyer, path: string, body: unknown): Promise<string> {
    const res = await this.post(api, buyer, path, body);
    const ref = res.headers.get("x-svc-support-reference");
    if (res.status !== 200 || !res.body) {
      if (ref) this.refused.add(ref);
      return statusKey(res.status, await res.json().catch(() => ({})));
    }
    this.openStreams[api] = (this.openStreams[api] ?? 0) + 1;
    let text = "";
    let broke: unknown;
    try {
      const decoder = new TextDecoder();
      const reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    } catch (e) {
      broke = e;
    } finally {
      this.openStreams[api] = (this.openStreams[api] ?? 1) - 1;
    }
    const cost = /"costUsdc":"([\d.]+)"/.exec(text)?.[1];
    const errorCode = /"error":\{[^}]*"code":"([a-z_]+)"/.exec(text)?.[1];
    if (cost && ref) this.paid.set(ref, microOf(cost));
    else if (ref) this.unfinishedStreams.add(ref);
    if (broke) return `200:${netKey(broke)}`;
    if (errorCode) return `200:error:${errorCode}`;
    if (cost) return "200";
    return "200:cut";
  }

  private videoBody(outcome: string, polls: number): Record<string, unknown> {
    return {
      model: VIDEO_MODEL,
      prompt: `soak video [[sim:video=${outcome}]] [[sim:polls=${polls}]]`,
      duration: "5s",
      resolution: "720p",
    };
  }

  private async videoQueue(api: number, buyer: Buyer): Promise<string> {
    const x = this.rand();
    const outcome = x < 0.6 ? "mp4" : x < 0.75 ? "failed" : x < 0.87 ? "content_policy" : "completed_no_media";
    const res = await this.post(api, buyer, "/v1/video/queue", this.videoBody(outcome, this.int(1, 3)));
    const json = (await res.json().catch(() => ({}))) as {
      queue_id?: string;
      svc?: { cost_usdc?: string; support_reference?: string };
    };
    const ref = json.svc?.support_reference ?? res.headers.get("x-svc-support-reference");
    if (res.status === 200 && json.queue_id) {
      if (ref && json.svc?.cost_usdc) this.paid.set(ref, microOf(json.svc.cost_usdc));
      this.videoJobs.push({ buyer, queueId: json.queue_id, outcome, delivered: false, retrieves: 0 });
    } else if (ref) {
      this.refused.add(ref);
    }
    return statusKey(res.status, json);
  }

  /** One retrieve of a queued job (round robin); a job leaves the pool once it answers 410 or 404. */
  private async videoRetrieve(api: number): Promise<string> {
    const i = this.videoCursor++ % this.videoJobs.length;
    const job = this.videoJobs[i];
    if (!job) return "skipped";
    job.retrieves++;
    const res = await this.post(api, job.buyer, "/v1/video/retrieve", { queue_id: job.queueId });
    const type = res.headers.get("content-type") ?? "";
    let status: string;
    if (res.status === 200 && type.startsWith("video/")) {
      await res.arrayBuffer();
      job.delivered = true;
      status = "200:mp4";
    } else {
      const json = (await res.json().catch(() => ({}))) as { status?: string };
      status = res.status === 200 ? `200:${String(json.status ?? "json")}` : statusKey(res.status, json);
    }
    if (res.status === 410 || res.status === 404 || job.retrieves > 20) {
      const at = this.videoJobs.indexOf(job);
      if (at >= 0) this.videoJobs.splice(at, 1);
    }
    return status;
  }

  /** Retrieves every job still in the pool until it is gone or `deadline` (ms since epoch) passes. */
  async drainVideo(deadline: number): Promise<void> {
    while (this.videoJobs.length > 0 && Date.now() < deadline) {
      const t0 = performance.now();
      let status: string;
      try {
        status = await this.videoRetrieve(this.pickApi());
      } catch (e) {
        status = netKey(e);
      }
      this.count("video_retrieve", { status, latencyMs: performance.now() - t0 });
      if (this.videoCursor % Math.max(1, this.videoJobs.length) === 0) await new Promise((r) => setTimeout(r, 500));
    }
  }

  get videoPending(): number {
    return this.videoJobs.length;
  }
}

/** `status` or `status:code` (the service's error code). */
export function statusKey(status: number, body: unknown): string {
  const code = (body as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof code === "string" ? `${status}:${code}` : String(status);
}

/** A transport failure as a status key: `net:<code>` (ECONNREFUSED, UND_ERR_SOCKET, timeout…). */
export function netKey(e: unknown): string {
  const err = e as { name?: string; code?: string; cause?: { code?: string; name?: string } };
  if (err?.name === "TimeoutError" || err?.cause?.name === "TimeoutError") return "net:client_timeout";
  return `net:${err?.cause?.code ?? err?.code ?? err?.cause?.name ?? err?.name ?? "error"}`;
}
