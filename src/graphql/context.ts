import type { Db } from "../adapters/db.js";
import type { EventBus } from "../adapters/pubsub.js";
import type { Viewer } from "../domain/identity/viewer.js";
import { type UnfoldedBurns, unfoldedBurns } from "../domain/ledger/live-figures.js";
import type { Services } from "../services.js";

export interface GraphQLContext {
  db: Db;
  bus: EventBus;
  services: Services;
  viewer: Viewer | null;
  requestId: string;
}

/**
 * The unfolded burns (`unfoldedBurns`), read once per GraphQL request and shared by every field that
 * shows an offer's remaining or a key's balance live (consistent figures, one statement).
 */
const burnsRead = new WeakMap<GraphQLContext, Promise<UnfoldedBurns>>();
export function burnsOf(ctx: GraphQLContext): Promise<UnfoldedBurns> {
  let read = burnsRead.get(ctx);
  if (!read) {
    read = unfoldedBurns(ctx.db);
    burnsRead.set(ctx, read);
  }
  return read;
}
