import type { Db } from "../../adapters/db.js";
import type { UpstreamClient, UpstreamModelType } from "../../adapters/upstream/client.js";
import type { Config } from "../../config.js";
import { bareModelId } from "../../contract/model-id.js";
import { type CatalogModel, Prisma } from "../../generated/prisma/client.js";
import type { Clock } from "../../lib/clock.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { SecretBox } from "../../lib/secret-box.js";
import { SharedCalls } from "../../lib/shared-calls.js";
import { type NormalizedModel, normalizeUpstreamModel, regionRestrictionsOf } from "./catalog-normalize.js";
import {
  type ModelBurn,
  type ModelDayBurn,
  rankModels,
  STATS_MIN_BUYERS,
  STATS_MIN_CLEARS,
  STATS_WINDOW_MS,
  utcDaysBetween,
} from "./catalog-stats.js";
import type {
  CatalogModality,
  CatalogModelRow,
  CatalogSyncResult,
  ExtendedRatesMicro,
  JsonObject,
  ModelStats,
  StatsWindow,
} from "./catalog-types.js";
import { moreBuyers, readModelWindow } from "./model-window.js";

export interface CatalogDeps {
  db: Db;
  config: Config;
  clock: Clock;
  upstream: UpstreamClient;
  secrets: SecretBox;
}

/** SPEC naming (`svc/` prefixes): the contract's rule, here for the domain's callers. */
export { bareModelId, SVC_MODEL_PREFIX } from "../../contract/model-id.js";

/** The upstream lists a sync reads (one per modality). */
export const SYNCED_MODEL_TYPES: readonly (UpstreamModelType & CatalogModality)[] = ["text", "image", "video"];

/** How many active supplier keys a sync tries to decrypt before reading the catalog anonymously. */
const MAX_KEYS_TRIED = 20;

const notFound = (id: string) =>
  new DomainError("model_not_found", `Model ${id} not found. Use a live id from GET /v1/models.`, { model: id });

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `extended_pricing` JSON: integer rates stored as decimal strings (exact, whatever their size). */
function extendedToJson(e: ExtendedRatesMicro | null): Prisma.InputJsonObject | typeof Prisma.DbNull {
  if (!e) return Prisma.DbNull;
  return {
    thresholdTokens: e.thresholdTokens,
    inputMicroPerM: e.inputMicroPerM.toString(),
    outputMicroPerM: e.outputMicroPerM.toString(),
    cacheMicroPerM: e.cacheMicroPerM === null ? null : e.cacheMicroPerM.toString(),
    cacheWriteMicroPerM: e.cacheWriteMicroPerM === null ? null : e.cacheWriteMicroPerM.toString(),
  };
}

function bigOrNull(v: unknown): bigint | null {
  return typeof v === "string" && /^\d+$/.test(v) ? BigInt(v) : null;
}

function extendedFromJson(v: unknown): ExtendedRatesMicro | null {
  if (!isObject(v)) return null;
  const input = bigOrNull(v.inputMicroPerM);
  const output = bigOrNull(v.outputMicroPerM);
  if (typeof v.thresholdTokens !== "number" || input === null || output === null) return null;
  return {
    thresholdTokens: v.thresholdTokens,
    inputMicroPerM: input,
    outputMicroPerM: output,
    cacheMicroPerM: bigOrNull(v.cacheMicroPerM),
    cacheWriteMicroPerM: bigOrNull(v.cacheWriteMicroPerM),
  };
}

function toRow(m: CatalogModel): CatalogModelRow {
  const upstream = isObject(m.upstreamRow) ? m.upstreamRow : {};
  return {
    id: m.id,
    modality: m.modality,
    status: m.status,
    name: m.name,
    tier: m.tier,
    beta: m.beta,
    offline: m.offline,
    capabilities: isObject(m.capabilities) ? m.capabilities : {},
    pricing: isObject(m.pricing) ? m.pricing : null,
    constraints: isObject(m.constraints) ? m.constraints : null,
    inputMicroPerM: m.inputMicroPerM,
    outputMicroPerM: m.outputMicroPerM,
    cacheMicroPerM: m.cacheMicroPerM,
    cacheWriteMicroPerM: m.cacheWriteMicroPerM,
    extendedPricing: extendedFromJson(m.extendedPricing),
    contextTokens: m.contextTokens,
    maxCompletionTokens: m.maxCompletionTokens,
    created: typeof upstream.created === "number" && Number.isSafeInteger(upstream.created) ? upstream.created : null,
    regionRestrictions: regionRestrictionsOf(upstream),
    syncedAt: m.syncedAt,
  };
}

const json = (o: JsonObject) => o as Prisma.InputJsonObject;
const jsonOrNull = (o: JsonObject | null) => (o === null ? Prisma.DbNull : json(o));

function columnsOf(m: NormalizedModel, now: Date) {
  return {
    modality: m.modality,
    status: m.status,
    name: m.name,
    tier: m.tier,
    listed: true,
    offline: m.offline,
    beta: m.beta,
    capabilities: json(m.capabilities),
    pricing: jsonOrNull(m.pricing),
    constraints: jsonOrNull(m.constraints),
    inputMicroPerM: m.inputMicroPerM,
    outputMicroPerM: m.outputMicroPerM,
    cacheMicroPerM: m.cacheMicroPerM,
    cacheWriteMicroPerM: m.cacheWriteMicroPerM,
    extendedPricing: extendedToJson(m.extendedPricing),
    contextTokens: m.contextTokens,
    maxCompletionTokens: m.maxCompletionTokens,
    upstreamRow: json(m.upstreamRow),
    syncedAt: now,
  };
}

/** Catalog sync, model rows and model statistics. */
export class CatalogService {
  private readonly statsCalls = new SharedCalls<ModelStats>();

  constructor(protected readonly deps: CatalogDeps) {}

  /**
   * Worker `sync-catalog`: reads `GET /models?type=text|image|video` and upserts one row per model
   * (status, tier, integer rates, public pricing and constraints: catalog-normalize.ts). Rows the
   * upstream no longer lists become `listed = false`; the operator's `disabled` flag is kept.
   * Idempotent: a second run with the same upstream data changes nothing but `syncedAt`.
   * Reads with CATALOG_SYNC_KEY, else the first active supplier key that decrypts, else anonymously.
   * Writes nothing unless all three lists were read.
   * @throws upstream_error when a list cannot be read or the whole catalog comes back empty
   */
  async sync(): Promise<CatalogSyncResult> {
    const { db, upstream, clock } = this.deps;
    const apiKey = await this.catalogKey();
    const lists = await Promise.all(
      SYNCED_MODEL_TYPES.map(async (type) => ({ type, result: await upstream.listModels(type, apiKey) })),
    );
    const byId = new Map<string, NormalizedModel>();
    for (const { type, result } of lists) {
      if (!result.ok) {
        throw new DomainError(
          "upstream_error",
          `Catalog sync: GET /models?type=${type} failed (${result.failure.kind}: ${result.failure.message}).`,
        );
      }
      for (const row of result.value) {
        // a row filed under another family (e.g. a pseudo-type) is read from its own list
        if (typeof row.type === "string" && row.type !== type) continue;
        if (!byId.has(row.id)) byId.set(row.id, normalizeUpstreamModel(row, type));
      }
    }
    if (byId.size === 0) {
      throw new DomainError("upstream_error", "Catalog sync: the upstream listed no models; nothing was unlisted.");
    }
    const now = clock.now();
    const models = [...byId.values()];
    const results = await db.$transaction([
      ...models.map((m) =>
        db.catalogModel.upsert({
          where: { id: m.id },
          create: { id: m.id, ...columnsOf(m, now) },
          update: columnsOf(m, now),
          select: { id: true },
        }),
      ),
      db.catalogModel.updateMany({
        where: { listed: true, id: { notIn: models.map((m) => m.id) } },
        data: { listed: false, syncedAt: now },
      }),
    ]);
    const unlisted = results[results.length - 1] as Prisma.BatchPayload;
    for (const m of models) {
      if (m.status !== "live") logger.debug({ model: m.id, reasons: m.notLiveReasons }, "catalog: coming_soon");
    }
    return {
      upserted: models.length,
      unlisted: unlisted.count,
      live: models.filter((m) => m.status === "live").length,
      comingSoon: models.filter((m) => m.status === "coming_soon").length,
    };
  }

  /** The public catalog: listed, not disabled, live and coming_soon rows (text, image, video; then by id). */
  async listModels(): Promise<CatalogModelRow[]> {
    const rows = await this.deps.db.catalogModel.findMany({
      where: { listed: true, disabled: false },
      orderBy: [{ modality: "asc" }, { id: "asc" }],
    });
    return rows.map(toRow);
  }

  /**
   * Which of these bare ids are catalog rows: listed and not disabled, whatever their status (the
   * rows GET /v1/models/{id} answers). One read. A key's `models` may name only these.
   */
  async listedIds(bareIds: readonly string[]): Promise<Set<string>> {
    if (bareIds.length === 0) return new Set();
    const rows = await this.deps.db.catalogModel.findMany({
      where: { id: { in: [...bareIds] }, listed: true, disabled: false },
      select: { id: true },
    });
    return new Set(rows.map((r) => r.id));
  }

  /**
   * One catalog row by bare or `svc/`-prefixed id, whatever its status (the caller checks `live`),
   * with the integer rates metering uses (see `textPricingOf`).
   * @throws model_not_found when unknown, disabled or unlisted
   */
  async getModel(id: string): Promise<CatalogModelRow> {
    const bare = bareModelId(id.trim());
    if (bare.length === 0) throw notFound(id);
    const m = await this.deps.db.catalogModel.findUnique({ where: { id: bare } });
    if (!m || m.disabled || !m.listed) throw notFound(bare);
    return toRow(m);
  }

  /**
   * The row inference may call: listed, live and of the route's modality (SPEC 10: image and
   * video models cannot be called through chat).
   * @throws model_not_found, model_not_live (400), unsupported_modality (400)
   */
  async requireLiveModel(id: string, modality: CatalogModality): Promise<CatalogModelRow> {
    const row = await this.getModel(id);
    if (row.modality !== modality) {
      throw new DomainError(
        "unsupported_modality",
        `Model ${row.id} is a ${row.modality} model; this route serves ${modality} models.`,
        { model: row.id },
      );
    }
    if (row.status !== "live") {
      throw new DomainError("model_not_live", `Model ${row.id} is coming soon and not callable yet.`, {
        model: row.id,
      });
    }
    return row;
  }

  /**
   * Public usage statistics over unrefunded clears in the rolling window ending now, aggregated in
   * SQL: rank and share of burn per model, and per UTC day the model's share of that day's burn.
   * Models hidden by an operator (`disabled`) are left out. Below the privacy threshold (fewer than
   * STATS_MIN_CLEARS clears or STATS_MIN_BUYERS distinct buyers) `models` is empty. Never returns
   * counts, tokens, wallets, keys or ids. Reads only. Public: it reads the market's hour rows and the
   * window's two partial hours (model-window.ts), and callers at once for one window share one
   * computation.
   */
  modelStats(window: StatsWindow): Promise<ModelStats> {
    return this.statsCalls.run(window, () => this.computeModelStats(window));
  }

  private async computeModelStats(window: StatsWindow): Promise<ModelStats> {
    const { db, clock } = this.deps;
    const now = clock.now();
    const from = new Date(now.getTime() - STATS_WINDOW_MS[window]);
    const read = await readModelWindow(db, from, now);
    const clears = read.days.reduce((n, d) => n + d.clears, 0n);
    const sufficient =
      clears >= BigInt(STATS_MIN_CLEARS) &&
      (read.buyers.length >= STATS_MIN_BUYERS ||
        (await moreBuyers(db, from, now, read.buyers, STATS_MIN_BUYERS)).length >= STATS_MIN_BUYERS);
    if (!sufficient) return { window, generatedAt: now, hasSufficientVolume: false, models: [] };

    const totals = new Map<string, ModelBurn>();
    const perDay: ModelDayBurn[] = [];
    for (const r of read.days) {
      perDay.push({ model: r.model, day: r.day, burnMicroDiem: r.burn });
      const t = totals.get(r.model);
      if (t) t.burnMicroDiem += r.burn;
      else totals.set(r.model, { model: r.model, modality: r.modality, burnMicroDiem: r.burn });
    }
    return {
      window,
      generatedAt: now,
      hasSufficientVolume: true,
      models: rankModels([...totals.values()], perDay, utcDaysBetween(from, now)),
    };
  }

  /** CATALOG_SYNC_KEY, else the first active registered supplier key that decrypts, else none. */
  private async catalogKey(): Promise<string | undefined> {
    const { config, db, secrets } = this.deps;
    if (config.upstream.catalogSyncKey) return config.upstream.catalogSyncKey;
    const keys = await db.upstreamKey.findMany({
      where: { status: "active", revokedAt: null },
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      take: MAX_KEYS_TRIED,
      select: {
        id: true,
        accountId: true,
        secretCiphertext: true,
        secretIv: true,
        secretTag: true,
        encryptionKeyId: true,
      },
    });
    for (const k of keys) {
      try {
        // sealed with AAD = the owning account id (supply registration)
        return secrets.open(
          { ciphertext: k.secretCiphertext, iv: k.secretIv, tag: k.secretTag, keyId: k.encryptionKeyId },
          k.accountId,
        );
      } catch {
        logger.warn({ upstreamKeyId: k.id }, "catalog sync: an upstream key could not be decrypted; trying the next");
      }
    }
    return undefined;
  }
}
