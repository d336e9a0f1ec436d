import type { Db } from "../../adapters/db.js";
import type { UpstreamClient } from "../../adapters/upstream/client.js";
import type { Config } from "../../config.js";
import type { Clock } from "../../lib/clock.js";
import type { SecretBox } from "../../lib/secret-box.js";

export interface CatalogDeps {
  db: Db;
  config: Config;
  clock: Clock;
  upstream: UpstreamClient;
  secrets: SecretBox;
}

/** Catalog sync, model rows and model statistics (issue 5). */
export class CatalogService {
  constructor(protected readonly deps: CatalogDeps) {}

  /** Worker `sync`: read the upstream catalog (text, image, video) into catalog rows. */
  async sync(): Promise<{ upserted: number; unlisted: number }> {
    return { upserted: 0, unlisted: 0 };
  }
}
