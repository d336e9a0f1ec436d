import { DomainError } from "../../lib/errors.js";
import { MAX_REQUESTED_TOKENS } from "./admission.js";

/**
 * The request rules chat and Responses share: the model field, `stream`, positive integer token
 * caps, and THE paid add-on check (SPEC 12: anything that bills beyond published pricing is refused).
 */

export type Json = Record<string, unknown>;

export function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The buyer's model id: a non-empty string of at most 200 characters, without `:option` suffixes. */
export function requireModel(body: Json): string {
  if (typeof body.model !== "string" || body.model.length === 0 || body.model.length > 200) {
    throw new DomainError("invalid_request", "model is required (a live id from /v1/models).", { field: "model" });
  }
  if (body.model.includes(":")) {
    throw new DomainError("invalid_request", "model suffixes (`model:option=…`) are not accepted.", { field: "model" });
  }
  return body.model;
}

/** `stream`: absent or a boolean. */
export function streamFlag(body: Json): boolean {
  if (body.stream !== undefined && typeof body.stream !== "boolean") {
    throw new DomainError("invalid_request", "stream must be a boolean.", { field: "stream" });
  }
  return body.stream === true;
}

/** An optional token cap (absent or null: undefined): an integer 1–MAX_REQUESTED_TOKENS, else 400. */
export function positiveInt(v: unknown, field: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > MAX_REQUESTED_TOKENS) {
    throw new DomainError("invalid_request", `${field} must be an integer from 1 to ${MAX_REQUESTED_TOKENS}.`, {
      field,
    });
  }
  return v;
}

/** Tool types that bill beyond published pricing. */
const PAID_TOOL = /^(web_search|web_search_preview|x_search)(_|$)/;

/** A paid add-on switch counts as on unless absent, null, false or "off" (text and image routes alike). */
export function switchedOn(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false && v !== "off";
}

/**
 * THE paid add-on check (SPEC 12), for every text route: the provider's web search, scraping and
 * X search (`venice_parameters.enable_*`), OpenAI's `web_search`, and paid tool types are refused
 * (400 naming the field). A switch counts as on by `switchedOn`.
 */
export function refusePaidAddOns(body: Json): void {
  const vp = body.venice_parameters;
  if (vp !== undefined && vp !== null && !isObject(vp)) {
    throw new DomainError("invalid_request", "venice_parameters must be an object.", { field: "venice_parameters" });
  }
  if (
    vp &&
    (switchedOn(vp.enable_web_search) || switchedOn(vp.enable_web_scraping) || switchedOn(vp.enable_x_search))
  ) {
    throw new DomainError(
      "invalid_request",
      "Web search, scraping and X search are refused: they bill beyond published pricing.",
      { field: "venice_parameters" },
    );
  }
  if (switchedOn(body.web_search)) {
    throw new DomainError("invalid_request", "web_search is refused: it bills beyond published pricing.", {
      field: "web_search",
    });
  }
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) {
      throw new DomainError("invalid_request", "tools must be an array.", { field: "tools" });
    }
    for (const t of body.tools) {
      if (isObject(t) && typeof t.type === "string" && PAID_TOOL.test(t.type)) {
        throw new DomainError("invalid_request", `The ${t.type} tool is refused: it bills beyond published pricing.`, {
          field: "tools",
        });
      }
    }
  }
}
