import type { Db } from "../adapters/db.js";
import type { EventBus } from "../adapters/pubsub.js";
import type { Services } from "../services.js";

/** Who is calling. Filled by the auth middleware (issue 3); `null` for anonymous callers. */
export interface Viewer {
  accountId: string;
  walletAddress: string;
  /** how the caller authenticated: a session cookie or a Bearer API key */
  credential: "session" | "bearer";
  apiKeyId?: string;
  sessionId?: string;
}

export interface GraphQLContext {
  db: Db;
  bus: EventBus;
  services: Services;
  viewer: Viewer | null;
  requestId: string;
}
