import { costLimitPlugin } from "@escape.tech/graphql-armor-cost-limit";
import { maxAliasesPlugin } from "@escape.tech/graphql-armor-max-aliases";
import { maxDepthPlugin } from "@escape.tech/graphql-armor-max-depth";
import { maxTokensPlugin } from "@escape.tech/graphql-armor-max-tokens";
import {
  type ASTNode,
  type DocumentNode,
  GraphQLError,
  Kind,
  type ValidationContext,
  type ValidationRule,
} from "graphql";
import type { Plugin } from "graphql-yoga";
import type { CostBudget } from "../adapters/redis/budget.js";
import type { Viewer } from "../domain/identity/viewer.js";
import { errorPayload } from "../http/error-response.js";
import type { Clock } from "../lib/clock.js";
import { nestingPastLimit } from "../lib/document-nesting.js";
import { DomainError, type ErrorCode, errors } from "../lib/errors.js";
import { describeProblem, findJsonProblem, textProblem } from "../lib/json-safety.js";
import { logger } from "../lib/logger.js";

/**
 * What GraphQL refuses before a resolver runs (docs/decisions.md "Hostile input"):
 * - argument text Postgres cannot store (the REST side refuses it at its JSON parser; GraphQL
 *   arguments also arrive as document literals and as variables from a GET query string);
 * - documents past the per-operation limits (GraphQL Armor: depth, aliases, tokens, cost), so one
 *   request cannot recurse through `myOffers → upstreamKey → offers` or run 10,000 aliases, and
 *   documents nested deeper than the parser's stack allows, refused before it runs (a deep one
 *   overflowed the parser's stack);
 * - callers past their cost budget: every executed operation's cost is spent on a per-caller
 *   (account, or IP when anonymous) budget in Redis; past it, `rate_limited` (HTTP 429);
 * - a bare 415 from yoga, answered with the JSON error shape;
 * - parameters that do not decode (a malformed percent-escape, `variables` that are not JSON).
 * Refusals carry the schema's codes in `extensions.code` (`invalid_request`, `rate_limited`), as
 * graphql/errors.ts renders a DomainError.
 */

/**
 * Per-operation limits. The web app's heaviest operation (the supplier dashboard, `myOffers(first:
 * 30)`) has depth 5, no alias and cost about 6,400 as urql sends it; GraphiQL's introspection query has
 * 183 tokens (introspection costs nothing and has no depth limit under Armor's defaults) and nests 10
 * brackets deep. `maxNesting` bounds `{`, `[` and `(` inside one another before the parser runs (the
 * parser recurses on each; the token limit alone lets ~2,000 levels through, past the stack): 64, as
 * a JSON body (lib/json-safety.ts), far above any real document (selections are at most 10 deep).
 */
export const GRAPHQL_LIMITS = {
  maxDepth: 10,
  maxAliases: 20,
  maxTokens: 2_000,
  maxCost: 10_000,
  maxNesting: 64,
} as const;

/**
 * A refusal of a per-operation limit: `invalid_request` with `details.limit`, and HTTP 400 on every
 * Accept (`extensions.http`, which yoga turns into the status and leaves out of the body; see
 * `useLimitStatus`). GraphQL over HTTP answers a request error 200 under `application/json`; a limit
 * is the service's, not the language's, and a client must not send it again unchanged.
 */
function limitExtensions(limit: string) {
  return { code: "invalid_request", status: 400, details: { limit }, http: { status: 400 } };
}

interface HttpHint {
  status?: number;
  spec?: boolean;
}

/**
 * yoga marks every parse and validation error as a GraphQL-over-HTTP "spec" error (`http.spec`),
 * which it answers 200 under `application/json` and `text/event-stream` whatever status the error
 * asks for. A limit refusal (`details.limit`) is not one: just before the answer is written, its mark
 * is taken off, so the status it carries (400) is the answer's on every Accept.
 */
function useLimitStatus(): Plugin {
  return {
    onResultProcess({ result }) {
      if (Array.isArray(result) || !("errors" in result)) return;
      for (const e of result.errors ?? []) {
        const ext = e.extensions as { details?: { limit?: unknown }; http?: HttpHint } | undefined;
        if (ext?.details?.limit !== undefined && ext.http) ext.http.spec = false;
      }
    },
  };
}

function badInput(message: string, field: string, nodes?: ASTNode): GraphQLError {
  return new GraphQLError(message, {
    nodes,
    extensions: { code: "invalid_request", status: 400, details: { field } },
  });
}

/** `arg` or `arg.inner` for a string literal: the argument (and input fields) it sits in. */
function argumentPath(ancestors: readonly (ASTNode | readonly ASTNode[])[]): string {
  const names: string[] = [];
  for (const a of ancestors) {
    if (Array.isArray(a)) continue;
    const node = a as ASTNode;
    if (node.kind === Kind.ARGUMENT || node.kind === Kind.OBJECT_FIELD) names.push(node.name.value);
    else if (node.kind === Kind.VARIABLE_DEFINITION) names.push(`$${node.variable.name.value}`);
  }
  return names.join(".");
}

/** A string literal with a NUL (`"\u0000"`) is a validation error naming its argument. */
const textSafetyRule: ValidationRule = (context) => ({
  StringValue(node, _key, _parent, _path, ancestors) {
    const problem = textProblem(node.value);
    if (!problem) return;
    const field = argumentPath(ancestors);
    context.reportError(badInput(describeProblem(problem, field), field, node));
  },
});

/** Variables with text Postgres cannot store or nested past the JSON limit, as the error refusing them. */
export function variablesRefusal(variables: unknown): GraphQLError | undefined {
  const found = variables ? findJsonProblem(variables) : null;
  if (!found) return undefined;
  const field = found.field ? `variables.${found.field}` : "variables";
  return badInput(describeProblem(found.problem, field), field);
}

/** Literals in the document (validation) and variables (before execution) with unstorable text. */
function useTextSafety(): Plugin {
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(textSafetyRule);
    },
    onParams({ params, setResult }) {
      const refused = variablesRefusal(params.variables);
      if (refused) setResult({ errors: [refused] });
    },
  };
}

/** yoga's refusals that come without a body, as the service's errors. */
const BARE_REFUSALS: Record<number, [ErrorCode, string]> = {
  406: [
    "not_acceptable",
    "/graphql answers application/json, application/graphql-response+json or text/event-stream; the Accept header allows none of them.",
  ],
  415: [
    "unsupported_media_type",
    "POST /graphql takes application/json (or application/graphql+json, multipart/form-data).",
  ],
};

/** A refusal in the JSON error shape REST sends (status, `X-Svc-Error-Code`, `{"error":{…}}`). */
export function jsonRefusal(fetchAPI: { Response: typeof Response }, err: DomainError): Response {
  const p = errorPayload(err);
  return new fetchAPI.Response(JSON.stringify(p.body), {
    status: p.status,
    headers: { ...p.headers, "Content-Type": "application/json; charset=utf-8" },
  });
}

/**
 * yoga answers a POST whose content type it cannot read with a bare 415, and a request whose Accept
 * header allows none of its answers with a bare 406 (no body); every error the service sends carries
 * the JSON error shape, the same one REST sends, so a client reads one shape whatever refused it.
 */
function useJsonRefusals(): Plugin {
  return {
    onResponse({ response, setResponse, fetchAPI }) {
      const refusal = BARE_REFUSALS[response.status];
      if (!refusal || response.headers.get("content-type")) return;
      setResponse(jsonRefusal(fetchAPI, new DomainError(...refusal)));
    },
  };
}

/** The GraphQL-over-HTTP parameters yoga reads as JSON when they come urlencoded. */
const JSON_PARAMS: ReadonlySet<string> = new Set(["variables", "extensions"]);

/** A urlencoded component decoded as URLSearchParams would, or undefined when an escape does not decode. */
function decodeComponent(raw: string): string | undefined {
  if (!raw.includes("%")) return raw.replaceAll("+", " ");
  try {
    return decodeURIComponent(raw.replaceAll("+", " "));
  } catch {
    return undefined;
  }
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * What is wrong with urlencoded text (a query string, a form body), if anything: a parameter whose
 * name or value has a percent-escape that does not decode (`%ZZ`, `%7`, escapes of invalid UTF-8),
 * where URLSearchParams would silently keep the `%` or put U+FFFD in its place; and, where yoga reads
 * the GraphQL parameters from it (`json`), `variables` or `extensions` that are not JSON, which yoga's
 * own JSON.parse turns into a masked 500.
 */
export function urlencodedParamsError(text: string, where: string, json: boolean): DomainError | undefined {
  if (text === "") return undefined;
  for (const pair of text.split("&")) {
    const eq = pair.indexOf("=");
    const rawName = eq < 0 ? pair : pair.slice(0, eq);
    const name = decodeComponent(rawName);
    const value = eq < 0 ? "" : decodeComponent(pair.slice(eq + 1));
    if (name === undefined || value === undefined) {
      const field = name ?? rawName;
      return errors.invalid(
        `${field}: the ${where} has a malformed percent-escape (%XX with two hex digits of UTF-8); nothing was run.`,
        field,
      );
    }
    if (json && value !== "" && JSON_PARAMS.has(name) && !isJson(value)) {
      return errors.invalid(`${name} in the ${where} is not valid JSON; nothing was run.`, name);
    }
  }
  return undefined;
}

function isFormBody(request: Request): boolean {
  const type = request.headers.get("content-type")?.split(",")[0]?.split(";")[0]?.trim().toLowerCase();
  return request.method === "POST" && type === "application/x-www-form-urlencoded";
}

/**
 * A query string that does not decode, as the refusal (`urlencodedParamsError`); a GET reads its
 * GraphQL parameters from it, so there `variables` and `extensions` must be JSON too. It reads the URL
 * as the client sent it: the fetch Request's is re-encoded (`%ZZ` arrives as `%25ZZ`).
 */
export function queryStringRefusal(request: Request, serverContext: unknown): DomainError | undefined {
  const url = (serverContext as { req?: { originalUrl?: string } } | undefined)?.req?.originalUrl ?? request.url;
  const q = url.indexOf("?");
  const search = q < 0 ? "" : (url.slice(q + 1).split("#")[0] ?? "");
  return urlencodedParamsError(search, "query string", request.method === "GET");
}

/**
 * Parameters that do not decode are malformed input, not a server fault: 400 `invalid_request`
 * naming the parameter, in the JSON error shape a malformed JSON body gets, before anything runs.
 * Checked: /graphql's query string on every method (the URL is the request's too, even where a POST
 * reads its parameters from the body), and the form body a urlencoded POST carries its parameters in.
 */
function useDecodableParams(): Plugin {
  return {
    onRequestParse({ request, serverContext, requestParser, setRequestParser, endResponse, fetchAPI }) {
      const refused = queryStringRefusal(request, serverContext);
      if (refused) {
        endResponse(jsonRefusal(fetchAPI, refused));
        return;
      }
      if (!requestParser || !isFormBody(request)) return;
      const parse = requestParser;
      setRequestParser(async (req) => {
        const formRefused = urlencodedParamsError(await req.clone().text(), "form body", true);
        return formRefused ? jsonRefusal(fetchAPI, formRefused) : parse(req);
      });
    },
  };
}

/** An Armor refusal as the schema's bad-input error (Armor prefixes every message with "Syntax Error: "). */
function limitError(err: GraphQLError, limit: string): GraphQLError {
  return new GraphQLError(err.message.replace(/^Syntax Error: /, ""), {
    nodes: err.nodes,
    extensions: limitExtensions(limit),
  });
}

/** Armor's validation rules report through the validation context (every violation, no throw). */
function reportAs(limit: string) {
  return {
    exposeLimits: true,
    propagateOnRejection: false,
    onReject: [(ctx: ValidationContext | null, err: GraphQLError) => ctx?.reportError(limitError(err, limit))],
  };
}

/** Each validated document's cost (the most expensive of its operations), for the budget. */
const documentCosts = new WeakMap<DocumentNode, number>();

function useArmor(): Plugin[] {
  return [
    // counted in the lexer: parsing stops at the limit (the parser is recursive; depth needs tokens)
    maxTokensPlugin({
      n: GRAPHQL_LIMITS.maxTokens,
      exposeLimits: true,
      onReject: [
        (_ctx, err) => {
          Object.assign(err.extensions, limitExtensions("tokens"));
          err.message = err.message.replace(/^Syntax Error: /, "");
        },
      ],
    }),
    maxDepthPlugin({ n: GRAPHQL_LIMITS.maxDepth, ...reportAs("depth") }),
    maxAliasesPlugin({ n: GRAPHQL_LIMITS.maxAliases, ...reportAs("aliases") }),
    costLimitPlugin({
      maxCost: GRAPHQL_LIMITS.maxCost,
      ...reportAs("cost"),
      onAccept: [
        (ctx: ValidationContext | null, details: { n: number }) => {
          const doc = ctx?.getDocument();
          if (doc) documentCosts.set(doc, Math.max(documentCosts.get(doc) ?? 0, details.n));
        },
      ],
    }),
  ] as Plugin[];
}

export interface GraphQLBudgetDeps {
  budget: CostBudget;
  clock: Clock;
}

/** Who pays for an operation: the signed-in account, else the client's address. */
function subjectOf(context: unknown): string {
  const c = context as { viewer?: Viewer | null; req?: { socket?: { remoteAddress?: string } } };
  if (c.viewer) return `account:${c.viewer.accountId}`;
  return `ip:${c.req?.socket?.remoteAddress ?? "unknown"}`;
}

function rateLimited(retryAfterSeconds: number): GraphQLError {
  return new GraphQLError("GraphQL cost budget spent for this minute; retry after the window resets.", {
    extensions: {
      code: "rate_limited",
      status: 429,
      details: { retryAfterSeconds },
      // yoga turns this into the HTTP status and header, and leaves it out of the body
      http: { status: 429, headers: { "Retry-After": String(retryAfterSeconds) } },
    },
  });
}

/**
 * Spends each operation's cost (queries and mutations at execution, subscriptions at subscribe) on
 * the caller's budget. A Redis failure lets the operation through (logged): the per-operation
 * limits still hold, and GraphQL stays up when the budget's store is down.
 */
function useCostBudget(deps: GraphQLBudgetDeps): Plugin {
  const charge = async (
    args: { document: DocumentNode; contextValue: unknown },
    stop: (result: { errors: GraphQLError[] }) => void,
  ) => {
    const cost = documentCosts.get(args.document) ?? 1;
    try {
      const r = await deps.budget.spend(subjectOf(args.contextValue), cost, deps.clock.now());
      if (!r.ok) stop({ errors: [rateLimited(r.retryAfterSeconds)] });
    } catch (err) {
      logger.warn({ err }, "graphql cost budget unavailable; operation let through");
    }
  };
  return {
    onExecute: ({ args, setResultAndStopExecution }) => charge(args, setResultAndStopExecution),
    onSubscribe: ({ args, setResultAndStopExecution }) => charge(args, setResultAndStopExecution),
  };
}

/**
 * The nesting bound, before the parser runs: graphql-js parses recursively, a few stack
 * frames per `{`, `[` or `(`, so 10,000 nested list literals overflowed the stack inside `parse` —
 * before any validation rule, and Armor's token limit (counted in the lexer) stops only at 2,000
 * tokens, ~2,000 levels, already past what the server's stack holds. A linear scan of the text
 * (lib/document-nesting.ts) refuses a document past `maxNesting` instead. It wraps the parse function
 * every transport goes through (yoga's /graphql on every method and Accept, and graphql-sse's
 * /graphql/stream), so it must come after Armor's token plugin, which replaces that function.
 */
function useNestingBound(): Plugin {
  return {
    onParse({ parseFn, setParseFn }) {
      setParseFn((source, options) => {
        const text = typeof source === "string" ? source : source.body;
        const at = nestingPastLimit(text, GRAPHQL_LIMITS.maxNesting);
        if (at !== null) {
          throw new GraphQLError(
            `The document nests deeper than ${GRAPHQL_LIMITS.maxNesting} levels ({, [ or ( inside one another) at character ${at}; nothing was run.`,
            { extensions: limitExtensions("nesting") },
          );
        }
        return parseFn(source, options);
      });
    },
  };
}

/** The plugins yoga.ts installs: every limit on what a GraphQL request may carry. */
export function graphqlLimits(budget?: GraphQLBudgetDeps): Plugin[] {
  return [
    useJsonRefusals(),
    useDecodableParams(),
    useTextSafety(),
    ...useArmor(),
    // after Armor: its token plugin sets the parse function this one wraps
    useNestingBound(),
    useLimitStatus(),
    ...(budget ? [useCostBudget(budget)] : []),
  ];
}
