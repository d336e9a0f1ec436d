import { boundedInt, z } from "./common.js";
import { queueIdField } from "./inference.js";

/** GraphQL `myVideoJobs(first:)`: 1-100 jobs, the page the service reads in one query (20 by default). */
export const MAX_VIDEO_JOBS = 100;
export const DEFAULT_VIDEO_JOBS = 20;
export const videoJobsArgs = z.object({
  first: boundedInt("first", 1, MAX_VIDEO_JOBS, DEFAULT_VIDEO_JOBS),
});

/** GraphQL `myVideoJob(queueId:)`: the id `POST /v1/video/queue` returned, as REST's `queue_id` (1-100 characters). */
export const videoJobArgs = z.object({ queueId: queueIdField("queueId") });
