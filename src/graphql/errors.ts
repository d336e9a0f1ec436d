import { GraphQLError } from "graphql";
import { isDomainError } from "../lib/errors.js";
import { logger } from "../lib/logger.js";

/**
 * The only DomainError → GraphQL mapping (yoga `maskedErrors.maskError`): a DomainError keeps its
 * message with `extensions.code` (the same string as REST), `extensions.status` and details;
 * anything else is masked as `internal_error`.
 */
export function maskError(error: unknown, message: string): Error {
  const original = error instanceof GraphQLError ? (error.originalError ?? error) : error;
  if (isDomainError(original)) {
    const details = Object.fromEntries(
      Object.entries(original.details).map(([k, v]) => [k, typeof v === "bigint" ? v.toString() : v]),
    );
    return new GraphQLError(original.message, {
      nodes: error instanceof GraphQLError ? error.nodes : undefined,
      path: error instanceof GraphQLError ? error.path : undefined,
      extensions: { code: original.code, status: original.status, details },
    });
  }
  // scope-auth refusals (Pothos ForbiddenError is itself a GraphQLError)
  if (isForbidden(original) || isForbidden(error)) {
    return new GraphQLError("Authentication failed: this field needs a different credential.", {
      nodes: error instanceof GraphQLError ? error.nodes : undefined,
      path: error instanceof GraphQLError ? error.path : undefined,
      extensions: { code: "authentication_failed", status: 401 },
    });
  }
  // graphql's own request errors are safe to show
  if (error instanceof GraphQLError && !error.originalError) return withCode(error);
  if (error instanceof GraphQLError && original instanceof GraphQLError && original !== error)
    return withCode(original);
  logger.error({ err: original }, "graphql resolver error");
  return new GraphQLError(message, { extensions: { code: "internal_error", status: 500 } });
}

/**
 * yoga codes parse and validation failures; the rest of graphql's request errors (a variable that
 * does not coerce to its type, a scalar's refusal) come without a code and get invalid_request: every
 * GraphQL error carries `extensions.code` (the GraphQL fuzz found errors without one).
 */
function withCode(e: GraphQLError): GraphQLError {
  if (typeof e.extensions.code === "string") return e;
  return new GraphQLError(e.message, {
    nodes: e.nodes,
    path: e.path,
    extensions: { ...e.extensions, code: "invalid_request", status: 400 },
  });
}

function isForbidden(e: unknown): boolean {
  return e instanceof Error && (e.name === "ForbiddenError" || e.constructor?.name === "ForbiddenError");
}
