import { z } from "./common.js";

/**
 * The parts of a Messages request (Anthropic's content blocks, a message, the system prompt, the
 * client tools and `tool_choice`), each with the 400 that names it; messages.ts assembles them.
 */

type Json = Record<string, unknown>;

/** Anthropic's image media types (base64 sources). */
const IMAGE_MEDIA_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp"] as const;

/** The content block types this route translates (anything else is a 400 naming the block). */
const BLOCK_TYPES = "text, image, tool_use, tool_result, thinking, redacted_thinking";

const nonEmpty = (message: string) =>
  z.string({ required_error: message, invalid_type_error: message }).min(1, { message });

/**
 * A string or an array of `item`s. Not a zod union: a union that fails both ways reports only that
 * it failed, where this names the block and the field that is wrong (`messages.0.content.1.type`).
 */
function stringOr<T extends z.ZodTypeAny>(item: T, message: string, description: string) {
  const array = z.array(item);
  return z
    .unknown()
    .transform((v, ctx): string | z.output<T>[] => {
      if (typeof v === "string") return v;
      if (!Array.isArray(v)) {
        ctx.addIssue({ code: "custom", message });
        return z.NEVER;
      }
      const r = array.safeParse(v);
      if (r.success) return r.data;
      for (const issue of r.error.issues) ctx.addIssue(issue as z.IssueData);
      return z.NEVER;
    })
    .openapi({ anyOf: [{ type: "string" }, { type: "array", items: { type: "object" } }], description });
}

/** `cache_control` on a block, a tool or the system: accepted, not forwarded (the catalog prices no cache writes). */
const cacheControl = z.record(z.unknown()).nullable().optional();

export const textBlock = z
  .object({
    type: z.literal("text"),
    text: z.string({ required_error: "text is required", invalid_type_error: "text must be a string" }),
    cache_control: cacheControl,
  })
  .passthrough()
  .openapi("AnthropicTextBlock");

const imageSource = z.discriminatedUnion(
  "type",
  [
    z.object({
      type: z.literal("base64"),
      media_type: z.enum(IMAGE_MEDIA_TYPES, {
        errorMap: () => ({ message: `media_type must be one of ${IMAGE_MEDIA_TYPES.join(", ")}` }),
      }),
      data: nonEmpty("data must be a non-empty base64 string"),
    }),
    z.object({ type: z.literal("url"), url: nonEmpty("url must be a non-empty string") }),
  ],
  { errorMap: () => ({ message: "source must be {type: base64, media_type, data} or {type: url, url}" }) },
);

const imageBlock = z
  .object({ type: z.literal("image"), source: imageSource, cache_control: cacheControl })
  .passthrough()
  .openapi("AnthropicImageBlock");

const toolUseBlock = z
  .object({
    type: z.literal("tool_use"),
    id: nonEmpty("id must be a non-empty string"),
    name: nonEmpty("name must be a non-empty string"),
    input: z.record(z.unknown(), {
      invalid_type_error: "input must be an object",
      required_error: "input is required",
    }),
    cache_control: cacheControl,
  })
  .passthrough()
  .openapi("AnthropicToolUseBlock");

const toolResultContent = stringOr(
  z.discriminatedUnion("type", [textBlock, imageBlock], {
    errorMap: (issue, ctx) =>
      issue.code === "invalid_union_discriminator"
        ? { message: "a tool_result's content blocks are text or image" }
        : { message: ctx.defaultError },
  }),
  "content must be a string or an array of text and image blocks",
  "a string, or text and image blocks",
);

const toolResultBlock = z
  .object({
    type: z.literal("tool_result"),
    tool_use_id: nonEmpty("tool_use_id must be a non-empty string"),
    content: toolResultContent.optional(),
    is_error: z.boolean({ invalid_type_error: "is_error must be a boolean" }).optional(),
    cache_control: cacheControl,
  })
  .passthrough()
  .openapi("AnthropicToolResultBlock");

/** Thinking from an earlier turn (sent back by clients): accepted, not forwarded. */
const thinkingBlock = z.object({ type: z.literal("thinking"), thinking: z.string().optional() }).passthrough();
const redactedThinkingBlock = z.object({ type: z.literal("redacted_thinking") }).passthrough();

const contentBlock = z.discriminatedUnion(
  "type",
  [textBlock, imageBlock, toolUseBlock, toolResultBlock, thinkingBlock, redactedThinkingBlock],
  {
    errorMap: (issue, ctx) =>
      issue.code === "invalid_union_discriminator"
        ? {
            message: `a content block's type is one of ${BLOCK_TYPES} (documents and server-tool blocks are not supported)`,
          }
        : { message: ctx.defaultError },
  },
);
export type AnthropicContentBlock = z.infer<typeof contentBlock>;

export const MESSAGES_MESSAGE = "messages must be a non-empty array of {role, content}.";

/**
 * A turn: `user`, `assistant`, or `system` (Anthropic's mid-conversation system message, text only;
 * Claude Code sends its environment that way).
 */
export const anthropicMessage = z
  .object({
    role: z.enum(["user", "assistant", "system"], {
      errorMap: () => ({ message: "role must be user, assistant or system" }),
    }),
    content: stringOr(
      contentBlock,
      "content must be a string or an array of content blocks",
      `a string, or content blocks (${BLOCK_TYPES})`,
    ),
  })
  .passthrough()
  .superRefine((m, ctx) => {
    if (m.role !== "system" || typeof m.content === "string") return;
    const i = m.content.findIndex((b) => b.type !== "text");
    if (i >= 0)
      ctx.addIssue({ code: "custom", path: ["content", i, "type"], message: "a system message's blocks are text" });
  })
  .openapi("AnthropicMessage");
export type AnthropicMessage = z.infer<typeof anthropicMessage>;

const SYSTEM_MESSAGE = "system must be a string or an array of text blocks";
export const system = stringOr(
  textBlock,
  SYSTEM_MESSAGE,
  "a string or text blocks; sent upstream as the system message",
).optional();

/** A client tool: `name`, `input_schema` (JSON schema), optional `description`. */
export const anthropicTool = z
  .object({
    type: z
      .string()
      .nullable()
      .optional()
      .openapi({ description: "absent or `custom`; server and built-in tools are refused" }),
    name: nonEmpty("name must be a non-empty string"),
    description: z.string({ invalid_type_error: "description must be a string" }).optional(),
    input_schema: z
      .record(z.unknown(), {
        required_error: "input_schema is required (a JSON schema object)",
        invalid_type_error: "input_schema must be a JSON schema object",
      })
      .openapi({ type: "object" }),
    cache_control: cacheControl,
  })
  .passthrough()
  .openapi("AnthropicTool");
export type AnthropicTool = z.infer<typeof anthropicTool>;

/** Tool types that bill beyond published pricing (SPEC 12, as on chat). */
const PAID_TOOL = /^(web_search|web_fetch|x_search)(_|$)/;

/** Anthropic's server and built-in tools: a typed entry whose schema is Anthropic's, not the buyer's. */
export function toolsRefusal(tools: unknown): string | undefined {
  if (!Array.isArray(tools)) return undefined;
  for (const [i, t] of tools.entries()) {
    const type = (t as Json | null)?.type;
    if (typeof type !== "string" || type === "custom") continue;
    if (PAID_TOOL.test(type)) return `tools.${i}: the ${type} tool is refused: it bills beyond published pricing.`;
    return `tools.${i}: the ${type} tool is not supported: send a custom tool with name and input_schema.`;
  }
  return undefined;
}

const TOOL_CHOICE_MESSAGE = "tool_choice must be {type: auto | any | none} or {type: tool, name}";
export const toolChoice = z
  .discriminatedUnion(
    "type",
    [
      z.object({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().optional() }).passthrough(),
      z.object({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().optional() }).passthrough(),
      z.object({ type: z.literal("none") }).passthrough(),
      z
        .object({
          type: z.literal("tool"),
          name: nonEmpty("name must be a non-empty string"),
          disable_parallel_tool_use: z.boolean().optional(),
        })
        .passthrough(),
    ],
    { errorMap: () => ({ message: TOOL_CHOICE_MESSAGE }) },
  )
  .optional();
export type AnthropicToolChoice = NonNullable<z.infer<typeof toolChoice>>;
