import { VENICE_REQUEST_FIELDS } from "./venice-fields.js";

/**
 * Only what Venice documents goes upstream (docs/decisions.md "Venice as documented: what goes
 * upstream"): the allow-lists are generated from the vendored reference (venice-fields.ts, written by
 * scripts/venice-fields.ts), so they follow the reference, not our guesses.
 */
export type VeniceRequestRoute = keyof typeof VENICE_REQUEST_FIELDS;

type Json = Record<string, unknown>;

interface Allowed {
  fields: ReadonlySet<string>;
  objects: ReadonlyMap<string, ReadonlySet<string>>;
}

const ALLOWED = new Map<string, Allowed>(
  Object.entries(VENICE_REQUEST_FIELDS).map(([route, r]) => [
    route,
    {
      fields: new Set<string>(r.fields),
      objects: new Map(Object.entries(r.objects).map(([k, keys]) => [k, new Set<string>(keys)])),
    },
  ]),
);

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * `body` with only the fields the reference documents for `route`: top-level fields it lists, and in
 * the objects it describes key by key (`venice_parameters`, `stream_options`, `reasoning`, …) only
 * the keys it lists. Everything else is dropped, never refused (a field the service must refuse is
 * the contract's rule). Deeper values (messages, tools, input items) go as sent: the upstream
 * validates them. A new object; `body` is not changed.
 */
export function documentedBody(route: VeniceRequestRoute, body: Json): Json {
  const allowed = ALLOWED.get(route) as Allowed;
  const out: Json = {};
  for (const [k, v] of Object.entries(body)) {
    if (!allowed.fields.has(k)) continue;
    const keys = allowed.objects.get(k);
    if (keys && isObject(v)) {
      const inner: Json = {};
      for (const [ik, iv] of Object.entries(v)) if (keys.has(ik)) inner[ik] = iv;
      out[k] = inner;
    } else {
      out[k] = v;
    }
  }
  return out;
}
