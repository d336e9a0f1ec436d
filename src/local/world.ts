import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Address } from "viem";
import { logger } from "../lib/logger.js";
import { formatUsdc } from "../lib/money.js";
import type { Runtime } from "../runtime.js";
import { type LocalChain, startLocalChain } from "./chain/index.js";
import { type DevServices, startDevServices, stateDirOf } from "./dev-services/index.js";
import { createLocalIdp, importKeyPair, type LocalIdp } from "./idp/index.js";
import { LOCAL_SUPPLIER_KEYS, seedLocalData } from "./seed.js";
import { startUpstreamSimulator, type UpstreamSimulator } from "./upstream-sim/index.js";

/**
 * Local mode (CONTRACT "Local mode"): every outside service on this machine, from real libraries —
 * the upstream simulator, an anvil chain (id 8453) with an EIP-3009 USDC, the in-process
 * facilitator settling on it, a local identity provider — plus seed data. When nothing answers at
 * DATABASE_URL or REDIS_URL, an embedded PostgreSQL or a redis-server runs there (dev-services/).
 */
export interface LocalWorld {
  /** environment overrides that point the service at the local world */
  env: Record<string, string>;
  sim: UpstreamSimulator;
  chain: LocalChain;
  idp: LocalIdp;
  /** the PostgreSQL and redis-server this world runs itself, if any */
  services: DevServices;
  /** dev wallets funded with USDC, for trying the funding flow */
  buyers: { address: Address; privateKey: `0x${string}` }[];
  seed(rt: Runtime): Promise<void>;
  banner(baseUrl: string): string;
  stop(): Promise<void>;
}

export const LOCAL_CATALOG_KEY = "VENICE_INFERENCE_KEY_local_catalog";
/** USDC minted to each dev buyer wallet at boot. */
export const LOCAL_BUYER_USDC_MICRO = 1_000_000_000n;

/** The dev IdP key survives restarts so tokens minted by `npm run local:tokens` stay valid. */
function loadOrCreateIdp(stateDir: string, appId: string, issuer: string): LocalIdp {
  const file = join(stateDir, "idp-key.json");
  try {
    const saved = JSON.parse(readFileSync(file, "utf8")) as { privateKeyPem: string };
    return createLocalIdp({ appId, issuer, keyPair: importKeyPair(saved) });
  } catch {
    const idp = createLocalIdp({ appId, issuer });
    try {
      mkdirSync(stateDir, { recursive: true });
      writeFileSync(file, JSON.stringify(idp.exportKeyPair()), { mode: 0o600 });
    } catch (e) {
      logger.warn({ err: e }, "could not persist the local IdP key");
    }
    return idp;
  }
}

export async function startLocalWorld(opts: {
  appId?: string;
  env: Record<string, string | undefined>;
  /** mine one block per interval so confirmations progress (default 1000 ms; 0 = off) */
  blockIntervalMs?: number;
}): Promise<LocalWorld> {
  const stateDir = stateDirOf(opts.env);
  // first, so that a missing Redis is reported before anything else starts
  const services = await startDevServices({ env: opts.env, stateDir });
  try {
    return await startWorld(opts, stateDir, services);
  } catch (e) {
    await services.stop();
    throw e;
  }
}

async function startWorld(
  opts: Parameters<typeof startLocalWorld>[0],
  stateDir: string,
  services: DevServices,
): Promise<LocalWorld> {
  const sim = await startUpstreamSimulator({
    keys: [
      ...LOCAL_SUPPLIER_KEYS.map((k) => ({ key: k.secret, diemMicro: k.diemMicro })),
      { key: LOCAL_CATALOG_KEY, diemMicro: 0n },
    ],
  });
  let chain: LocalChain;
  try {
    chain = await startLocalChain({
      usdcName: opts.env.USDC_EIP712_NAME || "USD Coin",
      usdcVersion: opts.env.USDC_EIP712_VERSION || "2",
    });
  } catch (e) {
    await sim.close();
    throw e;
  }
  const [deployer, facilitator, payTo, supplier, ...rest] = chain.devAccounts;
  if (!deployer || !facilitator || !payTo || !supplier) throw new Error("anvil dev accounts missing");
  const buyers = rest.slice(0, 4);
  await Promise.all(buyers.map((b) => chain.mintUsdc(b.address, LOCAL_BUYER_USDC_MICRO)));
  // the one-time Permit2 approval x402 `upto` (pay per request) needs, made for them as a wallet would
  for (const b of buyers) await chain.approvePermit2(b.privateKey);

  const appId = opts.appId || "svc-local-app";
  const issuer = opts.env.IDP_ISSUER || "privy.io";
  const idp = loadOrCreateIdp(stateDir, appId, issuer);

  // automine gives instant settlement; a steady block keeps confirmation depth moving
  const interval = opts.blockIntervalMs ?? 1000;
  const miner =
    interval > 0
      ? setInterval(() => {
          chain.mine(1).catch(() => undefined);
        }, interval)
      : undefined;
  miner?.unref();

  const env: Record<string, string> = {
    UPSTREAM_BASE_URL: sim.baseUrl,
    CATALOG_SYNC_KEY: LOCAL_CATALOG_KEY,
    CHAIN_RPC_URL: chain.rpcUrl,
    CHAIN_ID: String(chain.chainId),
    USDC_ADDRESS: chain.usdcAddress,
    PAY_TO: payTo.address,
    PAYOUT_PRIVATE_KEY: payTo.privateKey,
    FACILITATOR_URL: "local",
    FACILITATOR_PRIVATE_KEY: facilitator.privateKey,
    IDP_APP_ID: appId,
    IDP_ISSUER: issuer,
    IDP_VERIFICATION_KEY: idp.publicKeyPem,
  };

  let stopped = false;
  return {
    env,
    sim,
    chain,
    idp,
    services,
    buyers,
    seed: (rt) => seedLocalData(rt, { supplierWallet: supplier.address }),
    banner(baseUrl) {
      const ownServices = [services.postgres && "PostgreSQL", services.redis && "redis-server"]
        .filter(Boolean)
        .join(" and ");
      const lines = [
        "",
        "svc is running in local mode — everything below is on this machine.",
        "",
        `  API          ${baseUrl}/v1   (OpenAI-compatible base URL)`,
        `  Web app      ${baseUrl}/app   (market, buyer and supplier dashboards; one-click dev-wallet sign-in)`,
        `  MCP          ${baseUrl}/mcp   (Streamable HTTP; Authorization: Bearer svc_…)`,
        `  GraphQL      ${baseUrl}/graphql   (GraphiQL in a browser)`,
        `  Docs         ${baseUrl}/docs   (guides, API reference; for agents: ${baseUrl}/llms.txt)`,
        `  Health       ${baseUrl}/healthz   (readiness /readyz, Prometheus /metrics)`,
        `  Upstream     ${sim.baseUrl}   (simulator; admin at ${sim.adminUrl})`,
        `  Chain RPC    ${chain.rpcUrl}   (anvil, chain id ${chain.chainId})`,
        `  USDC         ${chain.usdcAddress}`,
        `  PAY_TO       ${payTo.address}`,
        ...services.bannerLines,
        "",
        `  Dev buyer wallets (${formatUsdc(LOCAL_BUYER_USDC_MICRO)} USDC each; anvil's public test keys):`,
        ...buyers.map((b) => `    ${b.address}  ${b.privateKey}`),
        "",
        "  Try:",
        `    curl ${baseUrl}/healthz`,
        "    # pay per request, no account: the 402 names the request's maximum (x402 v2 upto); the exact cost is settled",
        `    curl -s -D - ${baseUrl}/x402/v1/chat/completions -H 'content-type: application/json' \\`,
        `      -d '{"model":"zai-org-glm-5-1","max_tokens":256,"messages":[{"role":"user","content":"Say hi"}]}'`,
        "    npm run local:pay 'Say hi'   # the same, paid by a dev wallet through @x402/fetch and the OpenAI SDK",
        `    curl -s ${baseUrl}/graphql -H 'content-type: application/json' \\`,
        `      -d '{"query":"{ market { cheapestPostedCents routableDiem prices { priceCentsPerDollar routableDiem } } }"}'`,
        "",
        `  Ctrl-C stops the service, the chain and the simulator${ownServices ? `, then the ${ownServices} above` : ""}.`,
        "",
      ];
      return `${lines.join("\n")}\n`;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      if (miner) clearInterval(miner);
      await Promise.allSettled([sim.close(), chain.stop()]);
      // last: the service has closed its pools by now (main.ts stops the world after the runtime)
      await services.stop();
    },
  };
}
