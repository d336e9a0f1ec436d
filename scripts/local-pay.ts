// `npm run local:pay [prompt]`: one chat completion paid per request (x402 v2 `upto`, no account, no
// key) against a running `npm run dev`, with the second dev buyer wallet: `@x402/fetch` wrapping the
// OpenAI SDK's fetch, as SKILL.md shows. Prints the answer, the settled amount and its transaction.
// Local mode only (anvil's public test key; the dev buyers approved Permit2 at boot).
import { x402Client } from "@x402/core/client";
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http";
import { toClientEvmSigner } from "@x402/evm";
import { UptoEvmScheme } from "@x402/evm/upto/client";
import { wrapFetchWithPayment } from "@x402/fetch";
import OpenAI from "openai";
import { privateKeyToAccount } from "viem/accounts";

const DEV_BUYER_KEY = "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba"; // anvil account 5
const base = process.env.SVC_URL ?? `http://127.0.0.1:${process.env.PORT ?? 8080}`;
const prompt = process.argv[2] ?? "Say hi";
const body = { model: "zai-org-glm-5-1", max_tokens: 256, messages: [{ role: "user", content: prompt }] };

// the local USDC is not at Base's address: a client pays only the assets it allows (up to $1 here)
const challenge = await fetch(`${base}/x402/v1/chat/completions`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});
const required = decodePaymentRequiredHeader(challenge.headers.get("payment-required") ?? "");
const asset = required.accepts[0]?.asset ?? "";
console.log(`402: at most ${required.accepts[0]?.amount} micro-USDC (${required.accepts[0]?.scheme}), asset ${asset}`);

const client = new x402Client()
  .register("eip155:*", new UptoEvmScheme(toClientEvmSigner(privateKeyToAccount(DEV_BUYER_KEY))))
  .setSpendControls({ allowedAssets: [{ network: "eip155:8453", asset, maxAmountPerPayment: "1000000" }] });
let receipt: string | null = null;
const paying: typeof fetch = async (input, init) => {
  const res = await wrapFetchWithPayment(fetch, client)(input, init);
  receipt = res.headers.get("payment-response") ?? receipt;
  return res;
};
const openai = new OpenAI({ baseURL: `${base}/x402/v1`, apiKey: "unused", fetch: paying });
const r = await openai.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming);
console.log(r.choices[0]?.message.content);
const settled = receipt ? decodePaymentResponseHeader(receipt) : undefined;
console.log(
  `usage.cost ${(r.usage as { cost?: number } | undefined)?.cost} USD; settled ${settled?.amount} micro-USDC in ${settled?.transaction || "(nothing to settle)"}`,
);
