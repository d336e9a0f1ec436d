import { randomBytes, randomUUID } from "node:crypto";
import { expect } from "vitest";
import type { Db } from "../src/adapters/db.js";
import { postJournal } from "../src/domain/ledger/ledger.js";
import type { UpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { call, type Res, type SignedInUser } from "./actors.js";
import type { TestApp } from "./harness.js";
import { MARKET_ADD_IDS } from "./market-totals.js";

/** The supply side as tests drive it: upstream keys, offers, earnings, and the day's clock. */

export interface KeyBody {
  id: string;
  label: string;
  status: string;
  maskedKey: string;
  balanceDiem: string | null;
  lastBalanceAt: string | null;
  authFailedAt: string | null;
  createdAt: string;
  revokedAt: string | null;
  liveOfferId: string | null;
}

export interface OfferBody {
  id: string;
  upstreamKeyId: string;
  keyStatus: string;
  priceCentsPerDollar: number;
  effectivePriceCentsPerDollar: number;
  schedule: { fromUtc: string; priceCentsPerDollar: number }[] | null;
  repostDaily: boolean;
  dailyQuantityDiem: string | null;
  repostedFromId: string | null;
  quantityDiem: string;
  remainingDiem: string;
  status: string;
  expiresAt: string;
  endedAt: string | null;
}

/** A fresh upstream secret known to the simulator, with `diemMicro` DIEM. */
export function simKey(sim: UpstreamSimulator, diemMicro = 50_000_000n): string {
  const key = `vk-test-${randomBytes(16).toString("hex")}`;
  sim.state.addKey({ key, diemMicro });
  return key;
}

export function as(user: SignedInUser): { cookie: string } {
  return { cookie: user.cookie };
}

export async function registerKey(
  app: TestApp,
  user: SignedInUser,
  upstreamApiKey: string,
  label = "my key",
): Promise<KeyBody> {
  const res = await call(app, {
    method: "POST",
    path: "/v1/supply/upstream-keys",
    headers: as(user),
    body: { upstreamApiKey, label },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as KeyBody;
}

export function postOfferCall(app: TestApp, user: SignedInUser, body: Record<string, unknown>): Promise<Res> {
  return call(app, { method: "POST", path: "/v1/supply/offers", headers: as(user), body });
}

export async function postOffer(
  app: TestApp,
  user: SignedInUser,
  upstreamKeyId: string,
  priceCentsPerDollar = 50,
  quantityDiem = "10.000000",
): Promise<OfferBody> {
  const res = await postOfferCall(app, user, { upstreamKeyId, priceCentsPerDollar, quantityDiem });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as OfferBody;
}

export function patchOffer(app: TestApp, user: SignedInUser, id: string, body: unknown): Promise<Res> {
  return call(app, { method: "PATCH", path: `/v1/supply/offers/${id}`, headers: as(user), body });
}

export function deleteOffer(app: TestApp, user: SignedInUser, id: string): Promise<Res> {
  return call(app, { method: "DELETE", path: `/v1/supply/offers/${id}`, headers: as(user) });
}

export function deleteKey(app: TestApp, user: SignedInUser, id: string): Promise<Res> {
  return call(app, { method: "DELETE", path: `/v1/supply/upstream-keys/${id}`, headers: as(user) });
}

export async function myOffers(app: TestApp, user: SignedInUser): Promise<OfferBody[]> {
  const res = await call(app, { method: "GET", path: "/v1/supply/offers/mine", headers: as(user) });
  expect(res.status).toBe(200);
  return (res.body as { data: OfferBody[] }).data;
}

export async function myKeys(app: TestApp, user: SignedInUser): Promise<KeyBody[]> {
  const res = await call(app, { method: "GET", path: "/v1/supply/upstream-keys/mine", headers: as(user) });
  expect(res.status).toBe(200);
  return (res.body as { data: KeyBody[] }).data;
}

export async function offerStatus(app: TestApp, id: string): Promise<string> {
  return (await app.rt.db.offer.findUniqueOrThrow({ where: { id } })).status;
}

/** Routable DIEM at one price level of the market ladder (the router's eligibility rule). */
export async function routableAt(app: TestApp, price: number): Promise<bigint> {
  const ladder = await app.rt.services.market.getLadder();
  return ladder.prices.find((p) => p.priceCentsPerDollar === price)?.routableMicroDiem ?? 0n;
}

/** The router's settlement, reduced to what the offer states need: the whole remaining quantity sold. */
export async function sellOut(app: TestApp, offerId: string): Promise<void> {
  await app.rt.db.offer.update({ where: { id: offerId }, data: { remainingMicroDiem: 0n } });
}

/** A row snapshot used to prove a refused request changed nothing. */
export async function supplySnapshot(db: Db, accountId: string): Promise<string> {
  const [keys, offers] = await Promise.all([
    db.upstreamKey.findMany({ where: { accountId }, orderBy: { id: "asc" } }),
    db.offer.findMany({ where: { accountId }, orderBy: { id: "asc" } }),
  ]);
  return JSON.stringify({ keys, offers }, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
}

/**
 * Credits supplier earnings the way a clear does: a request row and a clear row (the transfer its
 * ledger lines derive from: buyer_confirmed −gross, supplier_payable +share, platform_fee +fee) with
 * the matching balance updates. The buyer is first given `gross` of confirmed balance (external −, buyer +).
 */
export async function creditClear(
  db: Db,
  input: {
    buyerAccountId: string;
    supplierAccountId: string;
    offerId: string;
    upstreamKeyId: string;
    grossMicroUsdc: bigint;
    feeMicroUsdc: bigint;
    priceCentsPerDollar?: number;
    burnMicroDiem?: bigint;
    model?: string;
    createdAt?: Date;
  },
): Promise<{ clearId: string; requestId: string }> {
  const share = input.grossMicroUsdc - input.feeMicroUsdc;
  const requestId = randomUUID();
  return db.$transaction(async (tx) => {
    await postJournal(tx, {
      kind: "top_up",
      idempotencyKey: `test-funding:${requestId}`,
      postings: [
        { book: "external", accountId: null, kind: "top_up", amountMicroUsdc: -input.grossMicroUsdc },
        {
          book: "buyer_confirmed",
          accountId: input.buyerAccountId,
          kind: "top_up",
          amountMicroUsdc: input.grossMicroUsdc,
        },
      ],
    });
    await tx.account.update({
      where: { id: input.buyerAccountId },
      data: { confirmedMicroUsdc: { increment: input.grossMicroUsdc } },
    });
    await tx.inferenceRequest.create({
      data: {
        id: requestId,
        supportReference: randomUUID(),
        accountId: input.buyerAccountId,
        route: "chat",
        modality: "text",
        model: input.model ?? "llama-3.3-70b",
        maxPriceCents: 80,
        status: "succeeded",
        clearingPriceCents: input.priceCentsPerDollar ?? 50,
        costMicroUsdc: input.grossMicroUsdc,
        burnMicroDiem: input.burnMicroDiem ?? input.grossMicroUsdc * 2n,
      },
    });
    const clear = await tx.clear.create({
      data: {
        requestId,
        buyerAccountId: input.buyerAccountId,
        supplierAccountId: input.supplierAccountId,
        offerId: input.offerId,
        upstreamKeyId: input.upstreamKeyId,
        model: input.model ?? "llama-3.3-70b",
        modality: "text",
        priceCentsPerDollar: input.priceCentsPerDollar ?? 50,
        ceilingCents: 80,
        burnMicroDiem: input.burnMicroDiem ?? input.grossMicroUsdc * 2n,
        grossMicroUsdc: input.grossMicroUsdc,
        feeMicroUsdc: input.feeMicroUsdc,
        supplierMicroUsdc: share,
        ...(input.createdAt ? { createdAt: input.createdAt } : {}),
      },
    });
    await tx.$executeRawUnsafe(MARKET_ADD_IDS, [clear.id]);
    await tx.account.update({
      where: { id: input.buyerAccountId },
      data: { confirmedMicroUsdc: { decrement: input.grossMicroUsdc } },
    });
    await tx.account.update({
      where: { id: input.supplierAccountId },
      data: { supplierPayableMicroUsdc: { increment: share } },
    });
    return { clearId: clear.id, requestId };
  });
}

/** Ms from the clock's now to the next 00:00 UTC, plus `extraMs`. */
export function msPastNextMidnight(now: Date, extraMs = 1_000): number {
  const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return next - now.getTime() + extraMs;
}

/** Moves a movable clock to `hour`:00 UTC of the day after its current day (away from midnight edges). */
export function pinToHour(clock: { now(): Date; advance(ms: number): void }, hour: number): void {
  const now = clock.now();
  const target = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1, hour);
  clock.advance(target - now.getTime());
}
