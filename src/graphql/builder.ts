import SchemaBuilder from "@pothos/core";
import PrismaPlugin from "@pothos/plugin-prisma";
import RelayPlugin from "@pothos/plugin-relay";
import ScopeAuthPlugin from "@pothos/plugin-scope-auth";
import type PrismaTypes from "../generated/pothos-types.js";
import { getDatamodel } from "../generated/pothos-types.js";
import type { GraphQLContext } from "./context.js";

/** The builder defines no types (Pothos app layout): see schema/<type>.ts. */
export const builder = new SchemaBuilder<{
  PrismaTypes: PrismaTypes;
  Context: GraphQLContext;
  Scalars: {
    MicroUsdc: { Input: bigint; Output: bigint };
    MicroDiem: { Input: bigint; Output: bigint };
    DateTime: { Input: Date; Output: Date };
  };
  AuthScopes: {
    /** a session cookie (SPEC "Authentication": account and supplier operations) */
    session: boolean;
    /** a Bearer API key (agent operations) */
    bearer: boolean;
    /** either credential */
    authenticated: boolean;
  };
  DefaultFieldNullability: false;
}>({
  defaultFieldNullability: false,
  plugins: [ScopeAuthPlugin, PrismaPlugin, RelayPlugin],
  scopeAuth: {
    authScopes: (ctx) => ({
      session: ctx.viewer?.credential === "session",
      bearer: ctx.viewer?.credential === "bearer",
      authenticated: ctx.viewer !== null,
    }),
  },
  prisma: {
    client: (ctx) => ctx.db,
    dmmf: getDatamodel(),
    filterConnectionTotalCount: true,
    onUnusedQuery: null,
  },
  relay: {
    clientMutationId: "omit",
    cursorType: "String",
  },
});
