import { randomBytes } from "node:crypto";
import type { Db } from "../src/adapters/db.js";
import { supportReferenceOf } from "../src/domain/accounts/history-reads.js";
import type { Prisma } from "../src/generated/prisma/client.js";
import { nextUtcMidnight } from "../src/lib/clock.js";
import { uuidV7 } from "../src/lib/uuid7.js";

/** Builders for rows the foundation tests need before the domain services exist. */
export function randomWallet(): string {
  return `0x${randomBytes(20).toString("hex")}`;
}

export async function createAccount(db: Db, overrides: { walletAddress?: string } = {}) {
  return db.account.create({
    data: { walletAddress: overrides.walletAddress ?? randomWallet(), authProvider: "siwe" },
  });
}

export async function createUpstreamKey(
  db: Db,
  accountId: string,
  overrides: { lastBalanceMicroDiem?: bigint | null } = {},
) {
  return db.upstreamKey.create({
    data: {
      accountId,
      label: "test key",
      secretCiphertext: randomBytes(16),
      secretIv: randomBytes(12),
      secretTag: randomBytes(16),
      encryptionKeyId: "test",
      secretFingerprint: randomBytes(32).toString("hex"),
      secretLast4: "abcd",
      lastBalanceMicroDiem:
        overrides.lastBalanceMicroDiem === undefined ? 100_000_000n : overrides.lastBalanceMicroDiem,
    },
  });
}

export async function createOffer(
  db: Db,
  args: {
    accountId: string;
    upstreamKeyId: string;
    priceCentsPerDollar: number;
    quantityMicroDiem: bigint;
    status?: "active" | "paused";
  },
) {
  return db.offer.create({
    data: {
      accountId: args.accountId,
      upstreamKeyId: args.upstreamKeyId,
      priceCentsPerDollar: args.priceCentsPerDollar,
      quantityMicroDiem: args.quantityMicroDiem,
      remainingMicroDiem: args.quantityMicroDiem,
      status: args.status ?? "active",
      expiresAt: nextUtcMidnight(new Date()),
    },
  });
}

/**
 * An inference request record (chat, text, `llama-3.3-70b`, ceiling 80¢, in progress) for `accountId`,
 * as the router writes it after key resolution; `data` overrides any column.
 */
export async function createInferenceRequest(
  db: Db,
  accountId: string,
  data: Partial<Prisma.InferenceRequestUncheckedCreateInput> = {},
) {
  const startedAt = data.startedAt === undefined ? new Date() : new Date(data.startedAt);
  const row = await db.inferenceRequest.create({
    data: {
      // as the service writes it: a v7 id whose reference it is (none stored)
      id: uuidV7(startedAt),
      accountId,
      route: "chat",
      modality: "text",
      model: "llama-3.3-70b",
      maxPriceCents: 80,
      startedAt,
      ...data,
    },
  });
  return { ...row, supportReference: supportReferenceOf(row) };
}
