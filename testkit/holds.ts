import { expect } from "vitest";
import type { TestApp } from "./harness.js";

/**
 * Nothing is held any more: the buyer's reserve, every offer's, and no escrow slice left (an idle
 * buyer or offer has nothing escrowed: the last request to end gives its slices back).
 */
export async function expectHoldsReleased(app: TestApp, accountId: string): Promise<void> {
  expect((await app.rt.db.account.findUniqueOrThrow({ where: { id: accountId } })).reservedMicroUsdc).toBe(0n);
  expect(await app.rt.db.offer.count({ where: { reservedMicroDiem: { gt: 0n } } })).toBe(0);
  expect(await app.rt.db.buyerEscrow.count({ where: { accountId } })).toBe(0);
  expect(await app.rt.db.offerEscrow.count()).toBe(0);
}
