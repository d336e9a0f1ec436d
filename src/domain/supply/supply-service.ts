import type { ChainGateway } from "../../adapters/chain/usdc-gateway.js";
import type { Db } from "../../adapters/db.js";
import type { EventBus } from "../../adapters/pubsub.js";
import type { UpstreamClient } from "../../adapters/upstream/client.js";
import type { Config } from "../../config.js";
import type { Clock } from "../../lib/clock.js";
import type { SecretBox } from "../../lib/secret-box.js";
import type { MarketService } from "../market/market-service.js";

export interface SupplyDeps {
  db: Db;
  config: Config;
  clock: Clock;
  bus: EventBus;
  upstream: UpstreamClient;
  secrets: SecretBox;
  market: MarketService;
  /** treasury side of the chain for payouts; undefined when PAYOUT_PRIVATE_KEY is unset */
  payoutChain: ChainGateway | undefined;
}

/** Supply side: upstream keys, offers, expiry, key balance sync, supplier earnings and payouts (issue 5). */
export class SupplyService {
  constructor(protected readonly deps: SupplyDeps) {}

  /** Worker `expiry`: offers whose DIEM expired at UTC midnight become `expired`, exactly once. */
  async expireDue(): Promise<{ expired: number }> {
    return { expired: 0 };
  }

  /** Worker `sync`: refresh every active key's DIEM balance from the upstream; mark auth failures. */
  async syncKeyBalances(): Promise<{ synced: number; authFailed: number }> {
    return { synced: 0, authFailed: 0 };
  }

  /** Worker `payouts`: the daily payout run (idempotent across crashes). */
  async runDailyPayouts(): Promise<{ paid: number }> {
    return { paid: 0 };
  }
}
