import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import { createServer as createNetServer, type Socket } from "node:net";
import { join } from "node:path";
import { type NextFunction, type Request, type RequestHandler, type Response, Router } from "express";
import { type Hex, toHex } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { z } from "zod";
import { requireSameOrigin } from "../http/auth.js";
import type { WebDev } from "../http/routes/web.js";
import { parse } from "../http/validate.js";
import { DomainError } from "../lib/errors.js";
import { logger } from "../lib/logger.js";
import type { Runtime } from "../runtime.js";
import { createWebDevServer } from "../web/vite.js";
import { stateDirOf } from "./dev-services/index.js";

/**
 * The web app's local-mode routes (`npm run dev` and the test apps; never in a production build):
 * Vite's dev server in middleware mode (live reload), started on the first request under the mount
 * path so test apps that never open the app never load Vite, and the dev sign-in helpers under
 * `dev/` (anvil's public test wallets, tokens of the local identity provider).
 */

/** anvil's public test mnemonic: the local chain's dev accounts (src/local/world.ts). Local mode only. */
const ANVIL_MNEMONIC = "test test test test test test test test test test test junk";
/** src/local/world.ts: account 3 is the seeded supplier, accounts 4-7 the dev buyers funded with USDC. */
const DEV_WALLETS = [
  { index: 3, role: "supplier", label: "Seeded supplier" },
  { index: 4, role: "buyer", label: "Dev buyer 1" },
  { index: 5, role: "buyer", label: "Dev buyer 2" },
  { index: 6, role: "buyer", label: "Dev buyer 3" },
  { index: 7, role: "buyer", label: "Dev buyer 4" },
] as const;

interface DevWallet {
  label: string;
  role: "supplier" | "buyer";
  address: string;
  privateKey: Hex;
}

let devWalletsCache: DevWallet[] | undefined;
function devWallets(): DevWallet[] {
  devWalletsCache ??= DEV_WALLETS.map((w) => {
    const account = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: w.index });
    const key = account.getHdKey().privateKey;
    if (!key) throw new Error("dev wallet derivation failed");
    return { label: w.label, role: w.role, address: account.address, privateKey: toHex(key) };
  });
  return devWalletsCache;
}

/** where `npm run dev` keeps its local IdP key (src/local/world.ts, DEV_STATE_DIR), so tokens survive restarts */
const devIdpKeyFile = () => join(stateDirOf(process.env), "idp-key.json");

type MintTokens = (wallet: string) => Promise<{ accessToken: string; identityToken: string }>;

/**
 * The local identity provider's minting, when this process trusts it: the key `npm run dev` saved
 * must be the one IDP_VERIFICATION_KEY names. Undefined otherwise (a test app's IdP lives in the test).
 */
async function devIdpMinter(rt: Runtime): Promise<MintTokens | undefined> {
  const { appId, issuer, verificationKeyPem } = rt.config.idp;
  if (!appId || !verificationKeyPem) return undefined;
  let saved: { privateKeyPem: string };
  try {
    saved = JSON.parse(readFileSync(devIdpKeyFile(), "utf8")) as { privateKeyPem: string };
  } catch {
    return undefined;
  }
  const { createLocalIdp, importKeyPair } = await import("./idp/index.js");
  const idp = createLocalIdp({ appId, issuer, keyPair: importKeyPair(saved) });
  if (idp.publicKeyPem.trim() !== verificationKeyPem.trim()) return undefined;
  return (wallet) => idp.mintTokens(wallet);
}

const devTokensBody = z.object({
  walletAddress: z
    .string({ required_error: "is required" })
    .regex(/^0x[0-9a-fA-F]{40}$/, { message: "must be 0x + 40 hex" }),
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createNetServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** The local-mode routes under the web app's mount path (`WebOptions.dev`). */
export const localWebDev: WebDev = ({ rt, mount, inApp }) => {
  const r = Router();
  // LOCAL MODE ONLY: anvil's public test keys (already printed by `npm run dev`), so the browser
  // can sign SIWE and x402 payments as a seeded wallet without a wallet extension.
  let minter: Promise<MintTokens | undefined> | undefined;
  r.get(`${mount}/dev/wallets`, async (_req, res) => {
    minter ??= devIdpMinter(rt);
    res.setHeader("Cache-Control", "no-store");
    res.json({ wallets: devWallets(), idpTokens: (await minter) !== undefined });
  });
  r.post(`${mount}/dev/idp-tokens`, requireSameOrigin(rt.config), async (req, res) => {
    const body = parse(devTokensBody, req.body);
    minter ??= devIdpMinter(rt);
    const mint = await minter;
    if (!mint) {
      throw new DomainError(
        "not_configured",
        "This process does not hold the local identity provider's key (it is `npm run dev`'s, in .dev-state/).",
      );
    }
    const { accessToken, identityToken } = await mint(body.walletAddress);
    res.setHeader("Cache-Control", "no-store");
    res.json({ accessToken, identityToken });
  });
  r.use(`${mount}/dev`, (req, _res, next) =>
    next(new DomainError("not_found", `No route for ${req.method} ${req.originalUrl}.`)),
  );
  r.use(devServer(rt, mount, inApp));
  return r;
};

/** Local mode: Vite in middleware mode, created on first use and closed with the HTTP server. */
function devServer(rt: Runtime, mount: string, inApp: (req: Request) => boolean): RequestHandler {
  let vite: ReturnType<typeof createWebDevServer> | undefined;
  return (req: Request, res: Response, next: NextFunction) => {
    if (!inApp(req)) return next();
    if (!vite) {
      const httpServer = (req.socket as Socket & { server?: Server }).server;
      vite = freePort().then(async (hmrPort) => {
        const server = await createWebDevServer({ mountPath: mount, hmrPort });
        httpServer?.once("close", () => {
          server.close().catch((e: unknown) => logger.warn({ err: e }, "web dev server did not close"));
        });
        logger.info({ url: rt.config.urls.web }, "web app dev server ready");
        return server;
      });
    }
    vite.then(
      (server) => server.middlewares(req, res, next),
      (e: unknown) => next(e),
    );
  };
}
