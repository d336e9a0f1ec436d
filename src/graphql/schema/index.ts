// Imports every type file, then builds. Nothing else lives here.
import { builder } from "../builder.js";
import "../scalars.js";
import "./root.js";
import "./market.js";
import "./account.js";
import "./api-keys.js";
import "./payments.js";
import "./supply.js";
import "./upstream-keys.js";
import "./supplier-earnings.js";
import "./catalog.js";
import "./video-jobs.js";
import "./webhooks.js";
import "./dashboard.js";
import "./limits.js";

export function buildSchema() {
  return builder.toSchema({ sortSchema: true });
}
