import type { Db } from "../adapters/db.js";
import type { EventBus } from "../adapters/pubsub.js";
import type { AccountSnapshot } from "../domain/keys/api-key-service.js";
import type { Services } from "../services.js";

/** Who is calling. Filled by the auth middleware (issue 3); `null` for anonymous callers. */
export interface Viewer {
  accountId: string;
  walletAddress: string;
  /** how the caller authenticated: a session cookie or a Bearer API key */
  credential: "session" | "bearer";
  apiKeyId?: string;
  sessionId?: string;
  /** balances and ceiling read together with a Bearer key (inference uses it as its snapshot) */
  account?: AccountSnapshot;
}

export interface GraphQLContext {
  db: Db;
  bus: EventBus;
  services: Services;
  viewer: Viewer | null;
  requestId: string;
}
