import { existsSync } from "node:fs";
import { join } from "node:path";
import express, { type NextFunction, type Request, type RequestHandler, type Response, Router } from "express";
import { WEB_DIST_DIR, webMountPath } from "../../lib/app-root.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/logger.js";
import type { Runtime } from "../../runtime.js";

/**
 * The web app at {web_url} (default `{base_url}/app`; docs/decisions.md "Web app"): the reference
 * client of our own GraphQL API.
 *   production (`npm start`): the assets `npm run build` put in dist/web, index.html for every app
 *     route; never built here (the production install has no Vite);
 *   local mode (`npm run dev`, test apps): the dev entry hands in its routes (`WebOptions.dev`,
 *     src/local/web-dev.ts: Vite's dev server and the dev sign-in helpers under `dev/`).
 * Plus `config.json`, what the browser needs to know of this deployment.
 */

/** What the dev entry adds under the mount path (Vite's dev server, the dev sign-in helpers). */
export type WebDev = (ctx: { rt: Runtime; mount: string; inApp: (req: Request) => boolean }) => Router;

export interface WebOptions {
  /** local mode's routes; production serves `distDir` */
  dev?: WebDev;
  /** the built app (default dist/web) */
  distDir?: string;
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

export function webRoutes(rt: Runtime, web: WebOptions = {}): Router {
  const r = Router();
  const mount = webMountPath(rt.config.urls.web);
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
      devSignIn: web.dev !== undefined,
    });
  });

  if (web.dev) {
    // local mode (`npm run dev`, test apps): the dev entry's routes (src/local/web-dev.ts)
    r.use(web.dev({ rt, mount, inApp }));
  } else {
    r.use(`${mount}/dev`, (req, _res, next) =>
      next(new DomainError("not_found", `No route for ${req.method} ${req.originalUrl}.`)),
    );
    r.use(builtAssets(rt, mount, inApp, web.distDir ?? WEB_DIST_DIR));
  }
  return r;
}

/** Production: the built app in `outDir`, index.html for every app route. */
function builtAssets(rt: Runtime, mount: string, inApp: (req: Request) => boolean, outDir: string): RequestHandler {
  const built = existsSync(join(outDir, "index.html"));
  if (!built) logger.warn({ outDir }, "the web app is not built (npm run build); its routes answer 503");
  const headers = appHeaders(rt);
  let statics: RequestHandler | undefined;
  return (req: Request, res: Response, next: NextFunction) => {
    if (!inApp(req) || (req.method !== "GET" && req.method !== "HEAD")) return next();
    if (!built) {
      return next(new DomainError("not_configured", "The web app is not built on this server (npm run build)."));
    }
    {
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
    }
  };
}
