import type { Response } from "express";
import { getOperationAST } from "graphql";
import type { Plugin } from "graphql-yoga";
import { noteWriter, type ReadRouting } from "../adapters/read-replica.js";
import type { GraphQLContext } from "./context.js";

/**
 * GraphQL reads on the read replica (docs/decisions.md "Read replica"): a query's
 * resolvers get `ctx.db` from `reads.reader` (the replica, or the primary for a caller whose own
 * write it may not hold yet); a mutation keeps the primary and notes its caller as a writer, whose
 * response then ends only once the write is marked. Subscriptions keep the primary.
 */
export function useReadReplica(reads: ReadRouting | undefined): Plugin<GraphQLContext & { res?: Response }>[] {
  if (!reads?.replicated) return [];
  return [
    {
      async onExecute({ args, extendContext }) {
        const ctx = args.contextValue;
        const op = getOperationAST(args.document, args.operationName)?.operation;
        const accountId = ctx.viewer?.accountId ?? null;
        if (op === "query") extendContext({ db: await reads.reader(accountId) });
        else if (op === "mutation" && accountId !== null && ctx.res) noteWriter(ctx.res, accountId);
      },
    },
  ];
}
