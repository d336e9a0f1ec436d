import { type ASTNode, GraphQLError, Kind, type ValidationRule } from "graphql";
import type { Plugin } from "graphql-yoga";
import { errorPayload } from "../http/error-response.js";
import { DomainError } from "../lib/errors.js";
import { describeProblem, findJsonProblem, textProblem } from "../lib/json-safety.js";

/**
 * What GraphQL refuses before a resolver runs (issue 18): argument text Postgres cannot store.
 * The REST side refuses the same text at its JSON parser (http/middleware.ts); GraphQL arguments
 * also arrive as literals in the document and as variables from a GET query string, so they are
 * checked here, with the schema's bad-input code (`invalid_request`, as in graphql/errors.ts).
 */

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

/** Literals in the document (validation) and variables (before execution) with unstorable text. */
function useTextSafety(): Plugin {
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(textSafetyRule);
    },
    onParams({ params, setResult }) {
      const found = params.variables ? findJsonProblem(params.variables) : null;
      if (!found) return;
      const field = found.field ? `variables.${found.field}` : "variables";
      setResult({ errors: [badInput(describeProblem(found.problem, field), field)] });
    },
  };
}

/**
 * yoga answers a POST whose content type it cannot read with a bare 415 (no body); every error the
 * service sends carries the JSON error shape (issue 18 finding 6), the same one REST sends.
 */
function useJsonRefusals(): Plugin {
  return {
    onResponse({ response, setResponse, fetchAPI }) {
      if (response.status !== 415 || response.headers.get("content-type")) return;
      const p = errorPayload(
        new DomainError(
          "unsupported_media_type",
          "POST /graphql takes application/json (or application/graphql+json, multipart/form-data).",
        ),
      );
      setResponse(
        new fetchAPI.Response(JSON.stringify(p.body), {
          status: p.status,
          headers: { ...p.headers, "Content-Type": "application/json; charset=utf-8" },
        }),
      );
    },
  };
}

/** The plugins yoga.ts installs: every limit on what a GraphQL request may carry. */
export function graphqlLimits(): Plugin[] {
  return [useJsonRefusals(), useTextSafety()];
}
