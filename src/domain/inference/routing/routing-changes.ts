import type { EventBus, RoutingChange } from "../../../adapters/pubsub.js";
import { logger } from "../../../lib/logger.js";

/**
 * Starts hearing supply changes (`capacityChanged`) and cache invalidations (`routingChanged`) from
 * every process, through Redis. Returns the function that stops it.
 */
export function listenForChanges(
  bus: EventBus,
  on: { capacity: () => void; routing: (change: RoutingChange) => void },
): () => void {
  const capacity = bus.subscribe("capacityChanged");
  const routing = bus.subscribe("routingChanged");
  const drain = async <T>(it: AsyncIterable<T>, handle: (e: T) => void) => {
    try {
      for await (const e of it) handle(e);
    } catch (e) {
      logger.warn({ err: e }, "routing events stopped");
    }
  };
  void drain(capacity, on.capacity);
  void drain(routing, on.routing);
  return () => {
    void capacity.return(undefined);
    void routing.return(undefined);
  };
}
