import type { Db } from "./adapters/db.js";
import { createIdpVerifier } from "./adapters/idp/verify.js";
import type { EventBus } from "./adapters/pubsub.js";
import type { RedisKeys } from "./adapters/redis/keys.js";
import type { Config } from "./config.js";
import { AccountService } from "./domain/accounts/account-service.js";
import { IdentityService } from "./domain/identity/identity-service.js";
import { ApiKeyService } from "./domain/keys/api-key-service.js";
import { MaintenanceService } from "./domain/maintenance/maintenance-service.js";
import { MarketService } from "./domain/market/market-service.js";
import type { Clock } from "./lib/clock.js";

/** Every domain service, built once per process and shared by REST, GraphQL, MCP and workers. */
export interface Services {
  market: MarketService;
  maintenance: MaintenanceService;
  accounts: AccountService;
  apiKeys: ApiKeyService;
  identity: IdentityService;
}

export interface ServiceDeps {
  config: Config;
  db: Db;
  bus: EventBus;
  keys: RedisKeys;
  clock: Clock;
}

export function createServices(deps: ServiceDeps): Services {
  const { config, db, bus, clock } = deps;
  const idp =
    config.idp.appId && (config.idp.verificationKeyPem || config.idp.jwksUrl)
      ? createIdpVerifier({
          appId: config.idp.appId,
          issuer: config.idp.issuer,
          verificationKeyPem: config.idp.verificationKeyPem,
          jwksUrl: config.idp.jwksUrl,
        })
      : null;
  const hosts = [...new Set([config.urls.base, config.urls.web].map((u) => new URL(u).host))];
  return {
    market: new MarketService(db, bus, clock),
    maintenance: new MaintenanceService(db, clock),
    accounts: new AccountService(db, bus, clock),
    apiKeys: new ApiKeyService(db, clock),
    identity: new IdentityService(db, clock, idp, {
      sessionSecret: config.secrets.sessionSecret,
      siweDomains: hosts,
      siweUri: config.urls.web,
      chainId: config.chain.id,
    }),
  };
}
