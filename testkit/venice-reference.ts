/**
 * Venice's own API reference (vendor/venice/swagger.yaml, OpenAPI 3.0), read for tests: the request
 * and response schemas of a route as JSON Schema (every `$ref` resolved, OpenAPI's `nullable` and
 * boolean `exclusiveMinimum` turned into their JSON Schema forms), a validator for them, and the
 * stricter check the reference tests add on top: a property the reference does not list is a
 * failure even where the schema allows extra properties (`undocumentedFields`).
 *
 * The same reading derives the allow-lists of what goes upstream (`deriveRequestFields`), which
 * scripts/venice-fields.ts writes into src/adapters/upstream/venice-fields.ts.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Ajv, type ValidateFunction } from "ajv";
import { parse } from "yaml";

export const SWAGGER_PATH = fileURLToPath(new URL("../vendor/venice/swagger.yaml", import.meta.url));

export type JsonSchema = { [key: string]: unknown };
type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** The keywords that only annotate (dropped so the validator does not trip on OpenAPI's dialect). */
const ANNOTATIONS = new Set(["description", "example", "examples", "title", "xml", "externalDocs", "discriminator"]);

interface Operation {
  parameters?: { name: string; in: string; required?: boolean; schema?: unknown }[];
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  responses?: Record<string, { content?: Record<string, { schema?: unknown }>; headers?: Record<string, unknown> }>;
}

/** One reading of the vendored reference. */
export class VeniceReference {
  readonly doc: { info: { version: string }; paths: Record<string, Record<string, Operation>>; components: Json };
  /** the header lines naming the vendored commit */
  readonly source: string;
  private readonly converted = new Map<unknown, JsonSchema>();
  private readonly ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  private readonly compiled = new WeakMap<object, ValidateFunction>();

  constructor(text: string) {
    this.doc = parse(text);
    this.source = text
      .split("\n")
      .filter((l) => l.startsWith("# Source:"))
      .map((l) => l.slice(2).trim())
      .join(" ");
  }

  operation(method: string, path: string): Operation | undefined {
    return this.doc.paths[path]?.[method.toLowerCase()];
  }

  /** The JSON request body's schema of `METHOD path`; null when the route takes none. */
  requestSchema(method: string, path: string): JsonSchema | null {
    const s = this.operation(method, path)?.requestBody?.content?.["application/json"]?.schema;
    return s === undefined ? null : this.toJsonSchema(s);
  }

  /** The statuses the reference documents for `METHOD path`. */
  statuses(method: string, path: string): string[] {
    return Object.keys(this.operation(method, path)?.responses ?? {});
  }

  /** The schema of the `status` answer of `METHOD path` in `contentType`; null when not documented. */
  responseSchema(method: string, path: string, status: number | string, contentType = "application/json") {
    const s = this.operation(method, path)?.responses?.[String(status)]?.content?.[contentType]?.schema;
    return s === undefined ? null : this.toJsonSchema(s);
  }

  /** The schema of the query parameter `name` of `METHOD path`; null when not documented. */
  querySchema(method: string, path: string, name: string): JsonSchema | null {
    const p = this.operation(method, path)?.parameters?.find((x) => x.in === "query" && x.name === name);
    return p?.schema === undefined ? null : this.toJsonSchema(p.schema);
  }

  /** Schema violations of `value` (Ajv's messages with their paths); empty when valid. */
  validate(schema: JsonSchema, value: unknown): string[] {
    let fn = this.compiled.get(schema);
    if (!fn) {
      fn = this.ajv.compile(schema);
      this.compiled.set(schema, fn);
    }
    if (fn(value)) return [];
    return (fn.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message ?? e.keyword}`);
  }

  /**
   * Where `value` carries a property the reference does not list (JSON paths), however the schema
   * treats extra properties: an object schema that lists `properties` documents exactly those; one
   * whose `additionalProperties` is a schema (a map, e.g. `metadata`) documents any key; one that
   * lists nothing (a free-form object: a tool's JSON Schema `parameters`) is not looked into. In a
   * union (`anyOf`/`oneOf`) the branches `value` satisfies are read (all of them when none is).
   */
  undocumentedFields(schema: JsonSchema, value: unknown, path = ""): string[] {
    const out: string[] = [];
    this.walk(schema, value, path, out);
    return out;
  }

  private walk(schema: JsonSchema, value: unknown, path: string, out: string[]): void {
    const branches = this.branches(schema, value);
    if (Array.isArray(value)) {
      const items = branches.map((b) => b.items).filter(isObject);
      if (items.length === 0) return;
      const item = items.length === 1 ? (items[0] as JsonSchema) : { anyOf: items };
      value.forEach((v, i) => {
        this.walk(item, v, `${path}[${i}]`, out);
      });
      return;
    }
    if (!isObject(value)) return;
    const listing = branches.filter((b) => isObject(b.properties) || isObject(b.additionalProperties));
    if (listing.length === 0) return; // free-form
    for (const [k, v] of Object.entries(value)) {
      const schemas: JsonSchema[] = [];
      for (const b of listing) {
        const p = isObject(b.properties) ? b.properties[k] : undefined;
        if (isObject(p)) schemas.push(p);
        else if (isObject(b.additionalProperties)) schemas.push(b.additionalProperties);
      }
      const at = path ? `${path}.${k}` : k;
      if (schemas.length === 0) {
        out.push(at);
        continue;
      }
      this.walk(schemas.length === 1 ? (schemas[0] as JsonSchema) : { anyOf: schemas }, v, at, out);
    }
  }

  /** `schema` and the parts of it `value` is read against: `allOf` all, `anyOf`/`oneOf` the matching ones. */
  private branches(schema: JsonSchema, value: unknown): JsonSchema[] {
    const out: JsonSchema[] = [schema];
    for (const s of (schema.allOf as JsonSchema[] | undefined) ?? []) out.push(...this.branches(s, value));
    for (const key of ["anyOf", "oneOf"] as const) {
      const alts = (schema[key] as JsonSchema[] | undefined) ?? [];
      if (alts.length === 0) continue;
      const matching = alts.filter((a) => this.validate(a, value).length === 0);
      for (const a of matching.length > 0 ? matching : alts) out.push(...this.branches(a, value));
    }
    return out;
  }

  /** OpenAPI 3.0 schema → JSON Schema (draft 7 as Ajv reads it), `$ref`s resolved; memoised per node. */
  toJsonSchema(node: unknown, seen: Set<unknown> = new Set()): JsonSchema {
    if (!isObject(node)) return {};
    const cached = this.converted.get(node);
    if (cached) return cached;
    if (typeof node.$ref === "string") {
      const target = this.resolve(node.$ref);
      if (seen.has(target)) return {}; // a cycle: the inner occurrence is not checked further
      return this.toJsonSchema(target, new Set([...seen, target]));
    }
    const out: JsonSchema = {};
    for (const [k, v] of Object.entries(node)) {
      if (ANNOTATIONS.has(k) || k.startsWith("x-") || k === "nullable") continue;
      if (k === "properties" && isObject(v)) {
        out.properties = Object.fromEntries(Object.entries(v).map(([p, s]) => [p, this.toJsonSchema(s, seen)]));
      } else if ((k === "items" || k === "additionalProperties" || k === "not") && isObject(v)) {
        out[k] = this.toJsonSchema(v, seen);
      } else if ((k === "allOf" || k === "anyOf" || k === "oneOf") && Array.isArray(v)) {
        out[k] = v.map((s) => this.toJsonSchema(s, seen));
      } else if (k === "exclusiveMinimum" || k === "exclusiveMaximum") {
        // OpenAPI 3.0: a boolean beside minimum/maximum
        const bound = k === "exclusiveMinimum" ? "minimum" : "maximum";
        if (v === true && typeof node[bound] === "number") out[k] = node[bound];
      } else {
        out[k] = v;
      }
    }
    if (out.exclusiveMinimum !== undefined) delete out.minimum;
    if (out.exclusiveMaximum !== undefined) delete out.maximum;
    if (node.nullable === true) {
      if (typeof out.type === "string") {
        out.type = [out.type, "null"];
        if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
      } else if (out.type === undefined && Object.keys(out).length === 0) {
        // `{nullable: true}` alone: no type constraint, null included (OpenAPI 3.0), i.e. anything
      } else {
        const inner = { ...out };
        for (const k of Object.keys(out)) delete out[k];
        out.anyOf = [inner, { type: "null" }];
      }
    }
    this.converted.set(node, out);
    return out;
  }

  private resolve(ref: string): unknown {
    if (!ref.startsWith("#/")) throw new Error(`external $ref ${ref}`);
    let at: unknown = this.doc;
    for (const part of ref.slice(2).split("/")) {
      at = isObject(at) ? at[part.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined;
    }
    if (at === undefined) throw new Error(`unresolved $ref ${ref}`);
    return at;
  }
}

let shared: VeniceReference | undefined;

/** The vendored reference, read once per process. */
export function veniceReference(): VeniceReference {
  shared ??= new VeniceReference(readFileSync(SWAGGER_PATH, "utf8"));
  return shared;
}

/** The upstream routes whose JSON bodies the service builds (src/adapters/upstream/venice-fields.ts). */
export const REQUEST_ROUTES = [
  "/chat/completions",
  "/responses",
  "/image/generate",
  "/images/generations",
  "/video/quote",
  "/video/queue",
  "/video/retrieve",
  "/video/complete",
] as const;

/** What the reference documents of one route's request body: its fields, and the keys of its described objects. */
export interface RouteFields {
  fields: string[];
  /** object-valued fields described key by key (`venice_parameters`, `stream_options`, …): their keys */
  objects: Record<string, string[]>;
}

/**
 * The allow-list of each POST route's body, derived from the reference: the top-level properties,
 * and for each property whose schema is an object listing `properties` (in any of its union
 * branches), those keys. Sorted, so the generated file is stable.
 */
export function deriveRequestFields(ref: VeniceReference = veniceReference()): Record<string, RouteFields> {
  const out: Record<string, RouteFields> = {};
  for (const route of REQUEST_ROUTES) {
    const schema = ref.requestSchema("POST", route);
    if (!schema || !isObject(schema.properties)) throw new Error(`the reference has no object body for ${route}`);
    const objects: Record<string, string[]> = {};
    const properties = schema.properties;
    for (const name of Object.keys(properties).sort()) {
      const keys = new Set<string>();
      const visit = (x: unknown) => {
        if (!isObject(x)) return;
        if (isObject(x.properties) && (x.type === "object" || (Array.isArray(x.type) && x.type.includes("object"))))
          for (const k of Object.keys(x.properties)) keys.add(k);
        for (const u of ["anyOf", "oneOf", "allOf"]) for (const b of (x[u] as unknown[] | undefined) ?? []) visit(b);
      };
      visit(properties[name]);
      if (keys.size > 0) objects[name] = [...keys].sort();
    }
    out[route] = { fields: Object.keys(properties).sort(), objects };
  }
  return out;
}
