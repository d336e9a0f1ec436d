import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { toJsonSchemaCompat } from "@modelcontextprotocol/sdk/server/zod-json-schema-compat.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { z } from "zod";
import type { Viewer } from "../domain/identity/viewer.js";
import { requireScope } from "../domain/keys/key-scopes.js";
import { type AnonymousContext, anonymousCall } from "./paid-calls.js";
import { asDomainError, toolError, toolResult } from "./tool-result.js";
import { TOOLS } from "./tools.js";

const INSTRUCTIONS = [
  "A prepaid inference market: your API key's account pays for inference from its confirmed USDC balance.",
  "Start with agent_me (balance, ceiling) and capacity (supply and prices), pick a live model with list_models,",
  "then call chat_completion; every paid result carries costUsdc and a supportReference for request_lookup.",
  'Tool errors carry {"error":{"code","message",...}} with the REST API\'s codes; each tool says what to do on them.',
].join(" ");

const ANONYMOUS_INSTRUCTIONS = [
  "An inference market paid per call: with no API key, chat_completion and generate_image are paid with x402",
  "(scheme upto, USDC on Base, the exact cost settled, at most the signed maximum). An unpaid call answers isError",
  'with the payment requirements as structuredContent; sign them and call again with _meta["x402/payment"]; the',
  'receipt is _meta["x402/payment-response"]. Every other tool needs an API key (Authorization: Bearer svc_…).',
].join(" ");

/** A server's caller: the Bearer key's account, or nobody (paid per call). */
export type McpContext = AnonymousContext & { viewer: Viewer | null };

/** A tool's JSON Schema, converted the way the SDK's McpServer converts a zod schema (arguments as sent). */
function jsonSchema(schema: z.AnyZodObject, io: "input" | "output"): Tool["inputSchema"] {
  return toJsonSchemaCompat(schema, { strictUnions: true, pipeStrategy: io }) as Tool["inputSchema"];
}

const TOOL_LIST: Tool[] = TOOLS.map((t) => ({
  name: t.name,
  title: t.title,
  description: t.description,
  inputSchema: jsonSchema(t.input, "input"),
  outputSchema: jsonSchema(t.output, "output"),
  annotations: { title: t.title, ...t.annotations },
}));

const BY_NAME = new Map(TOOLS.map((t) => [t.name, t]));

/**
 * One MCP server for one HTTP request (stateless, docs/decisions.md "MCP connector"), bound to the
 * caller the Bearer key resolved to, or to nobody: then the paid tools are paid per call (x402 MCP
 * binding, paid-calls.ts) and the others answer `authentication_failed`; with a key a payment in
 * `_meta` is not read (the key's balance pays). The SDK's low-level `Server` rather than `McpServer`:
 * McpServer validates tool arguments itself and answers a failure with its own text, where ours must be the
 * REST error body with `invalid_request` and the field; so the two tool handlers are ours, and the
 * schemas are listed with the SDK's own zod converter.
 */
export function createMcpServer(ctx: McpContext): Server {
  const { viewer } = ctx;
  const server = new Server(
    { name: "svc-inference-market", title: "Prepaid inference market", version: "1.0.0" },
    { capabilities: { tools: {} }, instructions: viewer ? INSTRUCTIONS : ANONYMOUS_INSTRUCTIONS },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOL_LIST }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const tool = BY_NAME.get(request.params.name);
    // an unknown tool is a protocol error (MCP "Tools": -32602), not a tool error
    if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    if (!viewer) return anonymousCall(tool.name, request.params.arguments, request.params._meta, ctx);
    try {
      if (tool.scope) requireScope(viewer, tool.scope);
      const args = tool.parse(request.params.arguments);
      const value = await tool.run(args, { ...ctx, viewer });
      return tool.result ? tool.result(value) : toolResult(value);
    } catch (err) {
      return toolError(asDomainError(err, { tool: tool.name, requestId: ctx.requestId }));
    }
  });
  return server;
}
