import { describe, expect, it } from "vitest";
import type { CostFacts, StreamStartFacts } from "../../../src/domain/inference/pipeline/answer-facts.js";
import { type PaidOutcome, recordedOf, replay } from "../../../src/domain/pay-per-request/answers.js";
import { costHeaders, paidAnswerHeaders, serverTiming, streamStartHeaders } from "../../../src/http/answer-headers.js";

// The domain hands an answer's facts over as data; these are the exact headers REST sends for them
// (SPEC "Inference" response headers), and a paid answer recorded then replayed renders the same.

const REQUEST_ID = "0b8f4f7e-6d0e-4b8a-9a53-3c2d1e0f9a11";
const SUPPORT = "5e1c2d3b-7a8f-4e6d-b5c4-a3b2c1d0e9f8";
const start: StreamStartFacts = {
  requestId: REQUEST_ID,
  supportReference: SUPPORT,
  timing: { admitMs: 1.25, upstreamMs: 30.5 },
};
const cost: CostFacts = {
  ...start,
  timing: { admitMs: 1.25, upstreamMs: 30.5, settleMs: 2 },
  costMicroUsdc: 1_250_001n,
  clearingPriceCents: 42,
  balanceRemainingMicroUsdc: 9_000_000n,
};

describe("serverTiming", () => {
  it.each([
    { label: "no phase reached", timing: {}, want: "" },
    {
      label: "a stream's start: no settle yet",
      timing: { admitMs: 1.25, upstreamMs: 30.5 },
      want: "admit;dur=1.250, upstream;dur=30.500",
    },
    {
      label: "every phase, in order",
      timing: { settleMs: 2, admitMs: 0.0004, upstreamMs: 7 },
      want: "admit;dur=0.000, upstream;dur=7.000, settle;dur=2.000",
    },
  ])("$label", ({ timing, want }) => {
    expect(serverTiming(timing)).toBe(want);
  });
});

describe("an answer's headers from its facts", () => {
  it("a stream's start: its ids and timings", () => {
    expect(streamStartHeaders(start)).toEqual({
      "X-Svc-Request-Id": REQUEST_ID,
      "X-Svc-Support-Reference": SUPPORT,
      "Server-Timing": "admit;dur=1.250, upstream;dur=30.500",
    });
  });

  it.each([
    { label: "charged on a balance", facts: cost, extra: { "X-Balance-Remaining": "9.000000" } },
    {
      label: "uncharged: no balance moved, the reason told",
      facts: { ...cost, costMicroUsdc: 0n, uncharged: "content_violation" },
      extra: { "X-Balance-Remaining": "9.000000", "X-Svc-Uncharged": "content_violation" },
      costUsdc: "0.000000",
    },
    {
      label: "flagged and charged",
      facts: { ...cost, flagged: "content_violation" },
      extra: { "X-Balance-Remaining": "9.000000", "X-Svc-Flagged": "content_violation" },
    },
    { label: "paid by a payment: no balance to tell", facts: { ...cost, balanceRemainingMicroUsdc: null }, extra: {} },
  ])("$label", ({ facts, extra, costUsdc }) => {
    expect(costHeaders(facts)).toEqual({
      "X-Svc-Request-Id": REQUEST_ID,
      "X-Svc-Support-Reference": SUPPORT,
      "Server-Timing": "admit;dur=1.250, upstream;dur=30.500, settle;dur=2.000",
      "X-Svc-Cost-Usdc": costUsdc ?? "1.250001",
      "X-Svc-Clearing-Price-Cents": "42",
      ...extra,
    });
  });
});

describe("a paid answer, recorded and replayed", () => {
  const receipt = { name: "PAYMENT-RESPONSE", value: "eyJzdWNjZXNzIjp0cnVlfQ==" };
  const paidCost = { ...cost, balanceRemainingMicroUsdc: null };

  it("renders the same headers as when it was first sent, and records JSON-safe", () => {
    const fresh: PaidOutcome = { type: "answer", status: 200, cost: paidCost, receipt, body: { id: "chatcmpl-1" } };
    const recorded = recordedOf(fresh);
    // what request_payments.response keeps: no bigint
    const stored = JSON.parse(JSON.stringify(recorded));
    const again = replay(stored);
    if (again.type !== "answer") throw new Error(`replayed as ${again.type}`);
    expect(again.cost.costMicroUsdc).toBe(1_250_001n);
    expect(again.body).toEqual({ id: "chatcmpl-1" });
    const headers = paidAnswerHeaders(again.cost, again.receipt);
    expect(headers).toEqual(paidAnswerHeaders(paidCost, receipt));
    expect(headers["PAYMENT-RESPONSE"]).toBe(receipt.value);
    expect(headers["X-Balance-Remaining"]).toBeUndefined();
  });

  it("a stream replays its start (and one that never started, none)", () => {
    const started = replay(
      JSON.parse(JSON.stringify(recordedOf({ type: "streamed" }, { start, text: "data: x\n\n" }))),
    );
    expect(started).toEqual({ type: "replayed_stream", start, text: "data: x\n\n" });
    const never = replay(JSON.parse(JSON.stringify(recordedOf({ type: "streamed" }, { start: undefined, text: "" }))));
    expect(never).toEqual({ type: "replayed_stream", text: "" });
  });
});
