import type { Db } from "../adapters/db.js";
import type { EventBus } from "../adapters/pubsub.js";
import type { Viewer } from "../domain/identity/viewer.js";
import type { Services } from "../services.js";

export interface GraphQLContext {
  db: Db;
  bus: EventBus;
  services: Services;
  viewer: Viewer | null;
  requestId: string;
}
