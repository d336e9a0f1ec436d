import { describe, expect, it } from "vitest";
import { type RecordedPaidAnswer, replay } from "../../../src/domain/pay-per-request/answers.js";
import { DomainError } from "../../../src/lib/errors.js";

describe("a recorded pay-per-request answer, given again", () => {
  it("a JSON answer with its cost facts replays them", () => {
    const r = {
      kind: "json",
      status: 200,
      cost: { costMicroUsdc: "1234", balanceRemainingMicroUsdc: null },
      receipt: { name: "PAYMENT-RESPONSE", value: "x" },
      body: { id: "a" },
    } as unknown as RecordedPaidAnswer;
    const out = replay(r);
    expect(out).toMatchObject({ type: "answer", status: 200, body: { id: "a" } });
    expect(out.type === "answer" ? out.cost.costMicroUsdc : null).toBe(1234n);
  });

  it("one recorded by the earlier version (a headers map) is refused 409 conflict, never a 500", () => {
    const old = {
      kind: "json",
      status: 200,
      headers: { "X-Svc-Cost-Usdc": "0.001234" },
      body: {},
    } as unknown as RecordedPaidAnswer;
    let err: unknown;
    try {
      replay(old);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).code).toBe("conflict");
  });
});
