// `npm run local:signup [amountUsdc]`: pays an x402 signup against a running `npm run dev` with the
// first dev buyer wallet, and prints the API key. Local mode only (anvil's public test key).
import { privateKeyToAccount } from "viem/accounts";
import { wrapFetchWithPayment } from "x402-fetch";

const DEV_BUYER_KEY = "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a"; // anvil account 4
const base = process.env.SVC_URL ?? `http://127.0.0.1:${process.env.PORT ?? 8080}`;
const usdc = Number(process.argv[2] ?? "5");
const account = privateKeyToAccount(DEV_BUYER_KEY);
const pay = wrapFetchWithPayment(fetch, account as never, 1_000_000_000n);
const res = await pay(`${base}/v1/x402/signup`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ amountMicroUsdc: Math.round(usdc * 1_000_000), keyName: "local-signup" }),
});
const body = (await res.json()) as Record<string, unknown>;
if (res.status !== 200) {
  console.error(`signup failed: ${res.status} ${JSON.stringify(body)}`);
  process.exit(1);
}
console.log(JSON.stringify(body, null, 2));
console.log(`\nexport SVC_API_KEY=${body.apiKey ?? "(replayed: no new key)"}`);
console.log(
  `The credit is pending until ${body.confirmationBlocks} blocks are mined (about ${body.confirmationBlocks} s locally).`,
);
