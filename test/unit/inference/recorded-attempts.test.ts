import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { AttemptRecord } from "../../../src/domain/inference/pipeline/session.js";
import type { EndCharge } from "../../../src/domain/inference/settlement/end-item.js";
import { endItemRow, recordedAttempts } from "../../../src/domain/inference/settlement/end-item-row.js";
import { endedItem } from "../../../testkit/end-items.js";

const ended = new Date("2026-11-29T12:00:00.250Z");
const charge: EndCharge = {
  offerId: randomUUID(),
  upstreamKeyId: randomUUID(),
  supplierAccountId: randomUUID(),
  priceCentsPerDollar: 42,
  burnMicroDiem: 1_000n,
  grossMicroUsdc: 420n,
  feeMicroUsdc: 21n,
  supplierMicroUsdc: 399n,
  clearId: randomUUID(),
  promptTokens: 1,
  completionTokens: 1,
  cachedTokens: 0,
  cacheWriteTokens: 0,
  buyerHolder: randomUUID(),
  offerHolder: randomUUID(),
};
const won: AttemptRecord = {
  ordinal: 1,
  key: charge.upstreamKeyId,
  offer: charge.offerId,
  price: 42,
  outcome: "succeeded",
  status: null,
  detail: null,
  started: "2026-11-29T12:00:00.010Z",
  ended: ended.toISOString(),
};
const item = (attempts: AttemptRecord[], o: { charged?: boolean; attemptCount?: number } = {}) =>
  endedItem({
    requestId: randomUUID(),
    supportReference: randomUUID(),
    accountId: randomUUID(),
    status: "succeeded",
    errorCode: null,
    charge: o.charged === false ? null : charge,
    attempts,
    attemptCount: o.attemptCount ?? attempts.length,
    endedAt: ended,
  });

describe("the attempts a request's record stores", () => {
  it("none for a charged request whose one attempt succeeded at its clear's key, offer and price", () => {
    expect(recordedAttempts(item([won]))).toEqual([]);
    expect(endItemRow(item([won])).attempts).toEqual([]);
  });

  it.each([
    ["no charge", item([won], { charged: false })],
    ["another key", item([{ ...won, key: randomUUID() }])],
    ["another offer", item([{ ...won, offer: randomUUID() }])],
    ["another price", item([{ ...won, price: 41 }])],
    ["an incomplete stream", item([{ ...won, outcome: "incomplete" }])],
    ["an upstream status", item([{ ...won, status: 200 }])],
    ["a detail", item([{ ...won, detail: "x" }])],
    ["an end other than the request's", item([{ ...won, ended: "2026-11-29T12:00:00.249Z" }])],
    ["a count that says more tries", item([won], { attemptCount: 2 })],
  ])("every one when the attempt is not its clear: %s", (_, i) => {
    expect(recordedAttempts(i)).toEqual(i.attempts);
    expect(recordedAttempts(i)).toHaveLength(1);
  });

  it("every one after a fall-forward", () => {
    const lost: AttemptRecord = {
      ...won,
      key: randomUUID(),
      offer: randomUUID(),
      price: 40,
      outcome: "retryable_failure",
    };
    const i = item([lost, { ...won, ordinal: 2 }]);
    expect(recordedAttempts(i)).toEqual(i.attempts);
  });
});
