import type { Db } from "./adapters/db.js";
import type { EventBus } from "./adapters/pubsub.js";
import type { RedisKeys } from "./adapters/redis/keys.js";
import type { Config } from "./config.js";
import { MaintenanceService } from "./domain/maintenance/maintenance-service.js";
import { MarketService } from "./domain/market/market-service.js";
import type { Clock } from "./lib/clock.js";

/** Every domain service, built once per process and shared by REST, GraphQL, MCP and workers. */
export interface Services {
  market: MarketService;
  maintenance: MaintenanceService;
}

export interface ServiceDeps {
  config: Config;
  db: Db;
  bus: EventBus;
  keys: RedisKeys;
  clock: Clock;
}

export function createServices(deps: ServiceDeps): Services {
  return {
    market: new MarketService(deps.db, deps.bus, deps.clock),
    maintenance: new MaintenanceService(deps.db, deps.clock),
  };
}
