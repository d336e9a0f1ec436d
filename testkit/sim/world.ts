// The simulated world (docs/decisions.md "Seeded money simulation (issue 38)", "The simulation runs
// the SQL"): one market database (testkit/market-db.ts: the stored functions decide every rule)
// shared by router processes, each a real InferencePipeline over the project's SQL stores on a
// connection pool of its own, all on one manual clock; the actors (buyers with key trees, suppliers
// with offers) and what the simulation itself knows (funding, sessions in flight).
import { createPubSub } from "graphql-yoga";
import type { EventBus, Topics } from "../../src/adapters/pubsub.js";
import { redisKeys } from "../../src/adapters/redis/keys.js";
import type { Sql } from "../../src/adapters/sql.js";
import { type Config, loadConfig } from "../../src/config.js";
import { InferencePipeline } from "../../src/domain/inference/pipeline/pipeline.js";
import type { AttemptingSession, KeyRules, RoutableModel } from "../../src/domain/inference/pipeline/session.js";
import type { InferenceStores } from "../../src/domain/inference/settlement/stores.js";
import type { LimitReset } from "../../src/domain/keys/key-period.js";
import { DomainError } from "../../src/lib/errors.js";
import { MarketDb } from "../market-db.js";
import { localSecrets, type ManualClock, manualClock, TEXT_MODEL } from "../market-pipeline.js";
import { MemoryGates } from "../memory-gates.js";
import { type PlantedDefect, plantSql, plantWrappers } from "./plants.js";
import type { Prng } from "./prng.js";

/** A live video model priced per job (a flat quote, `flatJobPricer`), its share held until the job is final. */
export const VIDEO_MODEL: RoutableModel = Object.freeze({
  id: "mem-video",
  modality: "video",
  status: "live",
  tier: "frontier",
  pricing: { inputMicroPerM: 0n, outputMicroPerM: 0n, cacheMicroPerM: null, extended: null },
  imagePricing: null,
  constraints: null,
  maxCompletionTokens: null,
});

export const MODELS: readonly RoutableModel[] = [TEXT_MODEL, VIDEO_MODEL];

/** An API key of the simulation: its place in its account's key tree and its policy (fixed at creation). */
export interface SimKey {
  id: string;
  label: string;
  accountId: string;
  parent: SimKey | null;
  limitMicroUsdc: bigint | null;
  reset: LimitReset;
  maxPriceCents: number | null;
  /** the models it may call ([]: whatever its parent may) */
  models: string[];
  revoked: boolean;
}

export interface SimBuyer {
  accountId: string;
  label: string;
  keys: SimKey[];
}

export interface SimSupplier {
  accountId: string;
  label: string;
  offers: string[];
}

/** A router process: a pipeline over the SQL stores on its own pool, cut off from them once it died. */
export interface SimProcess {
  label: string;
  pipeline: InferencePipeline;
  /** its connections to the database (one: its statements reach Postgres in the order it sends them) */
  pool: Sql;
  dead: boolean;
  /** a process that stopped heartbeating (a long GC pause, a frozen VM) until the clock passes this */
  stalledUntil: number;
}

/** A request admitted and not yet ended. */
export interface InFlight {
  label: string;
  session: AttemptingSession;
  proc: SimProcess;
  key: SimKey;
  video: boolean;
}

export interface SimOptions {
  seed: number;
  steps: number;
  defects?: readonly PlantedDefect[];
}

const FEE_BPS = 1000;

/** The market database of a simulation run: cloned from the template, with `defects` planted in it. */
export async function openSimMarket(defects: readonly PlantedDefect[] = []): Promise<SimMarket> {
  const market = await MarketDb.open({
    secrets: localSecrets(),
    clock: manualClock(),
    setup: (sql) => plantSql(sql, defects),
    wrap: plantWrappers(defects),
  });
  return Object.assign(market, { defects: [...defects].sort() });
}

/** A market database with the defects planted in it (seeds of a run share it, emptied between them). */
export type SimMarket = MarketDb & { readonly defects: readonly PlantedDefect[] };

export class SimWorld {
  readonly clock: ManualClock;
  readonly config: Config;
  readonly procs: SimProcess[] = [];
  readonly buyers: SimBuyer[] = [];
  readonly suppliers: SimSupplier[] = [];
  /** every offer's id, in the order it was posted */
  readonly offers: string[] = [];
  readonly inflight: InFlight[] = [];
  /** account → what the simulation deposited (the funding side's credits) */
  readonly funded = new Map<string, bigint>();
  /** id → label, for the trace */
  readonly labels = new Map<string, string>();
  readonly trace: string[] = [];
  /** upstream keys whose balance the pipeline asked to refresh after a 402 */
  readonly refresh: string[] = [];
  step = 0;
  /** store calls of the processes not answered yet (see `quiet`) */
  private pending = 0;
  private ids = 0;
  private procCount = 0;

  constructor(
    readonly prng: Prng,
    readonly market: SimMarket,
  ) {
    this.clock = market.clock;
    const r = loadConfig(
      { ESCROW_LINGER_MS: "0", PLATFORM_FEE_BPS: String(FEE_BPS), LOG_LEVEL: "silent" },
      { mode: "local", redisPrefix: "sim" },
    );
    if (!r.ok) throw new Error(r.errors.join("\n"));
    this.config = r.config;
  }

  /** A deterministic uuid-shaped id (the market's rows; the pipeline's own ids are its own). */
  id(label: string): string {
    const id = `00000000-0000-4000-8000-${(++this.ids).toString(16).padStart(12, "0")}`;
    this.labels.set(id, label);
    return id;
  }

  label(id: string | null | undefined): string {
    return id ? (this.labels.get(id) ?? id.slice(0, 8)) : "-";
  }

  log(line: string): void {
    this.trace.push(`#${this.step} ${line}`);
  }

  /** A router process: its own pool, gates and event bus; the stores behind a switch that its death turns off. */
  startProcess(): SimProcess {
    const label = `p${++this.procCount}`;
    const pool = this.market.pool(1);
    const proc = { label, dead: false, stalledUntil: 0, pool } as SimProcess;
    const gates = new MemoryGates();
    const bus = createPubSub<Topics>() as EventBus;
    const models = new Map(MODELS.map((m) => [m.id, m]));
    proc.pipeline = new InferencePipeline({
      stores: this.severable(this.market.stores(pool), proc),
      config: this.config,
      clock: this.clock,
      bus,
      gates,
      keys: redisKeys("sim"),
      secrets: this.market.secrets,
      keyHealth: this.severablePort(this.market.keyHealth, proc),
      resolveModel: async (id) => {
        const m = models.get(id);
        if (!m) throw new DomainError("model_not_found", `Unknown model ${id}.`);
        return m;
      },
      onKeyExhausted: async (id) => {
        this.refresh.push(id);
      },
    });
    this.procs.push(proc);
    return proc;
  }

  /** A process dies: every call it makes is refused from now on, and its connections are gone. */
  async kill(proc: SimProcess): Promise<void> {
    proc.dead = true;
    await proc.pool.end().catch(() => undefined);
  }

  live(): SimProcess[] {
    return this.procs.filter((p) => !p.dead);
  }

  /** The rules the pipeline enforces for a key (what src/domain/keys/key-chain.ts derives from its chain). */
  rules(key: SimKey): KeyRules {
    const chain: SimKey[] = [];
    for (let k: SimKey | null = key; k; k = k.parent) chain.push(k);
    const ceilings = chain.map((k) => k.maxPriceCents).filter((c): c is number => c !== null);
    const models = chain.find((k) => k.models.length > 0)?.models ?? [];
    return {
      budgeted: chain.some((k) => k.limitMicroUsdc !== null),
      maxPriceCents: ceilings.length > 0 ? Math.min(...ceilings) : null,
      models,
    };
  }

  /** Every live process reads the offer book again (a supply change, as `supply_changed` tells them). */
  supplyChanged(): void {
    for (const p of this.live()) p.pipeline.invalidateBook();
  }

  /**
   * Waits until no process has a store call in flight and nothing it scheduled is still to run (a
   * few turns of the event loop with none): work a step started in the background (an offer book
   * read, a give-back) is done before the next step, so the next step starts from the same rows
   * whatever the machine's speed.
   */
  async quiet(): Promise<void> {
    for (let idle = 0; idle < 3; ) {
      await new Promise((r) => setImmediate(r));
      idle = this.pending === 0 ? idle + 1 : 0;
    }
  }

  /** The stores as one process sees them: every call fails once the process is dead. */
  private severable(stores: InferenceStores, proc: SimProcess): InferenceStores {
    return {
      offers: this.severablePort(stores.offers, proc),
      ceilings: this.severablePort(stores.ceilings, proc),
      escrow: this.severablePort(stores.escrow, proc),
      settlement: this.severablePort(stores.settlement, proc),
      budgets: this.severablePort(stores.budgets, proc),
    };
  }

  private severablePort<T extends object>(port: T, proc: SimProcess): T {
    const out: Record<string, unknown> = {};
    const impl = port as Record<string, unknown>;
    const names = new Set([...Object.keys(impl), ...methodsOf(port)]);
    for (const name of names) {
      const fn = impl[name];
      if (typeof fn !== "function") continue;
      out[name] = async (...args: unknown[]) => {
        if (proc.dead) throw new Error(`${proc.label} is dead`);
        this.pending++;
        try {
          return await (fn as (...a: unknown[]) => Promise<unknown>).apply(port, args);
        } finally {
          this.pending--;
        }
      };
    }
    return out as T;
  }
}

/** The methods of a class instance (KeyHealth's are on its prototype). */
function methodsOf(o: object): string[] {
  const proto = Object.getPrototypeOf(o) as object | null;
  if (!proto || proto === Object.prototype) return [];
  return Object.getOwnPropertyNames(proto).filter((n) => n !== "constructor");
}
