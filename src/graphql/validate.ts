import type { z } from "zod";
import { parseWith } from "../contract/parse.js";

/**
 * The GraphQL side of "one validation": a field's arguments are checked by the contract's zod
 * schema (src/contract) before its resolver runs, and a refusal is the DomainError the REST routes
 * throw for the same schema (contract/parse.ts), so a client sees `extensions.code` invalid_request,
 * the same message and `details.field`. The resolver gets the parsed arguments (bounds checked,
 * defaults applied, ids lower-cased) over the ones the schema does not name (enums GraphQL checked).
 *
 *   resolve: withArgs(recentClearsArgs, (_root, args, ctx) => ctx.services.market.recentClears(args.limit))
 */
export function withArgs<S extends z.AnyZodObject, Root, Args extends object, Ctx, Info, R>(
  schema: S,
  resolve: (root: Root, args: Omit<Args, keyof z.infer<S>> & z.infer<S>, ctx: Ctx, info: Info) => R,
): (root: Root, args: Args, ctx: Ctx, info: Info) => R {
  return (root, args, ctx, info) => resolve(root, { ...args, ...parseWith(schema, args) }, ctx, info);
}

/**
 * `withArgs` for a mutation's `input` object: `input` is parsed by the contract's schema of the REST
 * body it mirrors (or the GraphQL twin beside it), so a refusal names the same field (`label`, not
 * `input.label`) and says what REST says. Fields the schema does not name keep GraphQL's values.
 *
 *   resolve: withInput(registerUpstreamKeyBody, (_root, { input }, ctx) => ctx.services.supply.registerUpstreamKey(…))
 */
export function withInput<S extends z.AnyZodObject, Root, Input extends object, Ctx, Info, R>(
  schema: S,
  resolve: (root: Root, args: { input: Omit<Input, keyof z.infer<S>> & z.infer<S> }, ctx: Ctx, info: Info) => R,
): (root: Root, args: { input: Input }, ctx: Ctx, info: Info) => R {
  return (root, args, ctx, info) =>
    resolve(root, { input: { ...args.input, ...parseWith(schema, args.input) } }, ctx, info);
}
