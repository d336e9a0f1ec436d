import type { AccountSummary, HistoryRow, Savings } from "../domain/accounts/account-types.js";
import type { CatalogModelRow, ModelStats } from "../domain/catalog/catalog-types.js";
import { publishedFields } from "../domain/catalog/catalog-visibility.js";
import type { QueuedVideo } from "../domain/inference/modalities/video/video-queue.js";
import type { VideoQuote } from "../domain/inference/modalities/video/video-quote.js";
import type { ApiKeyView } from "../domain/keys/api-key-service.js";
import type { VideoJobStatusReport } from "../domain/video/video-jobs.js";
import { toCsv } from "../lib/csv.js";
import { formatDecimal6 } from "../lib/money.js";

/**
 * REST output shapes. Amounts the spec calls USDC/DIEM amounts are six-decimal strings
 * ("1.250000"); money never leaves as a JSON number.
 */
const usdc = formatDecimal6;
const orNull = <T, R>(v: T | null | undefined, f: (x: T) => R): R | null =>
  v === null || v === undefined ? null : f(v);

export function presentAccount(a: AccountSummary) {
  return {
    accountId: a.accountId,
    walletAddress: a.walletAddress,
    authProvider: a.authProvider,
    maxPriceCentsPerDollar: a.maxPriceCentsPerDollar,
    confirmedUsdc: usdc(a.balances.confirmedMicroUsdc),
    pendingUsdc: usdc(a.balances.pendingMicroUsdc),
    reservedUsdc: usdc(a.balances.reservedMicroUsdc),
    availableUsdc: usdc(a.balances.availableMicroUsdc),
    supplierPayableUsdc: usdc(a.balances.supplierPayableMicroUsdc),
    hasEverFunded: a.hasEverFunded,
    firstFundedAt: a.firstFundedAt?.toISOString() ?? null,
    createdAt: a.createdAt.toISOString(),
    recentLedger: a.recentLedger.map((l) => ({
      id: l.id,
      kind: l.kind,
      book: l.book,
      amountUsdc: usdc(l.amountMicroUsdc),
      transactionId: l.transactionId,
      transactionKind: l.transactionKind,
      createdAt: l.createdAt.toISOString(),
    })),
  };
}

export function presentHistoryRow(r: HistoryRow) {
  return {
    requestId: r.requestId,
    supportReference: r.supportReference,
    keyId: r.keyId,
    keyName: r.keyName,
    route: r.route,
    modality: r.modality,
    model: r.model,
    stream: r.stream,
    status: r.status,
    errorCode: r.errorCode,
    maxPriceCents: r.maxPriceCents,
    clearingPriceCents: r.clearingPriceCents,
    costUsdc: orNull(r.costMicroUsdc, usdc),
    burnDiem: orNull(r.burnMicroDiem, formatDecimal6),
    usage: {
      promptTokens: r.promptTokens,
      completionTokens: r.completionTokens,
      cachedTokens: r.cachedTokens,
      cacheWriteTokens: r.cacheWriteTokens,
    },
    attempts: r.attempts,
    timings: {
      startedAt: r.startedAt.toISOString(),
      firstByteAt: r.firstByteAt?.toISOString() ?? null,
      completedAt: r.completedAt?.toISOString() ?? null,
      durationMs: r.completedAt ? r.completedAt.getTime() - r.startedAt.getTime() : null,
    },
  };
}

export function presentSavings(s: Savings) {
  return {
    clears: s.clears,
    faceValueUsdc: usdc(s.faceMicroUsdc),
    atCeilingUsdc: usdc(s.atCeilingMicroUsdc),
    paidUsdc: usdc(s.paidMicroUsdc),
    savedVsFaceUsdc: usdc(s.savedVsFaceMicroUsdc),
    savedVsCeilingUsdc: usdc(s.savedVsCeilingMicroUsdc),
  };
}

/**
 * The buyer history as CSV (`?format=csv`): a header row, then one row per request. Amounts are
 * six-decimal strings as in JSON; empty cells for what a request does not have (no charge, no key).
 */
export const HISTORY_CSV_HEADER = [
  "time",
  "key_name",
  "model",
  "modality",
  "status",
  "cost_usdc",
  "clearing_price_cents",
  "burn_diem",
  "support_reference",
] as const;

export function presentHistoryCsv(rows: readonly HistoryRow[]): string {
  return toCsv([
    HISTORY_CSV_HEADER,
    ...rows.map((r) => [
      r.startedAt.toISOString(),
      r.keyName,
      r.model,
      r.modality,
      r.status,
      orNull(r.costMicroUsdc, usdc),
      r.clearingPriceCents,
      orNull(r.burnMicroDiem, formatDecimal6),
      r.supportReference,
    ]),
  ]);
}

/** A key as every listing shows it (REST, MCP): metadata, policy, this period's usage. */
export function presentKey(k: ApiKeyView) {
  const { policy, usage } = k;
  return {
    id: k.id,
    name: k.name,
    keyPrefix: k.keyPrefix,
    source: k.source,
    createdAt: k.createdAt.toISOString(),
    lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
    scopes: k.scopes,
    parentId: k.parentId,
    limitUsdc: orNull(policy.limitMicroUsdc, usdc),
    limitReset: policy.limitReset,
    maxPriceCentsPerDollar: policy.maxPriceCentsPerDollar,
    models: policy.models.length > 0 ? policy.models : null,
    expiresAt: policy.expiresAt?.toISOString() ?? null,
    spentUsdc: usdc(usage.spentMicroUsdc),
    remainingUsdc: orNull(usage.remainingMicroUsdc, usdc),
    resetsAt: usage.resetsAt?.toISOString() ?? null,
  };
}

/**
 * The public catalog row (SPEC "Catalog model row"): `pricing` and `constraints` as the visibility
 * rule shows them (catalog-visibility.ts), left out when hidden; `id` is always the bare slug.
 */
export function presentModel(row: CatalogModelRow) {
  const { pricing, constraints } = publishedFields(row);
  return {
    id: row.id,
    object: "model" as const,
    status: row.status,
    modality: row.modality,
    capabilities: row.capabilities,
    ...(pricing ? { pricing } : {}),
    ...(constraints ? { constraints } : {}),
    name: row.name,
    tier: row.tier,
    ...(row.created !== null ? { created: row.created } : {}),
    ...(row.regionRestrictions !== null ? { regionRestrictions: row.regionRestrictions } : {}),
  };
}

export function presentModelStats(s: ModelStats) {
  return {
    window: s.window,
    generatedAt: s.generatedAt.toISOString(),
    hasSufficientVolume: s.hasSufficientVolume,
    models: s.models.map((m) => ({
      id: m.id,
      modality: m.modality,
      rank: m.rank,
      usageShare: m.usageShare,
      daily: m.daily.map((d) => ({ day: d.day, share: d.share })),
    })),
  };
}

export const STATUS_OK = { status: "ok" } as const;

/** `GET /v1/agent/me` (and the MCP tool agent_me): wallet, balances, ceiling, confirmation depth. */
export function presentAgentMe(a: AccountSummary, confirmationBlocks: number) {
  return {
    accountId: a.accountId,
    walletAddress: a.walletAddress,
    confirmedUsdc: formatDecimal6(a.balances.confirmedMicroUsdc),
    pendingUsdc: formatDecimal6(a.balances.pendingMicroUsdc),
    availableUsdc: formatDecimal6(a.balances.availableMicroUsdc),
    maxPriceCentsPerDollar: a.maxPriceCentsPerDollar,
    confirmationBlocks,
    hasEverFunded: a.hasEverFunded,
    firstFundedAt: a.firstFundedAt?.toISOString() ?? null,
  };
}

/** SPEC "Video quote" (REST and the MCP tool video_quote): snake_case, six-decimal strings, `svc` repeats cost and price. */
export function presentVideoQuote(q: VideoQuote) {
  return {
    model: q.model,
    quote_diem: formatDecimal6(q.quoteMicroDiem),
    estimated_usdc: formatDecimal6(q.estimatedMicroUsdc),
    max_price_cents: q.maxPriceCents,
    max_eligible_offer_diem: formatDecimal6(q.maxEligibleOfferMicroDiem),
    eligible_routable_diem: formatDecimal6(q.eligibleRoutableMicroDiem),
    clears_now: q.clearsNow,
    svc: {
      cost_usdc: formatDecimal6(q.estimatedMicroUsdc),
      clearing_price_cents: q.clearingPriceCents,
      upstream_quote_diem: formatDecimal6(q.upstreamQuoteMicroDiem),
      markup_bps: q.markupBps,
    },
  };
}

/**
 * SPEC "Video" `POST /v1/video/queue`: the job's queue id and model, and in `svc` what the queue
 * call cost (the same figures as its cost headers), the job's DIEM and the upstream's quote.
 */
export function presentVideoQueued(q: QueuedVideo) {
  const { cost } = q;
  return {
    queue_id: q.queueId,
    model: q.model,
    svc: {
      cost_usdc: usdc(cost.costMicroUsdc),
      clearing_price_cents: cost.clearingPriceCents,
      quote_diem: formatDecimal6(q.quoteMicroDiem),
      upstream_quote_diem: formatDecimal6(q.upstreamQuoteMicroDiem),
      balance_remaining_usdc: orNull(cost.balanceRemainingMicroUsdc, usdc),
      support_reference: cost.supportReference,
      request_id: cost.requestId,
    },
  };
}

/**
 * The JSON status body of `POST /v1/video/retrieve` (SPEC: branch on content type): the upstream's
 * `status` as it said it (`PROCESSING`, `COMPLETED`, `failed`), the job's `state` here, and the
 * refund when there is one.
 */
export function presentVideoStatus(r: VideoJobStatusReport): Record<string, unknown> {
  const base: Record<string, unknown> = { queue_id: r.queueId, model: r.model, state: r.status };
  if (r.progress) {
    return {
      ...base,
      status: "PROCESSING",
      upstream_status: r.progress.upstreamStatus,
      average_execution_time: r.progress.averageMs,
      execution_duration: r.progress.elapsedMs,
    };
  }
  if (r.status === "refunded") {
    return {
      ...base,
      status: "failed",
      refunded: true,
      reason: r.failureReason,
      refunded_usdc: formatDecimal6(r.chargeMicroUsdc),
    };
  }
  if (r.status === "completed_no_media") {
    return {
      ...base,
      status: "COMPLETED",
      media: false,
      refund_due_at: r.refundDueAt?.toISOString() ?? null,
      message: "The provider finished without serving media; the charge will be refunded automatically.",
    };
  }
  return { ...base, status: r.upstreamStatus ?? "PROCESSING" };
}
