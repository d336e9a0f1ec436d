import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { z } from "zod";
import { nested, RawJson, toJsonText, unstorable } from "./json-text.js";

/**
 * Hostile values derived from the contract's zod schemas (src/contract): for a schema, a valid
 * sample to mutate from, values the schema rejects (wrong types, out-of-range numbers, strings of
 * the wrong length or pattern, unknown enum values), and the body-level mutations (a required field
 * missing, one field wrong, text Postgres cannot store, extra fields). Whether a value is rejected is
 * decided by the schema itself on the value the server will parse (`accepts`), so a new field or a
 * tightened rule is fuzzed without touching this file.
 */

type Schema = z.ZodTypeAny;
const K = z.ZodFirstPartyTypeKind;

/** A generated value with what was done to it, for the failure report. */
export interface Labelled {
  label: string;
  value: unknown;
}

/** The OpenAPI metadata the contract adds with `.openapi()`: ranges and formats zod itself may not check. */
interface Metadata {
  example?: unknown;
  type?: string;
  minimum?: number;
  maximum?: number;
  format?: string;
  pattern?: string;
}

interface Def {
  typeName?: string;
  openapi?: { metadata?: Metadata };
  innerType?: Schema;
  schema?: Schema;
  in?: Schema;
  type?: Schema;
  getter?: () => Schema;
  checks?: { kind: string; value?: number; inclusive?: boolean }[];
  value?: unknown;
  values?: unknown;
  options?: Schema[];
  minLength?: { value: number } | null;
  maxLength?: { value: number } | null;
  exactLength?: { value: number } | null;
}

const defOf = (s: Schema) => s._def as Def;

/** The schema under its optional/nullable/default/effects/pipeline wrappers, and their OpenAPI metadata. */
export function unwrap(schema: Schema): { inner: Schema; example?: unknown; metadata: Metadata } {
  let s = schema;
  const metadata: Metadata = {};
  for (let i = 0; i < 20; i++) {
    const def = defOf(s);
    for (const [k, v] of Object.entries(def.openapi?.metadata ?? {})) {
      if ((metadata as Record<string, unknown>)[k] === undefined) (metadata as Record<string, unknown>)[k] = v;
    }
    const next =
      def.typeName === K.ZodOptional ||
      def.typeName === K.ZodNullable ||
      def.typeName === K.ZodDefault ||
      def.typeName === K.ZodCatch ||
      def.typeName === K.ZodReadonly
        ? def.innerType
        : def.typeName === K.ZodEffects
          ? def.schema
          : def.typeName === K.ZodPipeline
            ? def.in
            : def.typeName === K.ZodBranded
              ? def.type
              : def.typeName === K.ZodLazy
                ? def.getter?.()
                : undefined;
    if (!next) break;
    s = next;
  }
  return { inner: s, example: metadata.example, metadata };
}

/** What the server's JSON parser hands the schema for `value` (RawJson spliced, undefined dropped). */
export function asParsed(value: unknown): unknown {
  return value === undefined ? undefined : JSON.parse(toJsonText(value));
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The contract's OpenAPI metadata holds for a parsed value: `type: integer`, `minimum`, `maximum`
 * on numbers, `format: uuid` and `pattern` on strings, into object fields and array elements. The
 * contract documents some ranges only there (an offer's price is checked in the service), and they
 * are the contract all the same.
 */
function metadataAccepts(schema: Schema, value: unknown): boolean {
  if (value === undefined || value === null) return true;
  const { inner, metadata: m } = unwrap(schema);
  if (typeof value === "number") {
    if (m.type === "integer" && !Number.isInteger(value)) return false;
    if (m.minimum !== undefined && !(value >= m.minimum)) return false;
    if (m.maximum !== undefined && !(value <= m.maximum)) return false;
  }
  if (typeof value === "string") {
    if (m.format === "uuid" && !UUID.test(value)) return false;
    if (m.pattern !== undefined && !new RegExp(m.pattern).test(value)) return false;
  }
  const kind = defOf(inner).typeName;
  if (kind === K.ZodObject && typeof value === "object" && !Array.isArray(value)) {
    const shape = (inner as z.AnyZodObject).shape as Record<string, Schema>;
    return Object.entries(shape).every(([k, field]) => metadataAccepts(field, (value as Record<string, unknown>)[k]));
  }
  if (kind === K.ZodArray && Array.isArray(value)) {
    return value.every((v) => metadataAccepts(defOf(inner).type as Schema, v));
  }
  return true;
}

/** The contract accepts `value` as the server will see it: the zod schema and its OpenAPI metadata. */
export function accepts(schema: Schema, value: unknown): boolean {
  let parsed: unknown;
  try {
    parsed = asParsed(value);
  } catch {
    return false;
  }
  return schema.safeParse(parsed).success && metadataAccepts(schema, parsed);
}

/** A field the schema lets be absent. */
export const isOptional = (schema: Schema) => schema.safeParse(undefined).success;

function checks(s: Schema): {
  min?: number;
  max?: number;
  minExclusive: boolean;
  maxExclusive: boolean;
  kinds: Set<string>;
} {
  const out = {
    min: undefined as number | undefined,
    max: undefined as number | undefined,
    minExclusive: false,
    maxExclusive: false,
    kinds: new Set<string>(),
  };
  for (const c of defOf(s).checks ?? []) {
    out.kinds.add(c.kind);
    if (c.kind === "min" || c.kind === "length") {
      out.min = c.value;
      out.minExclusive = c.inclusive === false;
    }
    if (c.kind === "max" || c.kind === "length") {
      out.max = c.value;
      out.maxExclusive = c.inclusive === false;
    }
  }
  return out;
}

const NONE = Symbol("none");

function sampleOf(schema: Schema, depth: number, ids: readonly string[]): unknown {
  if (depth > 6) return NONE;
  const { inner, example, metadata } = unwrap(schema);
  const def = defOf(inner);
  const candidates: unknown[] = example === undefined ? [] : [example];
  switch (def.typeName) {
    case K.ZodString: {
      const c = checks(inner);
      if (c.kinds.has("uuid") || metadata.format === "uuid") candidates.push(...ids);
      candidates.push(
        randomUUID(),
        new Date().toISOString(),
        `0x${"1".repeat(40)}`,
        "1.000000",
        "42",
        "a".repeat(Math.max(1, c.min ?? 1)),
      );
      break;
    }
    case K.ZodNumber: {
      const c = checks(inner);
      if (metadata.minimum !== undefined) candidates.push(metadata.minimum);
      if (c.min !== undefined) candidates.push(c.minExclusive ? c.min + 1 : c.min);
      candidates.push(1, 0);
      if (c.max !== undefined) candidates.push(c.max);
      break;
    }
    case K.ZodBoolean:
      candidates.push(false);
      break;
    case K.ZodLiteral:
      candidates.push(def.value);
      break;
    case K.ZodEnum:
      candidates.push((def.values as unknown[])[0]);
      break;
    case K.ZodNativeEnum:
      candidates.push(Object.values(def.values as object)[0]);
      break;
    case K.ZodNull:
    case K.ZodUnknown:
    case K.ZodAny:
      candidates.push(null);
      break;
    case K.ZodRecord:
      candidates.push({});
      break;
    case K.ZodArray: {
      const el = sampleOf(def.type as Schema, depth + 1, ids);
      if (el === NONE) return NONE;
      const n = Math.max(1, def.exactLength?.value ?? def.minLength?.value ?? 1);
      candidates.push(Array.from({ length: n }, () => el));
      break;
    }
    case K.ZodObject: {
      const obj: Record<string, unknown> = {};
      for (const [k, field] of Object.entries((inner as z.AnyZodObject).shape as Record<string, Schema>)) {
        if (isOptional(field)) continue;
        const v = sampleOf(field, depth + 1, ids);
        if (v === NONE) return NONE;
        obj[k] = v;
      }
      candidates.push(obj);
      break;
    }
    case K.ZodUnion:
    case K.ZodDiscriminatedUnion:
      for (const option of def.options ?? []) {
        const v = sampleOf(option, depth + 1, ids);
        if (v !== NONE) candidates.push(v);
      }
      break;
  }
  return candidates.find((c) => accepts(schema, c)) ?? NONE;
}

/**
 * A value the contract accepts (required fields only), or undefined when none could be derived.
 * A uuid field takes the first of `ids` that fits (real ids make a refusal depend on the fuzzed
 * field alone, not on an unknown id).
 */
export function validSample(schema: Schema, ids: readonly string[] = []): unknown {
  const v = sampleOf(schema, 0, ids);
  return v === NONE ? undefined : v;
}

// ---- hostile scalars -------------------------------------------------------------------------

/** Any UTF-16 code units, lone surrogates and NUL included (fast-check's own units are well formed). */
export function anyText(maxLength = 40): fc.Arbitrary<string> {
  return fc
    .array(
      fc.oneof(
        fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
        fc.string({ unit: "binary", maxLength: 3 }),
        fc.constantFrom("\u0000", "\ud800", "\udfff", "🚀", "e\u0301", "\u202e", "\ufeff", "\u00a0", "\r\n"),
      ),
      { maxLength },
    )
    .map((parts) => parts.join(""));
}

/**
 * Text Postgres cannot store: a NUL or a lone surrogate somewhere in it. Checked, since a surrogate
 * spliced between random text (or shrunk next to one) can find its pair and make a valid character.
 */
export const unstorableText: fc.Arbitrary<string> = fc
  .oneof(
    fc.constantFrom("\u0000", "ab\u0000cd", "\ud800", "x\udc00", "\udbff", "a\ud83d", "\u0000\ud800", "🚀\udc00"),
    fc
      .tuple(anyText(12), fc.constantFrom("\u0000", "\ud800", "\udc00", "\udbff"), anyText(12))
      .map(([a, bad, b]) => `${a}${bad}${b}`),
  )
  .filter(unstorable);

/** Storable but unusual text: unicode, injection-looking strings, very long strings. */
export const oddText: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 30 }),
  fc.constantFrom(
    "🚀",
    "\u202eevil",
    "e\u0301",
    "\ufeffbom",
    "'; DROP TABLE accounts; --",
    "{{7*7}}#{7*7}",
    "../../etc/passwd",
    "%00",
    "%ZZ",
    "\r\nX-Injected: 1",
    "<script>alert(1)</script>",
    " ",
  ),
  fc.integer({ min: 1_000, max: 70_000 }).map((n) => "x".repeat(n)),
);

/** JSON numbers JSON.stringify cannot write, and values of every other type. */
const JUNK: unknown[] = [
  null,
  true,
  false,
  0,
  1,
  -1,
  1.5,
  1e21,
  -1e21,
  2 ** 53 + 2,
  1.7976931348623157e308,
  Number.MIN_VALUE,
  "",
  " ",
  "x",
  "NaN",
  "Infinity",
  "-Infinity",
  "-0",
  "1e21",
  "0x1F",
  " 42 ",
  "null",
  "true",
  "[]",
  "{}",
  [],
  [null],
  ["x"],
  [[[]]],
  {},
  { a: 1 },
  new RawJson("-0"),
  new RawJson("1e400"),
  new RawJson("-1e400"),
  new RawJson("123456789012345678901234567890"),
  new RawJson("1E2"),
  new RawJson("4.0"),
  new RawJson("1e-400"),
];

/** Type-specific near misses for one schema (boundaries, wrong patterns, wrong enum spellings). */
function nearMisses(schema: Schema): fc.Arbitrary<unknown>[] {
  const { inner } = unwrap(schema);
  const def = defOf(inner);
  const out: fc.Arbitrary<unknown>[] = [];
  switch (def.typeName) {
    case K.ZodString: {
      const c = checks(inner);
      if (c.max !== undefined) {
        out.push(fc.integer({ min: c.max + 1, max: c.max * 4 + 64 }).map((n) => "a".repeat(n)));
        out.push(fc.string({ unit: "grapheme", minLength: c.max + 1, maxLength: c.max + 40 }));
      }
      if (c.min !== undefined && c.min > 0) out.push(fc.constantFrom("", "a".repeat(c.min - 1)));
      if (c.kinds.has("uuid")) {
        out.push(
          fc
            .uuid()
            .chain((u) =>
              fc.constantFrom(
                `${u}x`,
                u.replaceAll("-", ""),
                `{${u}}`,
                u.slice(1),
                `urn:uuid:${u}`,
                `${u.slice(0, -1)}g`,
              ),
            ),
        );
      }
      if (c.kinds.has("regex") || c.kinds.has("datetime") || c.kinds.has("uuid")) out.push(anyText(24), oddText);
      break;
    }
    case K.ZodNumber: {
      const c = checks(inner);
      const { metadata: m } = unwrap(schema);
      if (m.minimum !== undefined) out.push(fc.constantFrom(m.minimum - 1, 0, -1, new RawJson("-0")));
      if (m.maximum !== undefined) out.push(fc.constantFrom(m.maximum + 1, 2 ** 31, new RawJson("1e400")));
      if (m.type === "integer") out.push(fc.constantFrom(1.5, new RawJson("1.0000000001")));
      if (c.kinds.has("int")) out.push(fc.constantFrom(0.5, 1.5, 30.000001, new RawJson("1.0000000001")));
      if (c.min !== undefined) out.push(fc.constantFrom(c.min - 1, c.min - 0.5, -1e21, new RawJson("-0")));
      if (c.max !== undefined) out.push(fc.constantFrom(c.max + 1, c.max + 0.5, 1e21, 2 ** 31, 2 ** 53));
      out.push(fc.integer({ min: -(2 ** 31), max: 2 ** 31 }), fc.double({ noNaN: true, noDefaultInfinity: true }));
      break;
    }
    case K.ZodEnum:
    case K.ZodLiteral: {
      const values = def.typeName === K.ZodEnum ? (def.values as unknown[]) : [def.value];
      const strings = values.map(String);
      out.push(
        fc.constantFrom(
          ...strings.flatMap((v) => [v.toUpperCase(), ` ${v}`, `${v} `, `${v}\u0000`, v.slice(0, -1) || "?"]),
        ),
        anyText(12),
      );
      if (values.some((v) => typeof v === "number")) out.push(fc.constantFrom(...strings));
      break;
    }
    case K.ZodBoolean:
      out.push(fc.constantFrom("true", "false", 1, 0, "yes"));
      break;
    case K.ZodArray: {
      const el = def.type as Schema;
      out.push(invalidValues(el, 1).map((v) => [v]));
      if ((def.minLength?.value ?? 0) > 0) out.push(fc.constant([]));
      break;
    }
    case K.ZodObject:
    case K.ZodRecord:
      out.push(fc.constantFrom<unknown>([{}], "{}", [["a", 1]]));
      break;
  }
  return out;
}

/**
 * Values the schema rejects as the server parses them: junk of every type plus the near misses of
 * its own type. Empty only for a schema that accepts anything (z.unknown()): then the constant null
 * is produced and filtered away by the caller's `accepts` check.
 */
export function invalidValues(schema: Schema, depth = 0): fc.Arbitrary<unknown> {
  const sources: fc.Arbitrary<unknown>[] = [fc.constantFrom(...JUNK), fc.jsonValue({ maxDepth: 2 })];
  if (depth < 2) sources.push(...nearMisses(schema));
  return fc.oneof(...sources).filter((v) => !accepts(schema, v));
}

/** True when some value is rejected (z.unknown() and the like reject nothing). */
export function rejectsSomething(schema: Schema): boolean {
  return JUNK.some((v) => !accepts(schema, v));
}

// ---- body-level mutations --------------------------------------------------------------------

/** `obj` with `key` set as an own enumerable member (works for `__proto__` too). */
export function withMember(obj: object, key: string, value: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj))
    Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
  return out;
}

function without(obj: Record<string, unknown>, key: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) if (k !== key) out[k] = v;
  return out;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof RawJson);

/**
 * One mutation of `base` (a value the schema accepts) per arbitrary: the whole value replaced by a
 * rejected one; for objects each field missing, each field replaced by a rejected value (recursively,
 * into nested objects and the first array element), and each string field given unstorable text.
 */
export function mutations(
  schema: Schema,
  base: unknown,
  ids: readonly string[] = [],
  path = "",
  depth = 0,
): fc.Arbitrary<Labelled>[] {
  const where = path || "body";
  const out: fc.Arbitrary<Labelled>[] = [];
  if (rejectsSomething(schema)) {
    out.push(invalidValues(schema).map((value) => ({ label: `${where}: rejected value`, value })));
  }
  const { inner } = unwrap(schema);
  const kind = defOf(inner).typeName;
  if (kind === K.ZodString) {
    out.push(unstorableText.map((value) => ({ label: `${where}: unstorable text`, value })));
  }
  if (depth >= 3) return out;
  if (kind === K.ZodObject && isPlainObject(base)) {
    for (const [key, field] of Object.entries((inner as z.AnyZodObject).shape as Record<string, Schema>)) {
      const p = path ? `${path}.${key}` : key;
      if (!isOptional(field)) out.push(fc.constant({ label: `${p}: missing`, value: without(base, key) }));
      const fieldBase = key in base ? base[key] : validSample(field, ids);
      for (const m of mutations(field, fieldBase, ids, p, depth + 1)) {
        out.push(m.map((x) => ({ label: x.label, value: withMember(base, key, x.value) })));
      }
    }
  }
  if (kind === K.ZodArray && Array.isArray(base) && base.length > 0) {
    for (const m of mutations(defOf(inner).type as Schema, base[0], ids, `${path}.0`, depth + 1)) {
      out.push(m.map((x) => ({ label: x.label, value: [x.value, ...base.slice(1)] })));
    }
  }
  return out;
}

/** Object keys a parser or a prototype might mind. */
export const oddKey: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "__proto__",
    "constructor",
    "prototype",
    "",
    "$where",
    "a.b",
    "0",
    "a\u0000",
    "\ud800",
    "x".repeat(5_000),
  ),
  anyText(16),
);

/** Extra members: odd keys with JSON values (some of them hostile). */
export const extraMembers: fc.Arbitrary<[string, unknown][]> = fc.array(
  fc.tuple(oddKey, fc.oneof(fc.jsonValue({ maxDepth: 2 }), unstorableText, oddText, fc.constantFrom(...JUNK))),
  { minLength: 1, maxLength: 4 },
);

/** Nesting past the parser's bound (64 levels), up to thousands deep. */
export const tooDeep: fc.Arbitrary<Labelled> = fc
  .tuple(fc.integer({ min: 65, max: 5_000 }), fc.constantFrom<"array" | "object">("array", "object"))
  .map(([levels, kind]) => ({ label: `nested ${levels} ${kind}s`, value: nested(levels, kind) }));

/** JSON text the parser must refuse (and a few texts it accepts, which the case filter sorts out). */
export function malformedJsonText(base: unknown): fc.Arbitrary<Labelled> {
  const text = toJsonText(base ?? {});
  return fc
    .oneof(
      fc.constantFrom(
        "{",
        "[",
        "}",
        "{,}",
        '{"a":}',
        "{'a':1}",
        "{a:1}",
        '{"a":1,}',
        "[1,]",
        '{"a":1}{"b":2}',
        '{"a":01}',
        '{"a":.5}',
        '{"a":+1}',
        '{"a":0x10}',
        '{"a":NaN}',
        '{"a":Infinity}',
        '{"a":undefined}',
        '{"a":"\\x41"}',
        '{"a":"\\u12"}',
        '{"a":"\u0001"}',
        '{"a":"tab\there"}',
        "NaN",
        "undefined",
        "--",
        "   ",
        "\u0000",
        "null null",
        '"unterminated',
        `${"[".repeat(100)}`,
      ),
      fc.integer({ min: 1, max: Math.max(1, text.length - 1) }).map((n) => text.slice(0, n)),
      fc
        .tuple(fc.nat(text.length), fc.constantFrom("}", "{", ",", ":", '"', "\\", "]", "\u0001"))
        .map(([i, c]) => `${text.slice(0, i)}${c}${text.slice(i)}`),
    )
    .map((t) => ({ label: "malformed JSON text", value: new RawJson(t) }));
}
