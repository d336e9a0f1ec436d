/**
 * A request body and its 200 for each paid route (paid-routes.ts): the examples the Bazaar discovery
 * extension and `/.well-known/x402.json` carry. Each satisfies the contract's schemas for the route
 * (test/unit/funding/discovery.test.ts parses them).
 */

type Json = Record<string, unknown>;

const WALLET = "0x1111111111111111111111111111111111111111";
const TRANSACTION = `0x${"ab".repeat(32)}`;
const MODEL = "zai-org-glm-5-1";
const IMAGE_MODEL = "venice-sd35";
/** a 1×1 PNG, base64 */
const PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
const CREATED = 1_767_225_600;

const cost = { cost: 0.000019, cost_usdc: "0.000019", clearing_price_cents: 40, upstream_burn_diem: "0.000047" };

const funded: Json = {
  confirmedUsdc: "1.000000",
  pendingUsdc: "5.000000",
  topUpAmountUsdc: "5.000000",
  walletAddress: WALLET,
  transaction: TRANSACTION,
  confirmationBlocks: 20,
};

export const EXAMPLES = {
  signup: {
    input: { amountMicroUsdc: 5_000_000, keyName: "my-agent", maxPriceCentsPerDollar: 80 },
    output: {
      walletAddress: WALLET,
      accountId: "0b4f3a52-5d0e-4f43-9a43-8d6d5d3c1a11",
      pendingUsdc: "5.000000",
      transaction: TRANSACTION,
      confirmationBlocks: 20,
      apiKey: `svc_${"A".repeat(43)}`,
      keyPrefix: "svc_AAAAAAAA",
      keyName: "my-agent",
    },
  },
  top_up: { input: { amountMicroUsdc: 5_000_000 }, output: funded },
  refill: { input: { amountMicroUsdc: 5_000_000 }, output: funded },
  chat_completions: {
    input: { model: MODEL, messages: [{ role: "user", content: "Say hi" }] },
    output: {
      id: "chatcmpl-0b4f3a52",
      object: "chat.completion",
      created: CREATED,
      model: MODEL,
      choices: [{ index: 0, message: { role: "assistant", content: "Hi!" }, finish_reason: "stop" }],
      usage: {
        prompt_tokens: 9,
        completion_tokens: 3,
        total_tokens: 12,
        cost: cost.cost,
        cost_details: {
          cost_usdc: cost.cost_usdc,
          clearing_price_cents: cost.clearing_price_cents,
          upstream_burn_diem: cost.upstream_burn_diem,
          cached_tokens: 0,
          cache_write_tokens: 0,
        },
      },
    },
  },
  responses: {
    input: { model: MODEL, input: "Say hi" },
    output: {
      id: "resp_0b4f3a52",
      object: "response",
      status: "completed",
      model: MODEL,
      output: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "Hi!" }] }],
      usage: {
        input_tokens: 9,
        output_tokens: 3,
        total_tokens: 12,
        cost: cost.cost,
        cost_details: {
          cost_usdc: cost.cost_usdc,
          clearing_price_cents: cost.clearing_price_cents,
          upstream_burn_diem: cost.upstream_burn_diem,
          cached_tokens: 0,
          cache_write_tokens: 0,
        },
      },
    },
  },
  messages: {
    input: { model: MODEL, max_tokens: 256, messages: [{ role: "user", content: "Say hi" }] },
    output: {
      id: "msg_0b4f3a52",
      type: "message",
      role: "assistant",
      model: MODEL,
      content: [{ type: "text", text: "Hi!" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: {
        input_tokens: 9,
        output_tokens: 3,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
        cost: cost.cost,
        cost_details: {
          cost_usdc: cost.cost_usdc,
          clearing_price_cents: cost.clearing_price_cents,
          upstream_burn_diem: cost.upstream_burn_diem,
        },
      },
    },
  },
  image_generate: {
    input: { model: IMAGE_MODEL, prompt: "a red fox" },
    output: { id: "img_0b4f3a52", images: [PIXEL] },
  },
  images_generations: {
    input: { model: IMAGE_MODEL, prompt: "a red fox", n: 1 },
    output: { created: CREATED, data: [{ b64_json: PIXEL }] },
  },
} satisfies Record<string, { input: Json; output: Json }>;
