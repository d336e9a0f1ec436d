import type { Db } from "../../adapters/db.js";
import type { Prisma } from "../../generated/prisma/client.js";
import { supportReferenceOf } from "../accounts/history-reads.js";

/**
 * The typed reads of `video_jobs`, in one place: every step of a job's life (retrieve, complete,
 * the sweeps, the views) reads its row through these, selected column by column so the row's type
 * is Prisma's own payload type for that selection (no casts).
 */

export type VideoJobStatus = "rendering" | "delivered" | "completed_no_media" | "failed" | "refunded" | "expired";

/** The columns the job's steps need. */
const JOB_ROW = {
  id: true,
  accountId: true,
  requestId: true,
  upstreamKeyId: true,
  model: true,
  queueId: true,
  upstreamQueueId: true,
  status: true,
  upstreamStatus: true,
  quoteMicroDiem: true,
  upstreamQuoteMicroDiem: true,
  chargeMicroUsdc: true,
  downloadUrl: true,
  pollCount: true,
  createdAt: true,
  completedAt: true,
  deliveredAt: true,
  refundedAt: true,
  refundDueAt: true,
  failureReason: true,
} as const satisfies Prisma.VideoJobSelect;

/** A job's row as its steps read it. */
export type VideoJobRow = Prisma.VideoJobGetPayload<{ select: typeof JOB_ROW }>;

/** What its buyer sees of the request a job was charged on, read beside the job (no relation: requests are partitioned by month). */
interface JobRequest {
  supportReference: string;
  clearingPriceCents: number | null;
}

/**
 * The requests of these jobs, by id. A job is written by its request's ending, so the request started
 * at or before the job: the months after the newest job are pruned. A request a retention dropped is
 * absent (its job shows an empty support reference).
 */
async function requestsOf(db: Db, jobs: VideoJobRow[]): Promise<Map<string, JobRequest>> {
  if (jobs.length === 0) return new Map();
  const newest = new Date(Math.max(...jobs.map((j) => j.createdAt.getTime())));
  const rows = await db.inferenceRequest.findMany({
    where: { id: { in: jobs.map((j) => j.requestId) }, startedAt: { lte: newest } },
    select: { id: true, supportReference: true, clearingPriceCents: true },
  });
  return new Map(
    rows.map((r) => [r.id, { supportReference: supportReferenceOf(r), clearingPriceCents: r.clearingPriceCents }]),
  );
}

/** A job as its buyer sees it (REST status body, GraphQL). */
export interface VideoJobView {
  queueId: string;
  model: string;
  status: VideoJobStatus;
  upstreamStatus: string | null;
  quoteMicroDiem: bigint;
  chargeMicroUsdc: bigint;
  supportReference: string;
  clearingPriceCents: number | null;
  createdAt: Date;
  completedAt: Date | null;
  deliveredAt: Date | null;
  refundedAt: Date | null;
  refundDueAt: Date | null;
  failureReason: string | null;
  pollCount: number;
}

export function jobByQueueId(db: Db, queueId: string): Promise<VideoJobRow | null> {
  return db.videoJob.findUnique({ where: { queueId }, select: JOB_ROW });
}

export function jobById(db: Db, id: string): Promise<VideoJobRow | null> {
  return db.videoJob.findUnique({ where: { id }, select: JOB_ROW });
}

/** Jobs still rendering (or finished without media) queued at or before `cutoff`. */
export function staleJobs(db: Db, cutoff: Date, limit: number): Promise<VideoJobRow[]> {
  return db.videoJob.findMany({
    where: { status: { in: ["rendering", "completed_no_media"] }, createdAt: { lte: cutoff } },
    take: limit,
    select: JOB_ROW,
  });
}

/** The account's jobs, newest first. */
export async function jobViews(
  db: Db,
  accountId: string,
  opts: { first: number; status?: VideoJobStatus },
): Promise<VideoJobView[]> {
  const rows = await db.videoJob.findMany({
    where: { accountId, ...(opts.status ? { status: opts.status } : {}) },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: opts.first,
    select: JOB_ROW,
  });
  const requests = await requestsOf(db, rows);
  return rows.map((r) => viewOf(r, requests.get(r.requestId) ?? null));
}

/** One job by queue id, only when it is the account's (null otherwise). */
export async function ownedJobView(db: Db, accountId: string, queueId: string): Promise<VideoJobView | null> {
  const row = await db.videoJob.findUnique({ where: { queueId }, select: JOB_ROW });
  if (!row || row.accountId !== accountId) return null;
  return viewOf(row, (await requestsOf(db, [row])).get(row.requestId) ?? null);
}

function viewOf(r: VideoJobRow, request: JobRequest | null): VideoJobView {
  return {
    queueId: r.queueId,
    model: r.model,
    status: r.status,
    upstreamStatus: r.upstreamStatus,
    quoteMicroDiem: r.quoteMicroDiem,
    chargeMicroUsdc: r.chargeMicroUsdc,
    supportReference: request?.supportReference ?? "",
    clearingPriceCents: request?.clearingPriceCents ?? null,
    createdAt: r.createdAt,
    completedAt: r.completedAt,
    deliveredAt: r.deliveredAt,
    refundedAt: r.refundedAt,
    refundDueAt: r.refundDueAt,
    failureReason: r.failureReason,
    pollCount: r.pollCount,
  };
}
