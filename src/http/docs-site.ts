import { readFileSync } from "node:fs";
import { Marked, type Tokens } from "marked";
import type { Config } from "../config.js";

/**
 * The public documents (SPEC "Public") and the documentation site at `{docs_url}` that renders them
 * (docs/decisions.md "Documents and the docs site"). Pure: templates in, strings out; the router in
 * routes/documents.ts serves them.
 */

export type SiteUrls = Config["urls"];

export interface PublicDocument {
  /** the template under docs/public/ */
  file: string;
  /** the paths that serve it raw (SPEC "Public") */
  paths: readonly string[];
  contentType: string;
  /** its rendered page: `{docs_url}/<slug>` */
  slug: string;
  title: string;
  summary: string;
}

const MARKDOWN = "text/markdown; charset=utf-8";

export const PUBLIC_DOCUMENTS: readonly PublicDocument[] = [
  {
    file: "llms.txt",
    paths: ["/llms.txt"],
    contentType: "text/plain; charset=utf-8",
    slug: "llms",
    title: "Integration guide (llms.txt)",
    summary: "The short path from nothing to a paid completion, and where everything else is.",
  },
  {
    file: "SKILL.md",
    paths: ["/SKILL.md", "/skill.md"],
    contentType: MARKDOWN,
    slug: "skill",
    title: "Agent skill",
    summary:
      "From an x402 wallet to a paid completion: signup with either x402 client, confirmation, chat, costs, errors, Anthropic's SDK and Claude Code.",
  },
  {
    file: "pricing.md",
    paths: ["/pricing.md"],
    contentType: MARKDOWN,
    slug: "pricing",
    title: "Pricing",
    summary: "The exact debit formula and its rounding, the fee, images, video, payouts, worked examples.",
  },
  {
    file: "marketplace.md",
    paths: ["/marketplace.md"],
    contentType: MARKDOWN,
    slug: "marketplace",
    title: "Marketplace",
    summary: "Supply, offers, the buyer ceiling, clearing, capacity, expiry at UTC midnight, payouts.",
  },
  {
    file: "MCP.md",
    paths: ["/MCP.md"],
    contentType: MARKDOWN,
    slug: "mcp",
    title: "MCP connector",
    summary: "The hosted MCP server for Claude Code, Claude Desktop, Cursor and VS Code, and its tools.",
  },
];

/** The placeholders a template may use, each replaced by the deployment's URL (no trailing slash). */
export function substituteUrls(template: string, urls: SiteUrls): string {
  return template
    .replaceAll("{base_url}", urls.base)
    .replaceAll("{mcp_url}", urls.mcp)
    .replaceAll("{web_url}", urls.web)
    .replaceAll("{docs_url}", urls.docs);
}

/** Every document with its URLs substituted, read once (`dir` is docs/public/). */
export function loadDocuments(dir: URL, urls: SiteUrls): Map<PublicDocument, string> {
  return new Map(
    PUBLIC_DOCUMENTS.map((d) => [d, substituteUrls(readFileSync(new URL(d.file, dir), "utf8"), urls)] as const),
  );
}

/** Where the site and the API live, as links a page on the site can use. */
export interface SitePaths {
  /** the site's path prefix without a trailing slash ("" when the site is at the root) */
  root: string;
  home: string;
  page(slug: string): string;
  asset(name: string): string;
  /** a path of the API: relative when the site and the API share an origin, else absolute */
  api(path: string): string;
}

export function sitePaths(urls: SiteUrls): SitePaths {
  const root = new URL(urls.docs).pathname.replace(/\/+$/, "");
  const sameOrigin = new URL(urls.docs).origin === new URL(urls.base).origin;
  return {
    root,
    home: root === "" ? "/" : root,
    page: (slug) => `${root}/${slug}`,
    asset: (name) => `${root}/assets/${name}`,
    api: (path) => (sameOrigin ? new URL(`${urls.base}${path}`).pathname : `${urls.base}${path}`),
  };
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function slugify(text: string): string {
  return (
    text
      .toLowerCase()
      .replace(/<[^>]*>/g, "")
      .replace(/&[^;]+;/g, "")
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "") || "section"
  );
}

const FRONT_MATTER = /^---\n([\s\S]*?)\n---\n/;

/** Markdown to HTML with `marked` (GFM), headings given ids; a YAML front matter becomes a lead paragraph. */
export function renderMarkdown(markdown: string): string {
  let source = markdown;
  let lead = "";
  const fm = FRONT_MATTER.exec(source);
  if (fm) {
    source = source.slice(fm[0].length);
    const description = /^description:\s*(.+)$/m.exec(fm[1] ?? "")?.[1];
    if (description) lead = `<p class="lead">${escapeHtml(description)}</p>\n`;
  }
  const seen = new Map<string, number>();
  const marked = new Marked({
    gfm: true,
    renderer: {
      heading({ tokens, depth }: Tokens.Heading) {
        const inner = this.parser.parseInline(tokens);
        const base = slugify(inner);
        const n = seen.get(base) ?? 0;
        seen.set(base, n + 1);
        const id = n === 0 ? base : `${base}-${n}`;
        return `<h${depth} id="${id}">${inner}</h${depth}>\n`;
      },
    },
  });
  const html = marked.parse(source, { async: false });
  // the first heading is the page's h1; the front matter's description follows it
  return lead === "" ? html : html.replace(/(<\/h1>\n)/, `$1${lead}`);
}

/** Links between documents point at their rendered pages instead of the raw files; API links stay on the site's origin. */
export function linkPages(html: string, urls: SiteUrls, paths: SitePaths): string {
  let out = html;
  for (const d of PUBLIC_DOCUMENTS) {
    for (const p of d.paths) out = out.replaceAll(`href="${urls.base}${p}"`, `href="${paths.page(d.slug)}"`);
  }
  out = out.replaceAll(`href="${urls.docs}"`, `href="${paths.home}"`);
  // any other link into the API: relative when the site shares its origin
  return out.replace(/href="([^"]*)"/g, (whole, href: string) =>
    href.startsWith(`${urls.base}/`) ? `href="${escapeHtml(paths.api(href.slice(urls.base.length)))}"` : whole,
  );
}

export interface PageOptions {
  title: string;
  /** the nav entry marked current: a document slug, "home", "api" */
  current: string;
  body: string;
  head?: string;
  scripts?: string;
}

/** The site's one layout: language, title, skip link, navigation, one main landmark. */
export function layout(paths: SitePaths, o: PageOptions): string {
  const entries: { key: string; href: string; label: string }[] = [
    { key: "home", href: paths.home, label: "Overview" },
    ...PUBLIC_DOCUMENTS.map((d) => ({ key: d.slug, href: paths.page(d.slug), label: navLabel(d) })),
    { key: "api", href: paths.page("api"), label: "API reference" },
    { key: "graphql", href: paths.api("/graphql"), label: "GraphiQL" },
  ];
  const nav = entries
    .map(
      (e) =>
        `<li><a href="${escapeHtml(e.href)}"${e.key === o.current ? ' aria-current="page"' : ""}>${escapeHtml(e.label)}</a></li>`,
    )
    .join("");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(o.title)} · svc docs</title>
<link rel="icon" href="${paths.asset("favicon.svg")}" type="image/svg+xml">
<link rel="stylesheet" href="${paths.asset("site.css")}">
${o.head ?? ""}
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header><a class="brand" href="${escapeHtml(paths.home)}">svc docs</a>
<nav aria-label="Documentation"><ul>${nav}</ul></nav></header>
<main id="main">
${o.body}
</main>
${o.scripts ?? ""}
</body>
</html>
`;
}

function navLabel(d: PublicDocument): string {
  return d.slug === "llms" ? "llms.txt" : d.title;
}

export function indexBody(urls: SiteUrls, paths: SitePaths): string {
  const docs = PUBLIC_DOCUMENTS.map(
    (d) =>
      `<li><a href="${paths.page(d.slug)}">${escapeHtml(d.title)}</a>: ${escapeHtml(d.summary)} ` +
      `Raw: ${d.paths.map((p) => `<a href="${escapeHtml(paths.api(p))}"><code>${escapeHtml(p)}</code></a>`).join(", ")}.</li>`,
  ).join("\n");
  return `<h1>svc documentation</h1>
<p class="lead">A prepaid inference marketplace: fund a balance with one x402 payment in USDC on Base, then call an
OpenAI-compatible API at <code>${escapeHtml(urls.base)}/v1</code>. Each request clears against the cheapest supplier
offer at or below your price ceiling.</p>
<h2 id="documents">Documents</h2>
<ul>
${docs}
</ul>
<h2 id="api">APIs</h2>
<ul>
<li><a href="${paths.page("api")}">API reference</a>: every REST route, interactive, from
<a href="${escapeHtml(paths.api("/openapi.json"))}"><code>/openapi.json</code></a> (OpenAPI 3.0).</li>
<li><a href="${escapeHtml(paths.api("/graphql"))}">GraphiQL</a>: explore the GraphQL API at <code>${escapeHtml(urls.base)}/graphql</code>.</li>
<li>MCP connector: <code>${escapeHtml(urls.mcp)}/mcp</code> with <code>Authorization: Bearer svc_…</code>
(<a href="${paths.page("mcp")}">setup</a>).</li>
<li>Anthropic's Messages API: <code>${escapeHtml(urls.base)}/v1/messages</code>, for the Anthropic SDKs and Claude Code
(<a href="${paths.page("skill")}#10-use-it-from-anthropics-sdk-and-claude-code">Use it from Anthropic's SDK and Claude Code</a>).</li>
</ul>
`;
}

export function apiReferenceBody(specUrl: string): string {
  return `<h1>API reference</h1>
<p>Generated from <a href="${escapeHtml(specUrl)}"><code>/openapi.json</code></a> (OpenAPI 3.0).</p>
<div id="swagger-ui" data-spec-url="${escapeHtml(specUrl)}"><p>Loading the API reference…</p></div>
`;
}

/** Starts Swagger UI on the page's OpenAPI document; no validator badge (it calls an outside service). */
export const API_REFERENCE_SCRIPT = `"use strict";
(function () {
  var el = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: el.getAttribute("data-spec-url"),
    domNode: el,
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
})();
`;

export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#0550ae"/><text x="16" y="23" font-family="system-ui, sans-serif" font-size="20" font-weight="700" fill="#fff" text-anchor="middle">s</text></svg>
`;

export const SITE_CSS = `:root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #57606a; --link: #0550ae;
  --code-bg: #f3f4f6; --border: #d0d7de; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9da7b3; --link: #6cb6ff;
  --code-bg: #161b22; --border: #30363d; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.6 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--link); }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: var(--bg); padding: .5rem; z-index: 10; }
header { border-bottom: 1px solid var(--border); padding: .75rem 1.5rem; display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; align-items: center; }
.brand { font-weight: 700; text-decoration: none; color: var(--fg); }
nav ul { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: .25rem 1rem; }
nav a[aria-current="page"] { font-weight: 700; text-decoration: none; color: var(--fg); }
main { max-width: 60rem; margin: 0 auto; padding: 1.5rem; }
.lead { font-size: 1.1rem; color: var(--muted); }
code { font: .9em/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--code-bg); padding: .1em .3em; border-radius: 4px; }
pre { background: var(--code-bg); padding: 1rem; overflow-x: auto; border-radius: 6px; border: 1px solid var(--border); }
pre code { padding: 0; background: none; }
table { border-collapse: collapse; display: block; overflow-x: auto; margin: 1rem 0; }
th, td { border: 1px solid var(--border); padding: .35rem .6rem; text-align: left; vertical-align: top; }
h1, h2, h3 { line-height: 1.25; }
h2 { margin-top: 2rem; border-bottom: 1px solid var(--border); padding-bottom: .25rem; }
#swagger-ui { background: #ffffff; color: #1b1f24; border-radius: 6px; }
`;
