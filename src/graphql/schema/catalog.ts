// GraphQL types and queries of the catalog and its model statistics. Public: no credential needed.
import { ScalarRef } from "@pothos/core";
import { GraphQLError, Kind, type ValueNode } from "graphql";
import { parseStatsWindow } from "../../domain/catalog/catalog-stats.js";
import type {
  CatalogModelRow,
  ModelDailyShare,
  ModelStats,
  ModelUsage,
  StatsWindow,
} from "../../domain/catalog/catalog-types.js";
import { DEFAULT_STATS_WINDOW } from "../../domain/catalog/catalog-types.js";
import { publishedFields } from "../../domain/catalog/catalog-visibility.js";
import { builder } from "../builder.js";

type Types = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T> ? T : never;

function literalToJson(ast: ValueNode): unknown {
  switch (ast.kind) {
    case Kind.STRING:
    case Kind.ENUM:
      return ast.value;
    case Kind.BOOLEAN:
      return ast.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(ast.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return ast.values.map(literalToJson);
    case Kind.OBJECT:
      return Object.fromEntries(ast.fields.map((f) => [f.name.value, literalToJson(f.value)]));
    default:
      throw new GraphQLError("JSON literals cannot contain variables");
  }
}

/**
 * `JSON`: an opaque JSON value (catalog capabilities, pricing and constraints, whose keys depend on
 * the model family and are passed through exactly as REST renders them). Registered here because
 * builder.ts declares only the money and time scalars.
 */
export const JsonRef = new ScalarRef<Types, unknown, unknown>("JSON");
JsonRef.updateConfig({
  kind: "Scalar",
  graphqlKind: "Scalar",
  name: "JSON",
  description: "An arbitrary JSON value (objects keep the keys exactly as published).",
  serialize: (v: unknown) => v,
  parseValue: (v: unknown) => v,
  parseLiteral: (ast: ValueNode) => literalToJson(ast),
  pothosOptions: {},
  extensions: {},
});
builder.configStore.addTypeRef(JsonRef);

const StatusEnum = builder.enumType("CatalogModelStatus", {
  description: "`LIVE`: callable, pricing published. `COMING_SOON`: listed, not callable yet.",
  values: { LIVE: { value: "live" }, COMING_SOON: { value: "coming_soon" } } as const,
});

const ModalityEnum = builder.enumType("ModelModality", {
  values: { TEXT: { value: "text" }, IMAGE: { value: "image" }, VIDEO: { value: "video" } } as const,
});

const TierEnum = builder.enumType("ModelTier", {
  description: "`FRONTIER` models are the promoted tier; `SMALL` model volume may be throttled.",
  values: { FRONTIER: { value: "frontier" }, SMALL: { value: "small" } } as const,
});

const CatalogModelRef = builder.objectRef<CatalogModelRow>("CatalogModel").implement({
  description: "One catalog row: the same object as GET /v1/models/{id}.",
  fields: (t) => ({
    id: t.exposeString("id", { description: "Bare model slug: the `model` value in inference." }),
    status: t.field({ type: StatusEnum, resolve: (m) => m.status }),
    modality: t.field({ type: ModalityEnum, resolve: (m) => m.modality }),
    name: t.exposeString("name"),
    tier: t.field({ type: TierEnum, resolve: (m) => m.tier }),
    capabilities: t.field({ type: JsonRef, resolve: (m) => m.capabilities }),
    pricing: t.field({
      type: JsonRef,
      nullable: true,
      description: "Live rows only. Text: micro-USDC per million tokens; image: micro-USDC per image.",
      resolve: (m) => publishedFields(m).pricing,
    }),
    constraints: t.field({
      type: JsonRef,
      nullable: true,
      description: "Image and video rows: exactly the published keys (a missing key must not be sent).",
      resolve: (m) => publishedFields(m).constraints,
    }),
    created: t.int({ nullable: true, description: "Unix seconds", resolve: (m) => m.created }),
    regionRestrictions: t.stringList({
      nullable: true,
      description:
        "The country codes the upstream serves this model in, as published; elsewhere it refuses it (403 `model_region_restricted`). Null: no restriction published.",
      resolve: (m) => m.regionRestrictions,
    }),
  }),
});

const DailyShareRef = builder.objectRef<ModelDailyShare>("ModelDailyShare").implement({
  fields: (t) => ({
    day: t.exposeString("day", { description: "UTC day, YYYY-MM-DD" }),
    share: t.exposeFloat("share", { description: "Share of that day's total usage (4 decimals)" }),
  }),
});

const ModelUsageRef = builder.objectRef<ModelUsage>("ModelUsage").implement({
  fields: (t) => ({
    id: t.exposeString("id"),
    modality: t.field({ type: ModalityEnum, resolve: (m) => m.modality }),
    rank: t.exposeInt("rank", { description: "1 = most used" }),
    usageShare: t.exposeFloat("usageShare", { description: "Share of the window's total usage (4 decimals)" }),
    daily: t.field({ type: [DailyShareRef], resolve: (m) => m.daily }),
  }),
});

const ModelStatsRef = builder.objectRef<ModelStats>("ModelStats").implement({
  description: "Public model usage shares. Never carries counts, tokens, wallets, keys or request ids.",
  fields: (t) => ({
    window: t.field({ type: "String", resolve: (s) => s.window }),
    generatedAt: t.field({ type: "DateTime", resolve: (s) => s.generatedAt }),
    hasSufficientVolume: t.exposeBoolean("hasSufficientVolume"),
    models: t.field({ type: [ModelUsageRef], resolve: (s) => s.models }),
  }),
});

builder.queryField("models", (t) =>
  t.field({
    type: [CatalogModelRef],
    description: "The public catalog: live and coming_soon rows (GET /v1/models).",
    resolve: (_root, _args, ctx) => ctx.services.catalog.listModels(),
  }),
);

builder.queryField("model", (t) =>
  t.field({
    type: CatalogModelRef,
    description: "One catalog row by bare or `svc/`-prefixed id; unknown, disabled or unlisted → model_not_found.",
    args: { id: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => ctx.services.catalog.getModel(args.id),
  }),
);

builder.queryField("modelStats", (t) =>
  t.field({
    type: ModelStatsRef,
    description: "Model usage shares over a window: `24h`, `7d` (default) or `30d`.",
    args: { window: t.arg.string({ required: false, defaultValue: DEFAULT_STATS_WINDOW }) },
    resolve: (_root, args, ctx) => {
      const window: StatsWindow = parseStatsWindow(args.window ?? undefined);
      return ctx.services.catalog.modelStats(window);
    },
  }),
);
