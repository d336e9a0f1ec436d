import { VENICE_REQUEST_FIELDS } from "../../adapters/upstream/venice-fields.js";
import { type Issue, isRecord, type Json, typeIssue } from "./http-util.js";

/** `POST /chat/completions`' body as the reference documents it: the strict field list, the aliases, the checks. */

/**
 * Top-level fields `/chat/completions` accepts: the reference's (`additionalProperties: false`:
 * anything else → 400, the body is strict), read from the allow-list generated from it.
 */
const CHAT_FIELDS: ReadonlySet<string> = new Set(VENICE_REQUEST_FIELDS["/chat/completions"].fields);

/** Accepted and dropped before validation. */
const CHAT_DROPPED_FIELDS = ["include", "metadata"] as const;

const MESSAGE_ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/** `venice_parameters` keys and their defaults (echoed back on buffered chat responses). */
const VENICE_PARAMETER_DEFAULTS: Record<string, Json> = {
  include_venice_system_prompt: true,
  character_slug: null,
  strip_thinking_response: false,
  disable_thinking: false,
  enable_web_search: "off",
  enable_web_scraping: false,
  enable_web_citations: false,
  include_search_results_in_stream: false,
  return_search_results_as_documents: false,
  enable_x_search: false,
  enable_e2ee: true,
};

/** Rewrites the documented aliases and drops the accepted-and-ignored fields (§1). */
export function normalizeChatAliases(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body };
  if ("input" in out) {
    if (!("messages" in out)) out.messages = out.input;
    delete out.input;
  }
  if ("max_output_tokens" in out) {
    if (!("max_tokens" in out)) out.max_tokens = out.max_output_tokens;
    delete out.max_output_tokens;
  }
  if ("promptCacheKey" in out) {
    if (!("prompt_cache_key" in out)) out.prompt_cache_key = out.promptCacheKey;
    delete out.promptCacheKey;
  }
  if ("web_search" in out) {
    const vp = isRecord(out.venice_parameters) ? { ...out.venice_parameters } : {};
    if (!("enable_web_search" in vp)) vp.enable_web_search = out.web_search;
    out.venice_parameters = vp;
    delete out.web_search;
  }
  for (const field of CHAT_DROPPED_FIELDS) delete out[field];
  return out;
}
function numberInRange(issues: Issue[], body: Record<string, unknown>, field: string, min: number, max: number): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  if (typeof v !== "number" || !Number.isFinite(v)) {
    issues.push(typeIssue([field], "number", v));
  } else if (v < min) {
    issues.push({ code: "too_small", path: [field], message: `Number must be greater than or equal to ${min}` });
  } else if (v > max) {
    issues.push({ code: "too_big", path: [field], message: `Number must be less than or equal to ${max}` });
  }
}

function integerField(issues: Issue[], body: Record<string, unknown>, field: string): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  if (typeof v !== "number" || !Number.isInteger(v)) issues.push(typeIssue([field], "integer", v));
}

export function validateChatBody(body: Record<string, unknown>): Issue[] {
  const issues: Issue[] = [];
  const unknown = Object.keys(body).filter((k) => !CHAT_FIELDS.has(k));
  if (unknown.length > 0) {
    issues.push({
      code: "unrecognized_keys",
      keys: unknown,
      path: [],
      message: `Unrecognized key(s) in object: ${unknown.map((k) => `'${k}'`).join(", ")}`,
    });
  }
  const messages = body.messages;
  if (messages === undefined) {
    issues.push({
      code: "invalid_type",
      expected: "array",
      received: "undefined",
      path: ["messages"],
      message: "Required",
    });
  } else if (!Array.isArray(messages)) {
    issues.push(typeIssue(["messages"], "array", messages));
  } else if (messages.length === 0) {
    issues.push({ code: "too_small", path: ["messages"], message: "Array must contain at least 1 element(s)" });
  } else {
    messages.forEach((m, i) => {
      if (!isRecord(m)) {
        issues.push(typeIssue(["messages", i], "object", m));
        return;
      }
      if (typeof m.role !== "string" || !MESSAGE_ROLES.has(m.role)) {
        issues.push({
          code: "invalid_union_discriminator",
          path: ["messages", i, "role"],
          message: "Invalid discriminator value. Expected 'system' | 'developer' | 'user' | 'assistant' | 'tool'",
        });
      }
      const c = m.content;
      if (c !== undefined && c !== null && typeof c !== "string" && !Array.isArray(c)) {
        issues.push(typeIssue(["messages", i, "content"], "string | array", c));
      }
    });
  }
  for (const field of ["stream", "logprobs", "parallel_tool_calls", "store"]) {
    const v = body[field];
    if (v !== undefined && v !== null && typeof v !== "boolean") issues.push(typeIssue([field], "boolean", v));
  }
  for (const field of ["venice_parameters", "stream_options", "response_format", "reasoning"]) {
    const v = body[field];
    if (v !== undefined && v !== null && !isRecord(v)) issues.push(typeIssue([field], "object", v));
  }
  if (body.tools !== undefined && body.tools !== null && !Array.isArray(body.tools)) {
    issues.push(typeIssue(["tools"], "array", body.tools));
  }
  if (body.user !== undefined && typeof body.user !== "string") issues.push(typeIssue(["user"], "string", body.user));
  const stop = body.stop;
  if (stop !== undefined && stop !== null) {
    if (Array.isArray(stop)) {
      if (stop.length > 4)
        issues.push({ code: "too_big", path: ["stop"], message: "Array must contain at most 4 element(s)" });
    } else if (typeof stop !== "string") {
      issues.push(typeIssue(["stop"], "string | array", stop));
    }
  }
  numberInRange(issues, body, "temperature", 0, 2);
  numberInRange(issues, body, "top_p", 0, 1);
  numberInRange(issues, body, "frequency_penalty", -2, 2);
  numberInRange(issues, body, "presence_penalty", -2, 2);
  integerField(issues, body, "max_tokens");
  integerField(issues, body, "max_completion_tokens");
  integerField(issues, body, "seed");
  integerField(issues, body, "n");
  numberInRange(issues, body, "n", 1, 8);
  numberInRange(issues, body, "max_completion_tokens", 1, Number.MAX_SAFE_INTEGER);
  return issues;
}

export function isWebSearchOn(value: Json | undefined): boolean {
  return value === "on" || value === true || value === "true";
}

/** Splits `model:key=value&…` into the id and the suffix parameters (chat only). */
export function splitModelSuffix(raw: string): { id: string; params: Record<string, Json> } {
  const at = raw.indexOf(":");
  if (at < 0) return { id: raw, params: {} };
  const params: Record<string, Json> = {};
  for (const [k, v] of new URLSearchParams(raw.slice(at + 1))) {
    params[k] = v === "true" ? true : v === "false" ? false : v;
  }
  return { id: raw.slice(0, at), params };
}

export function effectiveVeniceParameters(fromBody: unknown, fromSuffix: Record<string, Json>): Record<string, Json> {
  const out: Record<string, Json> = { ...VENICE_PARAMETER_DEFAULTS };
  for (const source of [isRecord(fromBody) ? fromBody : {}, fromSuffix]) {
    for (const [k, v] of Object.entries(source)) {
      // Unknown keys are silently dropped, as upstream does.
      if (k in VENICE_PARAMETER_DEFAULTS) out[k] = v as Json;
    }
  }
  return out;
}

export function hasPartOfType(messages: readonly unknown[], type: string): boolean {
  return messages.some(
    (m) => isRecord(m) && Array.isArray(m.content) && m.content.some((p) => isRecord(p) && p.type === type),
  );
}
