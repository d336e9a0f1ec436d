// The simulated world (docs/decisions.md "Seeded money simulation (issue 38)"): one MemoryMarket
// (testkit/memory-stores.ts) shared by router processes, each a real InferencePipeline over the
// market's stores, all on one manual clock; the actors (buyers with key trees, suppliers with
// offers) and what the simulation itself knows (funding, sessions in flight, video jobs).
import { createPubSub } from "graphql-yoga";
import type { EventBus, Topics } from "../../src/adapters/pubsub.js";
import { redisKeys } from "../../src/adapters/redis/keys.js";
import { type Config, LOCAL_KEY_ENCRYPTION_KEY, loadConfig } from "../../src/config.js";
import { InferencePipeline } from "../../src/domain/inference/pipeline.js";
import type { AttemptingSession, KeyRules, RoutableModel } from "../../src/domain/inference/session.js";
import type { InferenceStores } from "../../src/domain/inference/stores.js";
import type { LimitReset } from "../../src/domain/keys/key-period.js";
import { DomainError } from "../../src/lib/errors.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import { manualClock, TEXT_MODEL } from "../memory-pipeline.js";
import { MemoryGates, MemoryMarket, type PlantedDefect } from "../memory-stores.js";
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

/** A router process: a pipeline over the market's stores, cut off from them once it died. */
export interface SimProcess {
  label: string;
  pipeline: InferencePipeline;
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

export class SimWorld {
  readonly clock = manualClock();
  readonly secrets = new SecretBox(Buffer.from(LOCAL_KEY_ENCRYPTION_KEY, "hex"));
  readonly market = new MemoryMarket(this.secrets, () => this.clock.now());
  readonly config: Config;
  readonly procs: SimProcess[] = [];
  readonly buyers: SimBuyer[] = [];
  readonly suppliers: SimSupplier[] = [];
  readonly inflight: InFlight[] = [];
  /** account → what the simulation deposited (the funding side's credits) */
  readonly funded = new Map<string, bigint>();
  /** id → label, for the trace */
  readonly labels = new Map<string, string>();
  readonly trace: string[] = [];
  /** upstream keys whose balance the pipeline asked to refresh after a 402 */
  readonly refresh: string[] = [];
  step = 0;
  private ids = 0;
  private procCount = 0;

  constructor(
    readonly prng: Prng,
    defects: readonly PlantedDefect[] = [],
  ) {
    const r = loadConfig(
      { ESCROW_LINGER_MS: "0", PLATFORM_FEE_BPS: String(FEE_BPS), LOG_LEVEL: "silent" },
      { mode: "local", redisPrefix: "sim" },
    );
    if (!r.ok) throw new Error(r.errors.join("\n"));
    this.config = r.config;
    for (const d of defects) this.market.defects.add(d);
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

  /** A router process: its own gates and event bus, the market's stores behind a switch that its death turns off. */
  startProcess(): SimProcess {
    const label = `p${++this.procCount}`;
    const proc = { label, dead: false, stalledUntil: 0 } as SimProcess;
    const gates = new MemoryGates();
    const bus = createPubSub<Topics>() as EventBus;
    const models = new Map(MODELS.map((m) => [m.id, m]));
    proc.pipeline = new InferencePipeline({
      stores: severable(this.market.stores, proc),
      config: this.config,
      clock: this.clock,
      bus,
      gates,
      keys: redisKeys("sim"),
      secrets: this.secrets,
      keyHealth: severablePort(this.market.keyHealth, proc),
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
}

/** The stores as one process sees them: every call fails once the process is dead. */
function severable(stores: InferenceStores, proc: SimProcess): InferenceStores {
  return {
    offers: severablePort(stores.offers, proc),
    ceilings: severablePort(stores.ceilings, proc),
    escrow: severablePort(stores.escrow, proc),
    settlement: severablePort(stores.settlement, proc),
    budgets: severablePort(stores.budgets, proc),
  };
}

function severablePort<T extends object>(port: T, proc: SimProcess): T {
  const out: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(port)) {
    out[name] = async (...args: unknown[]) => {
      if (proc.dead) throw new Error(`${proc.label} is dead`);
      return (fn as (...a: unknown[]) => Promise<unknown>)(...args);
    };
  }
  return out as T;
}
