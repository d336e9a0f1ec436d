/** What the server tells the browser about this deployment (`{web_url}/config.json`). */
export interface AppConfig {
  mode: "local" | "production";
  baseUrl: string;
  webUrl: string;
  docsUrl: string;
  mcpUrl: string;
  graphqlUrl: string;
  chainId: number;
  usdcAddress: string;
  confirmationBlocks: number;
  platformFeeBps: number;
  idpConfigured: boolean;
  /** local mode: the seeded dev wallets can sign in with one click */
  devSignIn: boolean;
}

export async function loadAppConfig(): Promise<AppConfig> {
  const res = await fetch(`${import.meta.env.BASE_URL}config.json`, { cache: "no-store" });
  if (!res.ok) throw new Error(`config.json answered ${res.status}`);
  return (await res.json()) as AppConfig;
}

/** The app's own path prefix, e.g. `/app` (Vite's base without the trailing slash). */
export const APP_BASE = import.meta.env.BASE_URL.replace(/\/$/, "");
