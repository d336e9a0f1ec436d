import { initGraphQLTada } from "gql.tada";
import type { introspection } from "../graphql-env.d.ts";

/**
 * Typed GraphQL documents from `schema.graphql` (gql.tada: the answer's type is inferred from the
 * document, no codegen step). `graphql-env.d.ts` is the schema's introspection as a type, written by
 * `npm run web:graphql-env` after `npm run schema:print`. Micro-unit amounts are integer strings
 * (MicroUsdc, MicroDiem); DateTime is an ISO string.
 */
export const graphql = initGraphQLTada<{
  introspection: introspection;
  scalars: {
    DateTime: string;
    MicroUsdc: string;
    MicroDiem: string;
    JSON: unknown;
  };
}>();

export type { FragmentOf, ResultOf, VariablesOf } from "gql.tada";
export { readFragment } from "gql.tada";
