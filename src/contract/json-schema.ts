import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import type { z } from "./common.js";

/** A JSON Schema object, as the generator writes it. */
export type JsonSchema = { [keyword: string]: unknown };

const COMPONENT_REF = /^#\/components\/schemas\/(.+)$/;

/**
 * `node` with every `{"$ref": "#/components/schemas/X"}` replaced by X from `schemas` (its own refs
 * inlined too; a sibling keyword beside the `$ref` is kept): a schema that stands alone, for a reader
 * that has no `components` (the Bazaar discovery extension forbids references it cannot resolve).
 * The contract's schemas are trees, so the walk ends; a cycle would throw.
 */
export function inlineRefs(node: unknown, schemas: Record<string, unknown>, seen: string[] = []): unknown {
  if (Array.isArray(node)) return node.map((n) => inlineRefs(n, schemas, seen));
  if (node === null || typeof node !== "object") return node;
  const { $ref, ...rest } = node as JsonSchema;
  const out: JsonSchema = {};
  if (typeof $ref === "string") {
    const name = COMPONENT_REF.exec($ref)?.[1];
    if (name === undefined || !(name in schemas)) throw new Error(`unresolvable $ref ${$ref}`);
    if (seen.includes(name)) throw new Error(`recursive schema ${name}`);
    Object.assign(out, inlineRefs(schemas[name], schemas, [...seen, name]));
  }
  for (const [k, v] of Object.entries(rest)) out[k] = inlineRefs(v, schemas, seen);
  return out;
}

/**
 * A contract schema as a self-contained JSON Schema (draft 2020-12): written by the generator that
 * writes /openapi.json (`@asteasolutions/zod-to-openapi`), in its OpenAPI 3.1 mode, whose schema
 * dialect is JSON Schema 2020-12 (a nullable field is `type: ["string", "null"]`, where OpenAPI 3.0
 * says `nullable: true`); named components inlined. Apart from `nullable`, the same keywords and
 * values as the schema /openapi.json gives for it. `components`: the named schemas `schema` refers
 * to by a hand-written `$ref` (e.g. `AnthropicTool` in the Messages body), inlined too.
 */
export function jsonSchemaOf(schema: z.ZodTypeAny, components: Record<string, z.ZodTypeAny> = {}): JsonSchema {
  const registry = new OpenAPIRegistry();
  // the components a schema names only by a written `$ref` (the generator cannot see them)
  for (const [name, component] of Object.entries(components)) registry.register(name, component);
  registry.registerPath({
    method: "post",
    path: "/",
    request: { body: { content: { "application/json": { schema } } } },
    responses: {},
  });
  const doc = new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: { title: "json-schema", version: "0" },
  });
  const body = doc.paths?.["/"]?.post?.requestBody;
  const generated = body && "content" in body ? body.content["application/json"]?.schema : undefined;
  if (generated === undefined) throw new Error("the generator wrote no schema");
  return inlineRefs(generated, (doc.components?.schemas ?? {}) as Record<string, unknown>) as JsonSchema;
}
