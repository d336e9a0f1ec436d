import { randomUUID } from "node:crypto";
import type { Db } from "../src/adapters/db.js";
import type { Modality } from "../src/generated/prisma/client.js";
import { computeCharge } from "../src/lib/money.js";
import { createAccount, createOffer, createUpstreamKey } from "./fixtures.js";
import { MARKET_ADD_IDS } from "./market-totals.js";

/** A row of the public catalog (`/v1/models`) as the tests read it. */
export interface PublicRow {
  id: string;
  object: string;
  status: string;
  modality: string;
  capabilities: Record<string, unknown>;
  pricing?: Record<string, unknown>;
  constraints?: Record<string, unknown>;
  name: string;
  tier: string;
  created?: number;
  regionRestrictions?: string[];
}

export async function getJson<T = Record<string, unknown>>(
  baseUrl: string,
  path: string,
): Promise<{ status: number; body: T; headers: Headers }> {
  const res = await fetch(`${baseUrl}${path}`);
  return { status: res.status, body: (await res.json()) as T, headers: res.headers };
}

export async function gql<T = Record<string, unknown>>(
  baseUrl: string,
  query: string,
  variables?: Record<string, unknown>,
) {
  const res = await fetch(`${baseUrl}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.json()) as {
    data?: T;
    errors?: { message: string; extensions?: { code?: string } }[];
  };
}

/** One supplier (account, key, offer) that test clears trade against. */
export interface Supply {
  accountId: string;
  upstreamKeyId: string;
  offerId: string;
}

export async function createSupply(db: Db): Promise<Supply> {
  const supplier = await createAccount(db);
  const key = await createUpstreamKey(db, supplier.id);
  const offer = await createOffer(db, {
    accountId: supplier.id,
    upstreamKeyId: key.id,
    priceCentsPerDollar: 50,
    quantityMicroDiem: 1_000_000_000n,
  });
  return { accountId: supplier.id, upstreamKeyId: key.id, offerId: offer.id };
}

/**
 * A succeeded inference request and its clear, inserted directly (the router is not under test):
 * `burnMicroDiem` on `model` by `buyerAccountId` at `at`, optionally refunded. Returns the clear's id.
 */
export async function insertClear(
  db: Db,
  supply: Supply,
  args: {
    buyerAccountId: string;
    model: string;
    modality?: Modality;
    burnMicroDiem: bigint;
    at: Date;
    refunded?: boolean;
  },
): Promise<string> {
  const requestId = randomUUID();
  const modality = args.modality ?? "text";
  const charge = computeCharge(args.burnMicroDiem, 50, 1000);
  await db.inferenceRequest.create({
    data: {
      id: requestId,
      supportReference: randomUUID(),
      accountId: args.buyerAccountId,
      route: modality === "text" ? "chat" : modality === "image" ? "image" : "video_queue",
      modality,
      model: args.model,
      status: "succeeded",
      maxPriceCents: 80,
      clearingPriceCents: 50,
      burnMicroDiem: args.burnMicroDiem,
      costMicroUsdc: charge.grossMicroUsdc,
      attemptCount: 1,
      startedAt: args.at,
      completedAt: args.at,
    },
  });
  const clear = await db.clear.create({
    data: {
      requestId,
      buyerAccountId: args.buyerAccountId,
      supplierAccountId: supply.accountId,
      offerId: supply.offerId,
      upstreamKeyId: supply.upstreamKeyId,
      model: args.model,
      modality,
      priceCentsPerDollar: 50,
      ceilingCents: 80,
      burnMicroDiem: args.burnMicroDiem,
      grossMicroUsdc: charge.grossMicroUsdc,
      feeMicroUsdc: charge.feeMicroUsdc,
      supplierMicroUsdc: charge.supplierMicroUsdc,
      refundedAt: args.refunded ? args.at : null,
      createdAt: args.at,
    },
  });
  await db.$executeRawUnsafe(MARKET_ADD_IDS, [clear.id]);
  return clear.id;
}

export async function createBuyers(db: Db, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push((await createAccount(db)).id);
  return out;
}
