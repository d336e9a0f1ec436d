import { createRequire } from "node:module";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
import express, { type Response, Router } from "express";
import { appPath } from "../../lib/app-root.js";
import { DomainError } from "../../lib/errors.js";
import type { Runtime } from "../../runtime.js";
import {
  API_REFERENCE_SCRIPT,
  apiReferenceBody,
  FAVICON_SVG,
  indexBody,
  layout,
  linkPages,
  loadDocuments,
  renderMarkdown,
  SITE_CSS,
  sitePaths,
} from "../docs-site.js";
import { sendError } from "../error-response.js";

/** docs/public/: the document templates, with `{base_url}`, `{mcp_url}`, `{web_url}`, `{docs_url}` */
const TEMPLATES = pathToFileURL(`${appPath("docs", "public")}/`);

/** swagger-ui-dist's own folder; only the files the reference page loads are served from it */
const SWAGGER_UI_DIR = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
const SWAGGER_UI_FILES = /^\/(swagger-ui\.css|swagger-ui-bundle\.js|favicon-(16x16|32x32)\.png)(\.map)?$/;

const HTML = "text/html; charset=utf-8";
const CACHE = "public, max-age=300";

/**
 * SPEC "Public": the agent-facing documents, with the deployment's URLs substituted once at start,
 * and the documentation site at `{docs_url}` (its path on this listener): the documents rendered,
 * the API reference (Swagger UI over /openapi.json, assets from the installed package) and a link to
 * GraphiQL at /graphql. Nothing on the site loads from another origin.
 */
export function documentRoutes(rt: Runtime): Router {
  const r = Router();
  const urls = rt.config.urls;
  const paths = sitePaths(urls);
  const documents = loadDocuments(TEMPLATES, urls);

  const send = (res: Response, contentType: string, body: string) => {
    res.setHeader("Content-Type", contentType);
    res.setHeader("Cache-Control", CACHE);
    res.send(body);
  };

  const pages = new Map<string, string>();
  for (const [doc, text] of documents) {
    for (const p of doc.paths) r.get(p, (_req, res) => send(res, doc.contentType, text));
    // llms.txt is markdown too (llmstxt.org), only served as text/plain
    const body = renderMarkdown(text);
    pages.set(doc.slug, layout(paths, { title: doc.title, current: doc.slug, body: linkPages(body, urls, paths) }));
  }
  const specUrl = paths.api("/openapi.json");
  pages.set(
    "api",
    layout(paths, {
      title: "API reference",
      current: "api",
      head: `<link rel="stylesheet" href="${paths.asset("swagger-ui/swagger-ui.css")}">`,
      body: apiReferenceBody(specUrl),
      scripts:
        `<script src="${paths.asset("swagger-ui/swagger-ui-bundle.js")}"></script>\n` +
        `<script src="${paths.asset("api-reference.js")}"></script>`,
    }),
  );
  const home = layout(paths, { title: "Overview", current: "home", body: indexBody(urls, paths) });

  // the site's root answers with and without the trailing slash
  r.get(paths.root === "" ? "/" : [paths.root, `${paths.root}/`], (_req, res) => send(res, HTML, home));
  for (const [slug, html] of pages) r.get(paths.page(slug), (_req, res) => send(res, HTML, html));
  r.get(paths.page("graphql"), (_req, res) => res.redirect(302, paths.api("/graphql")));

  r.get(paths.asset("site.css"), (_req, res) => send(res, "text/css; charset=utf-8", SITE_CSS));
  r.get(paths.asset("favicon.svg"), (_req, res) => send(res, "image/svg+xml", FAVICON_SVG));
  r.get(paths.asset("api-reference.js"), (_req, res) =>
    send(res, "text/javascript; charset=utf-8", API_REFERENCE_SCRIPT),
  );
  r.use(
    paths.asset("swagger-ui"),
    (req, res, next) => {
      if (SWAGGER_UI_FILES.test(req.path)) return next();
      sendError(res, new DomainError("not_found", `No route for ${req.method} ${req.originalUrl}.`));
    },
    express.static(SWAGGER_UI_DIR, { index: false, fallthrough: false, maxAge: "1d" }),
  );
  return r;
}
