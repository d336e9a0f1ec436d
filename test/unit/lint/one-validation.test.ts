import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// Issue 27 "one validation": a request body is parsed once, by the API contract's zod schemas
// (src/contract), into the typed request REST, GraphQL and MCP hand the domain. This test reads the
// source and fails if a hand-written body parser comes back into the domain:
//   1. no function, method or constant under src/domain is named `parse…Body` (the retired parsers);
//   2. every inference modality the domain defines parses with a function src/contract exports;
//   3. in the domain's request path (src/domain/inference, funding, video, pay-per-request) every `invalid_request`
//      is raised by a rule listed below, each needing something the contract cannot see (the
//      catalog row, a price, the job's state, the upstream's answer). A shape rule belongs in
//      src/contract; a new rule that truly needs the database is added here with its reason.
const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const DOMAIN = join(ROOT, "src/domain");
const REQUEST_PATH = ["inference", "funding", "video", "pay-per-request"].map((d) => join(DOMAIN, d));

/** `file:function` → why the rule is the domain's. */
const DOMAIN_RULES: Record<string, string> = {
  "src/domain/inference/modalities/image/image.ts:imagePricer":
    "the resolutions, qualities and prices the catalog row publishes",
  "src/domain/inference/modalities/video/video-request.ts:bad": "checkVideoRequest's refusals: the row's constraints",
  "src/domain/inference/pipeline/endpoint.ts:renderer":
    "the modality has no stream renderer (`stream: true` on an image route)",
  "src/domain/inference/pipeline/failure.ts:requestError": "the upstream refused the request (4xx relayed)",
  "src/domain/inference/pipeline/call.ts:runCall": "the buyer closed the request",
  "src/domain/video/video-jobs.ts:complete": "the job's state (delivered, refunded, expired)",
  "src/domain/pay-per-request/ppr-service.ts:serve":
    "the request's maximum charge (the catalog's prices) above what one payment may be; a transport that cannot stream",
  "src/domain/funding/funding-challenge.ts:sentPayment":
    "both x402 payment headers at once (X-PAYMENT and PAYMENT-SIGNATURE: headers, not the body contract's)",
  "src/domain/funding/payment-identifier.ts:paymentIdentifierOf":
    "the payment header's payment-identifier extension (a header, not the body contract's)",
};

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sources(p));
    else if (/\.ts$/.test(name) && !name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

const parseFile = (path: string, text = readFileSync(path, "utf8")) =>
  ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);

function walk(node: ts.Node, visit: (n: ts.Node) => void): void {
  visit(node);
  ts.forEachChild(node, (c) => walk(c, visit));
}

/** Names of the functions, methods and constants a file declares that look like a body parser. */
function bodyParsers(file: ts.SourceFile): string[] {
  const found: string[] = [];
  walk(file, (n) => {
    const name =
      ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n) || ts.isVariableDeclaration(n) ? n.name : undefined;
    if (name && ts.isIdentifier(name) && /^parse\w*Body$/.test(name.text)) found.push(name.text);
  });
  return found;
}

/** The name of the function (declaration, method, or a constant holding an arrow) enclosing `n`. */
function enclosingFunction(n: ts.Node): string {
  for (let p: ts.Node | undefined = n.parent; p; p = p.parent) {
    if ((ts.isFunctionDeclaration(p) || ts.isMethodDeclaration(p)) && p.name) return p.name.getText();
    if ((ts.isArrowFunction(p) || ts.isFunctionExpression(p)) && ts.isVariableDeclaration(p.parent)) {
      return p.parent.name.getText();
    }
  }
  return "(module)";
}

/** `file:function` of every `new DomainError("invalid_request", …)` in a file. */
function invalidRequestSites(path: string, file: ts.SourceFile): string[] {
  const sites: string[] = [];
  walk(file, (n) => {
    if (
      ts.isNewExpression(n) &&
      n.expression.getText(file) === "DomainError" &&
      n.arguments?.[0] &&
      ts.isStringLiteralLike(n.arguments[0]) &&
      n.arguments[0].text === "invalid_request"
    ) {
      sites.push(`${path}:${enclosingFunction(n)}`);
    }
  });
  return sites;
}

/** Files that define an inference modality (an `InferenceModality<…>` value), besides the interface's own file. */
function modalityFiles(): string[] {
  return sources(join(DOMAIN, "inference")).filter(
    (p) => !p.endsWith("endpoint.ts") && /:\s*InferenceModality</.test(readFileSync(p, "utf8")),
  );
}

describe("one validation: request bodies are parsed by the contract only", () => {
  it("no body parser under src/domain", () => {
    const found = sources(DOMAIN).flatMap((p) => bodyParsers(parseFile(p)).map((n) => `${relative(ROOT, p)}:${n}`));
    expect(found).toEqual([]);
  });

  it("every inference modality parses with the contract", async () => {
    const contractParsers = new Set<unknown>();
    for (const p of sources(join(ROOT, "src/contract"))) {
      for (const v of Object.values(await import(pathToFileURL(p).href)))
        if (typeof v === "function") contractParsers.add(v);
    }
    const files = modalityFiles();
    expect(files.map((p) => relative(ROOT, p)).sort()).toEqual(
      [
        "src/domain/inference/modalities/chat/chat.ts",
        "src/domain/inference/modalities/image/image.ts",
        "src/domain/inference/modalities/messages/messages.ts",
        "src/domain/inference/modalities/responses/responses.ts",
        "src/domain/inference/modalities/video/video-queue.ts",
      ].sort(),
    );
    let modalities = 0;
    for (const p of files) {
      for (const [name, v] of Object.entries(await import(pathToFileURL(p).href))) {
        const m = v as { route?: unknown; path?: unknown; parse?: unknown };
        if (typeof m !== "object" || m === null || typeof m.route !== "string" || typeof m.parse !== "function")
          continue;
        modalities++;
        expect(contractParsers.has(m.parse), `${relative(ROOT, p)} ${name}.parse`).toBe(true);
      }
    }
    expect(modalities).toBe(5); // chat, Responses, Messages, native and OpenAI images
  });

  it("the domain's request path refuses only what the contract cannot see", () => {
    const sites = REQUEST_PATH.flatMap(sources).flatMap((p) => invalidRequestSites(relative(ROOT, p), parseFile(p)));
    expect([...new Set(sites.filter((s) => !(s in DOMAIN_RULES)))]).toEqual([]);
    // each listed rule still exists (a stale entry would hide a new one of the same name)
    expect(Object.keys(DOMAIN_RULES).filter((r) => !sites.includes(r))).toEqual([]);
  });

  it("catches a parser written again", () => {
    const old = `
      import { DomainError } from "../../lib/errors.js";
      export function parseChatBody(raw: unknown) {
        if (typeof raw !== "object") throw new DomainError("invalid_request", "Body must be a JSON object.");
        return raw;
      }
      const requireModel = (body: Record<string, unknown>) => {
        if (typeof body.model !== "string") throw new DomainError("invalid_request", "model is required.", { field: "model" });
      };
      class Quotes { quote(raw: unknown) { throw new DomainError("invalid_request", "duration is required."); } }`;
    const file = parseFile("x.ts", old);
    expect(bodyParsers(file)).toEqual(["parseChatBody"]);
    expect(invalidRequestSites("src/domain/inference/modalities/chat/chat.ts", file)).toEqual([
      "src/domain/inference/modalities/chat/chat.ts:parseChatBody",
      "src/domain/inference/modalities/chat/chat.ts:requireModel",
      "src/domain/inference/modalities/chat/chat.ts:quote",
    ]);
    // other errors and other codes are not counted
    expect(
      invalidRequestSites(
        "y.ts",
        parseFile("y.ts", `new DomainError("not_found", "x"); new Error("invalid_request");`),
      ),
    ).toEqual([]);
  });
});
