import type { AppConfig } from "./config";
import type { ViewerIdentity } from "./viewer";

/** What every view knows of the deployment and the signed-in viewer. */
export interface Session {
  config: AppConfig;
  viewer: ViewerIdentity | null;
  /** call after signing in or out: a new GraphQL client (and subscriptions) for the new credential */
  refreshSession: () => void;
}
