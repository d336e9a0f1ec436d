import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import { createServer as createNetServer, type Socket } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import express, { type NextFunction, type Request, type RequestHandler, type Response, Router } from "express";
import { type Hex, toHex } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { z } from "zod";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { Runtime } from "../../runtime.js";
import { buildWebApp, createWebDevServer, webMountPath } from "../../web/vite.js";
import { requireSameOrigin } from "../auth.js";
import { parse } from "../validate.js";

/**
 * The web app at {web_url} (default `{base_url}/app`; docs/decisions.md "Web app"): the reference
 * client of our own GraphQL API.
 *   local mode (`npm run dev`): Vite's dev server in middleware mode (live reload), started on the
 *     first request under the mount path, so test apps that never open the app never load Vite;
 *   production (`npm start`): the built assets in dist/web, built at start when missing or stale.
 * Plus `config.json` (what the browser needs to know of this deployment) and, in local mode only,
 * the dev sign-in helpers under `dev/`.
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

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** where `npm run dev` keeps its local IdP key (src/local/world.ts), so tokens survive restarts */
const DEV_IDP_KEY_FILE = join(REPO_ROOT, ".dev-state", "idp-key.json");

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
    saved = JSON.parse(readFileSync(DEV_IDP_KEY_FILE, "utf8")) as { privateKeyPem: string };
  } catch {
    return undefined;
  }
  const { createLocalIdp, importKeyPair } = await import("../../local/idp/index.js");
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

/** Security headers for the built app: our own scripts only, no framing (it signs payments). */
function appHeaders(rt: Runtime): RequestHandler {
  const connect = new Set(["'self'", new URL(rt.config.urls.base).origin]);
  const csp = [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    `connect-src ${[...connect].join(" ")}`,
    "frame-ancestors 'none'",
    "base-uri 'self'",
    "form-action 'self'",
  ].join("; ");
  return (_req, res, next) => {
    res.setHeader("Content-Security-Policy", csp);
    res.setHeader("X-Frame-Options", "DENY");
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("Referrer-Policy", "same-origin");
    next();
  };
}

export function webRoutes(rt: Runtime): Router {
  const r = Router();
  const mount = webMountPath(rt.config.urls.web);
  const local = rt.config.mode === "local";
  const inApp = (req: Request) => req.path === mount || req.path.startsWith(`${mount}/`);

  r.get(mount, (req, res, next) => {
    // the app's asset URLs are relative to `${mount}/`
    if (req.path !== mount) return next();
    const q = req.originalUrl.indexOf("?");
    res.redirect(302, `${mount}/${q >= 0 ? req.originalUrl.slice(q) : ""}`);
  });

  r.get(`${mount}/config.json`, (_req, res) => {
    res.setHeader("Cache-Control", "no-store");
    res.json({
      mode: rt.config.mode,
      baseUrl: rt.config.urls.base,
      webUrl: rt.config.urls.web,
      docsUrl: rt.config.urls.docs,
      mcpUrl: rt.config.urls.mcp,
      graphqlUrl: `${rt.config.urls.base}/graphql`,
      chainId: rt.config.chain.id,
      usdcAddress: rt.config.chain.usdcAddress,
      confirmationBlocks: rt.config.chain.confirmationBlocks,
      platformFeeBps: rt.config.fees.platformFeeBps,
      idpConfigured: Boolean(rt.config.idp.appId && (rt.config.idp.verificationKeyPem || rt.config.idp.jwksUrl)),
      devSignIn: local,
    });
  });

  if (local) {
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
  } else {
    r.use(`${mount}/dev`, (req, _res, next) =>
      next(new DomainError("not_found", `No route for ${req.method} ${req.originalUrl}.`)),
    );
    r.use(builtAssets(rt, mount, inApp));
  }
  return r;
}

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

/** Production: dist/web (built now when missing or stale), index.html for every app route. */
function builtAssets(rt: Runtime, mount: string, inApp: (req: Request) => boolean): RequestHandler {
  const started = Date.now();
  const ready = buildWebApp({ mountPath: mount }).then(
    ({ outDir, built }) => {
      if (built) logger.info({ ms: Date.now() - started, outDir }, "web app built");
      return outDir;
    },
    (e: unknown) => {
      logger.error({ err: e }, "web app build failed");
      throw e;
    },
  );
  ready.catch(() => undefined); // reported above; requests see the failure
  const headers = appHeaders(rt);
  let statics: RequestHandler | undefined;
  return (req: Request, res: Response, next: NextFunction) => {
    if (!inApp(req) || (req.method !== "GET" && req.method !== "HEAD")) return next();
    ready.then(
      (outDir) => {
        statics ??= express.static(outDir, {
          index: false,
          fallthrough: true,
          setHeaders: (r, path) => {
            // hashed file names never change; everything else is revalidated
            r.setHeader(
              "Cache-Control",
              /[/\\]assets[/\\]/.test(path) ? "public, max-age=31536000, immutable" : "no-cache",
            );
          },
        });
        const url = req.url;
        req.url = req.url.slice(mount.length) || "/";
        headers(req, res, () =>
          statics?.(req, res, () => {
            req.url = url;
            if (/\.[a-z0-9]+$/i.test(req.path)) return next(); // a missing file is a 404, not the app
            res.setHeader("Cache-Control", "no-cache");
            res.sendFile(join(outDir, "index.html"));
          }),
        );
      },
      () => next(new DomainError("internal_error", "The web app could not be built; see the server log.")),
    );
  };
}
