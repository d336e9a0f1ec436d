import { randomUUID } from "node:crypto";
import fc from "fast-check";
import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLOutputType,
  type GraphQLSchema,
  getNamedType,
  getNullableType,
  getOperationAST,
  getVariableValues,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  parse,
  validate,
  visit,
} from "graphql";
import { hasUnstorableText, unstorable } from "./json-text.js";
import { anyText, unstorableText } from "./zod-fuzz.js";

/**
 * GraphQL fuzzing over the live schema: for every root field (query, mutation, subscription), operations
 * with malformed arguments (wrong literal types, missing required ones, unknown ones, values outside the
 * ranges the schema documents, text Postgres cannot store, numbers past 32 and 64 bits), variables of
 * the wrong types, a wrong selection, excessive depth, aliases and tokens, and broken syntax. An
 * operation on a mutation or subscription field is only sent when it must be refused: graphql-js
 * (the same schema) rejects it, or it breaks a rule graphql-js does not know — a documented range,
 * the per-operation limits (graphql/limits.ts), unstorable text — marked `refusedByConstruction`.
 */

export type OperationKind = "query" | "mutation" | "subscription";

export interface FuzzOperation {
  kind: OperationKind;
  field: GraphQLField<unknown, unknown>;
}

/** Every root field of the schema. */
export function operationsOf(schema: GraphQLSchema): FuzzOperation[] {
  const roots: [OperationKind, ReturnType<GraphQLSchema["getQueryType"]>][] = [
    ["query", schema.getQueryType()],
    ["mutation", schema.getMutationType()],
    ["subscription", schema.getSubscriptionType()],
  ];
  return roots.flatMap(([kind, type]) => Object.values(type?.getFields() ?? {}).map((field) => ({ kind, field })));
}

export type Transport = "post" | "get" | "sse";

export interface GraphQLCase {
  query: unknown;
  variables?: unknown;
  operationName?: unknown;
  transport: Transport;
  labels: string[];
  /** refused by a rule graphql-js does not check (a documented range, a limit, unstorable text) */
  refusedByConstruction: boolean;
}

/** The limits of graphql/limits.ts the generated operations go past. */
const LIMITS = { depth: 10, aliases: 20, tokens: 2_000 };

/** `lo-hi` (`1-80`, `30-80`, `1-64 characters`) or `> 0` in a description: the documented range. */
function documentedRange(description: string | null | undefined): { min: number; max: number; chars: boolean } | null {
  if (!description) return null;
  const m = /(?:^|[\s(`])(\d+)\s*-\s*(\d+)(\s*characters)?/.exec(description);
  if (m && Number(m[1]) <= Number(m[2])) return { min: Number(m[1]), max: Number(m[2]), chars: m[3] !== undefined };
  if (/>\s*0/.test(description)) return { min: 1, max: Number.POSITIVE_INFINITY, chars: false };
  return null;
}

const str = (s: string) => JSON.stringify(s);

// ---- valid literals --------------------------------------------------------------------------

/** A literal the type accepts (required input fields only); ids from `ids` for ID. */
function validLiteral(
  type: GraphQLInputType,
  ids: readonly string[],
  description?: string | null,
): fc.Arbitrary<string> {
  if (isNonNullType(type)) return validLiteral(type.ofType, ids, description);
  if (isListType(type)) return validLiteral(type.ofType, ids, description).map((v) => `[${v}]`);
  if (isEnumType(type)) return fc.constantFrom(...type.getValues().map((v) => v.name));
  if (isInputObjectType(type)) {
    const required = Object.values(type.getFields()).filter(
      (f) => isNonNullType(f.type) && f.defaultValue === undefined,
    );
    if (required.length === 0) return fc.constant("{}");
    return fc
      .tuple(...required.map((f) => validLiteral(f.type, ids, f.description).map((v) => `${f.name}: ${v}`)))
      .map((parts) => `{${parts.join(", ")}}`);
  }
  const range = documentedRange(description);
  switch (type.name) {
    case "String":
      return fc.constant(str("x".repeat(Math.max(1, range?.chars ? range.min : 1))));
    case "Int":
      return fc.constant(String(range && !range.chars ? range.min : 1));
    case "Float":
      return fc.constant("1.5");
    case "Boolean":
      return fc.constant("true");
    case "ID":
      return fc.constantFrom(...ids, randomUUID()).map(str);
    case "MicroDiem":
    case "MicroUsdc":
      return fc.constant(str("1000000"));
    case "DateTime":
      return fc.constant(str(new Date().toISOString()));
    default:
      return fc.constant("{}");
  }
}

// ---- invalid literals ------------------------------------------------------------------------

interface Bad {
  literal: string;
  label: string;
  /** graphql-js accepts it; a rule of ours must refuse it */
  byConstruction: boolean;
}

const bad =
  (label: string, byConstruction = false) =>
  (literal: string): Bad => ({ literal, label, byConstruction });

/** Literals of every other kind: graphql-js refuses them for most types (the oracle sorts the rest). */
const OTHER_KINDS = ["1", "1.5", "true", '"x"', "NOPE", "{a: 1}", "[1, 2]", "[]", "{}", '""', "$undeclared"];

/** Literals the type refuses (wrong kinds, out-of-range numbers, unknown enum values), or a rule of ours does. */
function invalidLiteral(type: GraphQLInputType, depth: number, description?: string | null): fc.Arbitrary<Bad> {
  const sources: fc.Arbitrary<Bad>[] = [fc.constantFrom(...OTHER_KINDS).map(bad("wrong kind of literal"))];
  // the inner type's own near misses (ranges, fields of an input) are where most of the cases go
  const inner = (t: GraphQLInputType, wrap = (b: Bad) => b) =>
    fc.oneof(
      { weight: 1, arbitrary: fc.oneof(...sources) },
      { weight: 4, arbitrary: invalidLiteral(t, depth + 1, description).map(wrap) },
    );
  if (isNonNullType(type)) {
    sources.push(fc.constant(bad("null for a non-null")("null")));
    return depth < 3 ? inner(type.ofType) : fc.oneof(...sources);
  }
  if (isListType(type)) {
    return depth < 3 ? inner(type.ofType, (b) => ({ ...b, literal: `[${b.literal}]` })) : fc.oneof(...sources);
  }
  if (isEnumType(type)) {
    const names = type.getValues().map((v) => v.name);
    sources.push(
      fc.constantFrom(...names.flatMap((n) => [n.toLowerCase(), str(n), `${n}X`])).map(bad("unknown enum value")),
    );
    return fc.oneof(...sources);
  }
  if (isInputObjectType(type)) {
    const fields = Object.values(type.getFields());
    const required = fields.filter((f) => isNonNullType(f.type) && f.defaultValue === undefined);
    sources.push(fc.constantFrom("{nope: 1}", "[{}]", '"{}"').map(bad("not the input object")));
    if (required.length > 0 && depth < 3) {
      sources.push(
        fc
          .constantFrom(...required)
          .chain((drop) =>
            fc
              .tuple(
                ...required
                  .filter((f) => f !== drop)
                  .map((f) => validLiteral(f.type, [], f.description).map((v) => `${f.name}: ${v}`)),
              )
              .map((others) => bad(`input without ${drop.name}`)(`{${others.join(", ")}}`)),
          ),
      );
    }
    if (depth < 3) {
      const fieldInvalid = fc.constantFrom(...fields).chain((target) =>
        fc
          .tuple(
            invalidLiteral(target.type, depth + 1, target.description),
            fc.tuple(
              ...required
                .filter((f) => f !== target)
                .map((f) => validLiteral(f.type, [], f.description).map((v) => `${f.name}: ${v}`)),
            ),
          )
          .map(([b, others]) => ({
            ...b,
            label: `${target.name}: ${b.label}`,
            literal: `{${[`${target.name}: ${b.literal}`, ...others].join(", ")}}`,
          })),
      );
      return fc.oneof({ weight: 1, arbitrary: fc.oneof(...sources) }, { weight: 4, arbitrary: fieldInvalid });
    }
    return fc.oneof(...sources);
  }
  const range = documentedRange(description);
  switch (type.name) {
    case "Int":
      sources.push(
        fc
          .constantFrom("2147483648", "-2147483649", "99999999999999999999", "1e21", "1.0", "-0.5", '"1"', "NaN")
          .map(bad("not a 32-bit integer")),
      );
      if (range && !range.chars) {
        sources.push(
          fc
            .constantFrom(range.min - 1, range.max + 1, 0, -1, 2147483647, -2147483648)
            .filter((n) => n < range.min || n > range.max)
            .map((n) => bad(`outside the documented ${range.min}-${range.max}`, true)(String(n))),
        );
      }
      break;
    case "String":
    case "ID":
      sources.push(unstorableText.map((s) => bad("unstorable text", true)(str(s))));
      sources.push(
        fc.constantFrom('"\\ud800"', '"\\u00"', '"unterminated', '"""x').map(bad("a broken string literal")),
      );
      if (range?.chars) {
        sources.push(
          fc
            .constantFrom(...(range.min > 0 ? [""] : []), "x".repeat(range.max + 1), "y".repeat(range.max * 10))
            .map((s) => bad(`outside the documented ${range.min}-${range.max} characters`, true)(str(s))),
        );
      }
      break;
    case "MicroDiem":
    case "MicroUsdc":
      sources.push(
        fc.constantFrom('"1.5"', '"abc"', '""', '" 1"', '"1e21"', '"0x10"', "1.5", "true").map(bad("not micro-units")),
      );
      sources.push(
        fc
          .constantFrom('"9223372036854775808"', '"99999999999999999999999999"', '"-9223372036854775809"')
          .map(bad("past 64 bits", true)),
      );
      if (range) sources.push(fc.constantFrom('"0"', '"-1"', '"-1000000"', "0").map(bad("not > 0", true)));
      break;
    case "Boolean":
      sources.push(fc.constantFrom('"true"', "1", "TRUE", "null").map(bad("not a boolean")));
      break;
    case "DateTime":
      sources.push(fc.constantFrom('"yesterday"', '"2025-13-45"', "1", '""').map(bad("not an instant")));
      break;
  }
  return fc.oneof(...sources);
}

/** JSON variable values the type refuses, or a rule of ours does. */
function invalidVariable(type: GraphQLInputType, description?: string | null): fc.Arbitrary<Bad & { value: unknown }> {
  const junk = fc
    .constantFrom<unknown>(1, 1.5, true, "x", {}, [], [1], { a: 1 }, 1e21, 2 ** 31, "1e21", "", -0)
    .map((value) => ({ ...bad("wrong JSON type")(""), value }));
  const sources: fc.Arbitrary<Bad & { value: unknown }>[] = [junk];
  if (isNonNullType(type)) sources.push(fc.constant({ ...bad("null for a non-null")(""), value: null }));
  const named = getNullableType(type);
  if (!isListType(named) && !isInputObjectType(named) && !isEnumType(named)) {
    if (named.name === "String" || named.name === "ID") {
      sources.push(unstorableText.map((value) => ({ ...bad("unstorable text", true)(""), value })));
    }
    const range = documentedRange(description);
    if (named.name === "Int" && range && !range.chars) {
      sources.push(
        fc
          .constantFrom(range.min - 1, range.max + 1)
          .map((value) => ({ ...bad("outside the documented range", true)(""), value })),
      );
    }
  }
  if (isInputObjectType(named)) {
    const fields = Object.values(named.getFields());
    sources.push(
      fc.constantFrom(...fields).chain((f) =>
        invalidVariable(f.type, f.description).map((b) => ({
          ...b,
          label: `${f.name}: ${b.label}`,
          value: { [f.name]: b.value },
        })),
      ),
    );
  }
  return fc.oneof(...sources);
}

// ---- operations ------------------------------------------------------------------------------

/** ` { __typename }` for a composite type, nothing for a leaf. */
function selectionOf(type: GraphQLOutputType): string {
  return isLeafType(getNamedType(type)) ? "" : " { __typename }";
}

/** A selection `levels` fields deep through object fields without required arguments, if the type allows it. */
function deepSelection(type: GraphQLOutputType, levels: number): string | null {
  let current = getNamedType(type);
  const names: string[] = [];
  for (let i = 0; i < levels; i++) {
    if (!isObjectType(current)) return null;
    const next = Object.values(current.getFields()).find(
      (f) =>
        !isLeafType(getNamedType(f.type)) &&
        f.args.every((a) => !isNonNullType(a.type) || a.defaultValue !== undefined),
    );
    if (!next) return null;
    names.push(next.name);
    current = getNamedType(next.type);
  }
  return names.reduceRight((inner, name) => `${name} {${inner}}`, " __typename ");
}

interface Parts {
  args: string[];
  varDefs: string[];
  variables: Record<string, unknown>;
  selection: string;
  labels: string[];
  byConstruction: boolean;
}

function argumentArbitraries(field: GraphQLField<unknown, unknown>, ids: readonly string[]) {
  return field.args.map((a) => ({
    arg: a,
    valid: validLiteral(a.type, ids, a.description ?? field.description),
    required: isNonNullType(a.type) && a.defaultValue === undefined,
  }));
}

function render(kind: OperationKind, field: string, p: Parts, alias = "", name = ""): string {
  const vars = p.varDefs.length > 0 ? `(${p.varDefs.join(", ")})` : "";
  const args = p.args.length > 0 ? `(${p.args.join(", ")})` : "";
  return `${kind}${name ? ` ${name}` : ""}${vars} { ${alias}${field}${args}${p.selection} }`;
}

/** The valid arguments of a field: required ones always, optional ones sometimes. */
function baseArgs(
  field: GraphQLField<unknown, unknown>,
  ids: readonly string[],
): fc.Arbitrary<Map<GraphQLArgument, string>> {
  const parts = argumentArbitraries(field, ids).map(({ arg, valid, required }) =>
    required
      ? valid.map((v) => [arg, v] as const)
      : fc.option(
          valid.map((v) => [arg, v] as const),
          { nil: undefined },
        ),
  );
  return fc
    .tuple(...parts)
    .map((entries) => new Map(entries.filter((e): e is readonly [GraphQLArgument, string] => e !== undefined)));
}

const argList = (m: Map<GraphQLArgument, string>) => [...m].map(([a, v]) => `${a.name}: ${v}`);

/**
 * Whether the server would execute the case: graphql-js parses and validates the document against the
 * schema, the operation is found, the variables coerce, no string holds text Postgres cannot store,
 * a GET carries a query, and nothing was marked as refused by construction.
 */
export function graphqlAccepts(schema: GraphQLSchema, c: GraphQLCase): boolean {
  if (c.refusedByConstruction || typeof c.query !== "string") return false;
  if (c.operationName !== undefined && c.operationName !== null && typeof c.operationName !== "string") return false;
  if (
    c.variables !== undefined &&
    c.variables !== null &&
    (typeof c.variables !== "object" || Array.isArray(c.variables))
  ) {
    return false;
  }
  let doc: ReturnType<typeof parse>;
  try {
    doc = parse(c.query);
    // graphql-js's subscription rule evaluates @skip/@include and throws on a bad argument there
    if (validate(schema, doc).length > 0) return false;
  } catch {
    return false;
  }
  let unstorableLiteral = false;
  visit(doc, {
    StringValue(node) {
      if (unstorable(node.value)) unstorableLiteral = true;
    },
  });
  if (unstorableLiteral || hasUnstorableText(c.variables) || hasUnstorableText(c.operationName)) return false;
  const op = getOperationAST(doc, typeof c.operationName === "string" ? c.operationName : undefined);
  if (!op) return false;
  if (c.transport === "get" && op.operation !== "query") return false;
  const vars = getVariableValues(schema, op.variableDefinitions ?? [], (c.variables ?? {}) as Record<string, unknown>);
  return vars.errors === undefined;
}

/**
 * Every way this generator breaks an operation on `op`: on a mutation or subscription field only
 * what the server must refuse (`graphqlAccepts` false). `ids`: real ids of the caller's own objects
 * for ID arguments, so a refusal has to come from what was fuzzed rather than from an unknown id.
 */
export function operationArbitrary(
  schema: GraphQLSchema,
  op: FuzzOperation,
  ids: readonly string[],
): fc.Arbitrary<GraphQLCase> {
  const { kind, field } = op;
  const selection = selectionOf(field.type);
  const base = baseArgs(field, ids);
  const transport: fc.Arbitrary<Transport> =
    kind === "query"
      ? fc.constantFrom("post", "post", "get")
      : kind === "subscription"
        ? fc.constantFrom("sse", "post")
        : fc.constantFrom("post", "post", "post", "get");
  const doc = (p: Parts, label: string, extra: Partial<GraphQLCase> = {}) =>
    transport.map(
      (t): GraphQLCase => ({
        query: render(kind, field.name, p),
        variables: Object.keys(p.variables).length > 0 ? p.variables : undefined,
        transport: t,
        labels: [label, ...p.labels],
        refusedByConstruction: p.byConstruction,
        ...extra,
      }),
    );
  const plain = (args: string[], labels: string[] = [], byConstruction = false): Parts => ({
    args,
    varDefs: [],
    variables: {},
    selection,
    labels,
    byConstruction,
  });

  const families: fc.Arbitrary<GraphQLCase>[] = [];

  // an argument replaced by a literal it refuses
  if (field.args.length > 0) {
    families.push(
      fc
        .tuple(base, fc.constantFrom(...field.args))
        .chain(([args, target]) =>
          invalidLiteral(target.type, 0, target.description ?? field.description).map((b) => {
            const m = new Map(args);
            m.set(target, b.literal);
            return plain(argList(m), [`${target.name}: ${b.label}`], b.byConstruction);
          }),
        )
        .chain((p) => doc(p, "argument")),
    );
    // the same through a variable of the argument's own type
    families.push(
      fc
        .tuple(base, fc.constantFrom(...field.args))
        .chain(([args, target]) =>
          invalidVariable(target.type, target.description ?? field.description).map((b): Parts => {
            const m = new Map(args);
            m.set(target, "$v");
            return {
              args: argList(m),
              varDefs: [`$v: ${String(target.type)}`],
              variables: { v: b.value },
              selection,
              labels: [`$v for ${target.name}: ${b.label}`],
              byConstruction: b.byConstruction,
            };
          }),
        )
        .chain((p) => doc(p, "variable")),
    );
    // a variable declared with another type, or not declared
    families.push(
      fc
        .tuple(
          base,
          fc.constantFrom(...field.args),
          fc.constantFrom("Boolean", "Int", "[String]", "Nope", "String!", "ID"),
        )
        .chain(([args, target, declared]) => {
          const m = new Map(args);
          m.set(target, "$v");
          return doc(
            {
              args: argList(m),
              varDefs: [`$v: ${declared}`],
              variables: { v: null },
              selection,
              labels: [`$v declared ${declared}`],
              byConstruction: false,
            },
            "variable type",
          );
        }),
    );
  }
  const required = field.args.filter((a) => isNonNullType(a.type) && a.defaultValue === undefined);
  if (required.length > 0) {
    families.push(
      fc.tuple(base, fc.constantFrom(...required)).chain(([args, drop]) => {
        const m = new Map(args);
        m.delete(drop);
        return doc(plain(argList(m), [`without ${drop.name}`]), "missing argument");
      }),
    );
  }
  // unknown or repeated arguments
  families.push(
    fc
      .tuple(
        base,
        fc.constantFrom("nope: 1", 'id: "x"', "first: 1", "input: {}", ...field.args.map((a) => `${a.name}: null`)),
      )
      .chain(([args, extra]) => {
        const list = argList(args);
        return doc(plain([...list, extra]), `extra argument ${extra}`);
      }),
  );
  // a wrong selection
  families.push(
    fc
      .tuple(base, fc.constantFrom(selection ? "" : " { __typename }", " { nope }", " { }", " { __typename(x: 1) }"))
      .chain(([args, sel]) => doc({ ...plain(argList(args)), selection: sel }, `selection "${sel}"`)),
  );
  // past the depth limit: through object fields if the type goes that deep, else unknown ones
  families.push(
    fc.tuple(base, fc.integer({ min: LIMITS.depth + 1, max: 60 })).chain(([args, levels]) => {
      const deep =
        deepSelection(field.type, levels) ?? Array.from({ length: levels }).reduce<string>((s) => `a { ${s} }`, "b");
      return doc({ ...plain(argList(args), [`${levels} levels`], true), selection: ` { ${deep} }` }, "depth");
    }),
  );
  // past the alias limit
  families.push(
    fc.tuple(base, fc.integer({ min: LIMITS.aliases + 1, max: 80 })).chain(([args, n]) => {
      const call = `${field.name}${args.size > 0 ? `(${argList(args).join(", ")})` : ""}${selection}`;
      const body = Array.from({ length: n }, (_, i) => `a${i}: ${call}`).join(" ");
      return transport.map(
        (t): GraphQLCase => ({
          query: `${kind} { ${body} }`,
          transport: t,
          labels: [`${n} aliases`],
          refusedByConstruction: true,
        }),
      );
    }),
  );
  // past the token limit
  families.push(
    fc.tuple(base, fc.integer({ min: LIMITS.tokens + 1, max: 6_000 })).chain(([args, n]) => {
      const filler = Array.from({ length: n }, () => "__typename").join(" ");
      const inner = selection ? ` { ${filler} }` : "";
      const root = selection ? "" : ` ${filler}`;
      return transport.map(
        (t): GraphQLCase => ({
          query: `${kind} { ${field.name}${args.size > 0 ? `(${argList(args).join(", ")})` : ""}${inner}${root} }`,
          transport: t,
          labels: [`${n} tokens`],
          refusedByConstruction: true,
        }),
      );
    }),
  );
  // broken syntax, from a valid document or from nothing
  families.push(
    base.chain((args) => {
      const text = render(kind, field.name, plain(argList(args)));
      return fc
        .oneof(
          fc.integer({ min: 1, max: Math.max(1, text.length - 1) }).map((n) => text.slice(0, n)),
          fc
            .tuple(fc.nat(text.length), fc.constantFrom("{", "}", "(", ")", ":", "$", '"', "!", "@", "...", "\\u0000"))
            .map(([i, c]) => `${text.slice(0, i)}${c}${text.slice(i)}`),
          anyText(60),
          fc.constantFrom(
            "",
            " ",
            "{",
            "}",
            "query",
            "mutation {",
            "subscription {}",
            "{ ... }",
            "fragment F on Query { __typename }",
          ),
        )
        .chain((q) =>
          transport.map(
            (t): GraphQLCase => ({ query: q, transport: t, labels: ["broken syntax"], refusedByConstruction: false }),
          ),
        );
    }),
  );
  // the wrong operation type, an unknown operation name, odd request fields
  const other = kind === "query" ? "mutation" : "query";
  families.push(
    base.chain((args) => {
      const call = `${field.name}${args.size > 0 ? `(${argList(args).join(", ")})` : ""}${selection}`;
      return fc.oneof(
        doc(plain(argList(args)), "operation", { query: `${other} { ${call} }`, labels: [`on ${other}`] }),
        doc(plain(argList(args)), "operation", {
          query: `${kind} A { ${call} } ${kind} B { ${call} }`,
          labels: ["two operations, no name"],
        }),
        fc.constantFrom<unknown>("C", 1, {}, ["A"], "\u0000").map(
          (name): GraphQLCase => ({
            query: `${kind} A { ${call} }`,
            operationName: name,
            transport: "post",
            labels: [`operationName ${JSON.stringify(name)}`],
            refusedByConstruction: typeof name === "string" && unstorable(name),
          }),
        ),
        fc.constantFrom<unknown>("x", [1], 1, true).map(
          (variables): GraphQLCase => ({
            query: render(kind, field.name, { ...plain(argList(args)), varDefs: ["$v: String"] }),
            variables,
            transport: "post",
            labels: [`variables ${JSON.stringify(variables)}`],
            refusedByConstruction: false,
          }),
        ),
        fc.constantFrom<unknown>(1, null, ["{ apiVersion }"], { kind: "Document" }).map(
          (query): GraphQLCase => ({
            query,
            transport: "post",
            labels: [`query ${JSON.stringify(query)}`],
            refusedByConstruction: false,
          }),
        ),
        fc
          .constantFrom('@skip(if: "yes")', "@include", "@nope", "@skip(if: true) @skip(if: true)", "@deprecated")
          .chain((d) =>
            doc(plain(argList(args)), "directive", {
              query: `${kind} { ${field.name}${args.size > 0 ? `(${argList(args).join(", ")})` : ""} ${d}${selection} }`,
              labels: [d],
            }),
          ),
      );
    }),
  );
  const all = fc.oneof(...families);
  return kind === "query" ? all : all.filter((c) => !graphqlAccepts(schema, c));
}
