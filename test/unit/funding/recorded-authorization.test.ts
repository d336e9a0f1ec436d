// Issue 38 item 5: a replayed payment is answered from its record only when it is the recorded
// authorization signed by its payer; the authorization's times must fit what is recorded.
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, test } from "vitest";
import {
  decodePaymentHeader,
  type RecordedAuthorization,
  recordedTypedData,
  signedByPayerKey,
} from "../../../src/domain/funding/x402.js";

const USDC = "0x833589fcd6e4e7f0a50c8a3f1e6ab8f5d5a1b2c3" as Hex;
const DOMAIN = { name: "USD Coin", version: "2", chainId: 8453 };
const payer = privateKeyToAccount(generatePrivateKey());
const other = privateKeyToAccount(generatePrivateKey());
const PAY_TO = "0x00000000000000000000000000000000000000aa" as Hex;
const NONCE = `0x${"ab".repeat(32)}` as Hex;

const authorization = {
  from: payer.address,
  to: PAY_TO,
  value: "2000000",
  validAfter: "1700000000",
  validBefore: "1900000000",
  nonce: NONCE,
};

const recorded: RecordedAuthorization = {
  payerAddress: payer.address.toLowerCase(),
  payToAddress: PAY_TO,
  assetAddress: USDC,
  amountMicroUsdc: 2_000_000n,
  authorizationNonce: NONCE,
  validAfter: new Date(1_700_000_000_000),
  validBefore: new Date(1_900_000_000_000),
};

function header(a: Record<string, string>, signature: Hex): string {
  const payload = { x402Version: 1, scheme: "exact", network: "base", payload: { signature, authorization: a } };
  return Buffer.from(JSON.stringify(payload)).toString("base64");
}

async function sign(signer: typeof payer, a: typeof authorization): Promise<Hex> {
  const typed = recordedTypedData(
    // biome-ignore lint/style/noNonNullAssertion: the fixture decodes
    decodePaymentHeader(header(a, "0x00"))!,
    {
      ...recorded,
      payerAddress: a.from.toLowerCase(),
      amountMicroUsdc: BigInt(a.value),
      validAfter: new Date(Number(a.validAfter) * 1000),
      validBefore: new Date(Number(a.validBefore) * 1000),
    },
    DOMAIN,
  );
  if (!typed) throw new Error("fixture");
  return signer.signTypedData(typed);
}

describe("recordedTypedData: the presented authorization must be the recorded one", () => {
  test.each([
    { label: "another payer", change: { from: other.address } },
    { label: "another payee", change: { to: "0x00000000000000000000000000000000000000bb" } },
    { label: "another value", change: { value: "2000001" } },
    { label: "another validAfter", change: { validAfter: "1700000001" } },
    { label: "another validBefore", change: { validBefore: "1900000001" } },
    { label: "another nonce", change: { nonce: `0x${"cd".repeat(32)}` } },
  ])("$label: not the record", ({ change }) => {
    const d = decodePaymentHeader(header({ ...authorization, ...change }, "0x00"));
    expect(d).toBeDefined();
    if (d) expect(recordedTypedData(d, recorded, DOMAIN)).toBeUndefined();
  });

  test("the same authorization: the record's typed data; a row without validAfter takes the presented one", () => {
    const d = decodePaymentHeader(header(authorization, "0x00"));
    if (!d) throw new Error("decode");
    expect(recordedTypedData(d, recorded, DOMAIN)?.message).toMatchObject({
      value: 2_000_000n,
      validAfter: 1_700_000_000n,
    });
    expect(recordedTypedData(d, { ...recorded, validAfter: null }, DOMAIN)?.message.validAfter).toBe(1_700_000_000n);
    expect(recordedTypedData(d, { ...recorded, validBefore: null }, DOMAIN)).toBeUndefined();
  });
});

describe("signedByPayerKey", () => {
  test.each([
    { label: "the payer's signature", signer: payer, valid: true },
    { label: "another key's signature", signer: other, valid: false },
  ])("$label: $valid", async ({ signer, valid }) => {
    const signature = await sign(signer, authorization);
    const d = decodePaymentHeader(header(authorization, signature));
    const typed = d && recordedTypedData(d, recorded, DOMAIN);
    if (!d || !typed) throw new Error("fixture");
    expect(await signedByPayerKey(d, typed)).toBe(valid);
  });

  test("a signature that is no signature: false, never a throw", async () => {
    const d = decodePaymentHeader(header(authorization, `0x${"11".repeat(65)}`));
    const typed = d && recordedTypedData(d, recorded, DOMAIN);
    if (!d || !typed) throw new Error("fixture");
    expect(await signedByPayerKey(d, typed)).toBe(false);
  });
});

describe("decodePaymentHeader: the authorization's times", () => {
  test.each([
    { label: "validBefore past year 9999", change: { validBefore: "253402300800" } },
    { label: "validBefore a uint256", change: { validBefore: (2n ** 255n).toString() } },
    { label: "validAfter past year 9999", change: { validAfter: "999999999999999" } },
  ])("$label: not a payment (402 invalid_payment, never a timestamp that cannot be stored)", ({ change }) => {
    expect(decodePaymentHeader(header({ ...authorization, ...change }, "0x00"))).toBeUndefined();
  });

  test("the last second of year 9999 decodes", () => {
    const d = decodePaymentHeader(header({ ...authorization, validBefore: "253402300799" }, "0x00"));
    expect(d?.validBefore.toISOString()).toBe("9999-12-31T23:59:59.000Z");
    expect(d?.validAfter.toISOString()).toBe("2023-11-14T22:13:20.000Z");
  });
});
