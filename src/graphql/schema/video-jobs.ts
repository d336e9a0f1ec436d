import { DEFAULT_VIDEO_JOBS, MAX_VIDEO_JOBS, videoJobArgs, videoJobsArgs } from "../../contract/video-jobs.js";
import type { VideoJobView } from "../../domain/video/job-rows.js";
import { builder } from "../builder.js";
import { withArgs } from "../validate.js";
import { viewerOrThrow } from "./account.js";

const VideoJobStatusEnum = builder.enumType("VideoJobStatus", {
  description:
    "SPEC video job states: rendering → delivered (the mp4 went to the buyer once); completed_no_media (refund due); failed, refunded or expired.",
  values: {
    RENDERING: { value: "rendering" },
    DELIVERED: { value: "delivered" },
    COMPLETED_NO_MEDIA: { value: "completed_no_media" },
    FAILED: { value: "failed" },
    REFUNDED: { value: "refunded" },
    EXPIRED: { value: "expired" },
  } as const,
});

const VideoJobRef = builder.objectRef<VideoJobView>("VideoJob").implement({
  description: "One of the buyer's video jobs (POST /v1/video/queue), as the video service reports it.",
  fields: (t) => ({
    queueId: t.exposeID("queueId", { description: "the `queue_id` POST /v1/video/queue returned" }),
    model: t.exposeString("model"),
    status: t.field({ type: VideoJobStatusEnum, resolve: (j) => j.status }),
    upstreamStatus: t.exposeString("upstreamStatus", { nullable: true, description: "the provider's last word" }),
    quoteDiem: t.field({
      type: "MicroDiem",
      description: "the job's DIEM quote (the burn it was charged for)",
      resolve: (j) => j.quoteMicroDiem,
    }),
    chargeUsdc: t.field({
      type: "MicroUsdc",
      description: "charged up front at queue time",
      resolve: (j) => j.chargeMicroUsdc,
    }),
    supportReference: t.exposeString("supportReference"),
    clearingPriceCents: t.exposeInt("clearingPriceCents", { nullable: true }),
    createdAt: t.field({ type: "DateTime", resolve: (j) => j.createdAt }),
    completedAt: t.field({ type: "DateTime", nullable: true, resolve: (j) => j.completedAt }),
    deliveredAt: t.field({ type: "DateTime", nullable: true, resolve: (j) => j.deliveredAt }),
    refundedAt: t.field({ type: "DateTime", nullable: true, resolve: (j) => j.refundedAt }),
    refundDueAt: t.field({
      type: "DateTime",
      nullable: true,
      description: "finished without media: when its refund is due",
      resolve: (j) => j.refundDueAt,
    }),
    failureReason: t.exposeString("failureReason", { nullable: true }),
    pollCount: t.exposeInt("pollCount"),
  }),
});

builder.queryField("myVideoJobs", (t) =>
  t.field({
    type: [VideoJobRef],
    authScopes: { authenticated: true },
    description: `The viewer's video jobs, newest first (\`first\` 1-${MAX_VIDEO_JOBS}); \`status\` narrows them.`,
    args: {
      first: t.arg.int({ required: false, defaultValue: DEFAULT_VIDEO_JOBS }),
      status: t.arg({ type: VideoJobStatusEnum, required: false }),
    },
    resolve: withArgs(videoJobsArgs, (_root, args, ctx) =>
      ctx.services.videoJobs.list(viewerOrThrow(ctx, "inference").accountId, {
        first: args.first,
        status: args.status ?? undefined,
      }),
    ),
  }),
);

builder.queryField("myVideoJob", (t) =>
  t.field({
    type: VideoJobRef,
    authScopes: { authenticated: true },
    description: "One of the viewer's video jobs by queue id; another account's (or an unknown) id is not_found.",
    args: { queueId: t.arg.string({ required: true }) },
    resolve: withArgs(videoJobArgs, (_root, args, ctx) =>
      ctx.services.videoJobs.view(viewerOrThrow(ctx, "inference").accountId, args.queueId),
    ),
  }),
);

builder.subscriptionField("videoJobUpdated", (t) =>
  t.field({
    type: VideoJobRef,
    authScopes: { authenticated: true },
    description:
      "Owner only: fires when one of the viewer's video jobs changes state (delivered, refunded, expired, …), from any process; yields the job as it is now.",
    subscribe: (_root, _args, ctx) => ctx.bus.subscribe("videoJobUpdated", viewerOrThrow(ctx, "inference").accountId),
    // the event names the job; its current state is re-read (owner-checked) from the service
    resolve: (e, _args, ctx) => ctx.services.videoJobs.view(viewerOrThrow(ctx, "inference").accountId, e.queueId),
  }),
);
