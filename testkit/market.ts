import { randomUUID } from "node:crypto";
import { textPricer } from "../src/domain/inference/pipeline/admission.js";
import { type AttemptingSession, storedAttempts } from "../src/domain/inference/pipeline/session.js";
import { confirmTopUp, creditPendingTopUp } from "../src/domain/ledger/ledger.js";
import { nextUtcMidnight } from "../src/lib/clock.js";
import { SecretBox } from "../src/lib/secret-box.js";
import type { UpstreamSimulator } from "../src/local/upstream-sim/index.js";
import { call, createKey, signIn } from "./actors.js";
import type { TestApp } from "./harness.js";

export const CATALOG_KEY = "VENICE_INFERENCE_KEY_test_catalog";

/** The app's environment for a simulator that holds `CATALOG_KEY` (the catalog sync reads with it). */
export function simEnv(sim: UpstreamSimulator): Record<string, string> {
  return { UPSTREAM_BASE_URL: sim.baseUrl, CATALOG_SYNC_KEY: CATALOG_KEY };
}

export interface SupplierKey {
  secret: string;
  upstreamKeyId: string;
  offerId: string;
  priceCents: number;
}

/** The stored columns of an upstream key sealed the way the service seals it (AES-GCM, owner as AAD). */
export function sealedKey(box: SecretBox, ownerId: string, secret: string) {
  const sealed = box.seal(secret, ownerId);
  return {
    accountId: ownerId,
    secretCiphertext: sealed.ciphertext,
    secretIv: sealed.iv,
    secretTag: sealed.tag,
    encryptionKeyId: sealed.keyId,
    secretFingerprint: box.fingerprint(secret),
    secretLast4: secret.slice(-4),
  };
}

/**
 * A supplier with one registered upstream key per offer (sealed like the service seals them), each
 * key funded in the simulator, and one active offer per key. Times come from the app's clock, as the
 * service's own offers do: an offer expires at the next UTC midnight of the app's day (DIEM's).
 */
export async function addSupply(
  app: TestApp,
  sim: UpstreamSimulator,
  offers: { priceCents: number; quantityMicroDiem: bigint; keyBalanceMicroDiem?: bigint }[],
): Promise<{ supplierAccountId: string; supplierWallet: string; keys: SupplierKey[] }> {
  const db = app.rt.db;
  const box = new SecretBox(app.rt.config.secrets.keyEncryptionKey);
  const wallet = `0x${randomUUID().replaceAll("-", "").padEnd(40, "0").slice(0, 40)}`;
  const supplier = await db.account.create({ data: { walletAddress: wallet, authProvider: "siwe" } });
  const keys: SupplierKey[] = [];
  for (const o of offers) {
    const secret = `VENICE_INFERENCE_KEY_${randomUUID().replaceAll("-", "")}`;
    const balance = o.keyBalanceMicroDiem ?? 100_000_000n;
    sim.state.addKey({ key: secret, diemMicro: balance });
    const k = await db.upstreamKey.create({
      data: {
        ...sealedKey(box, supplier.id, secret),
        label: `key ${o.priceCents}`,
        lastBalanceMicroDiem: balance,
        lastBalanceAt: app.rt.clock.now(),
      },
    });
    const offer = await db.offer.create({
      data: {
        accountId: supplier.id,
        upstreamKeyId: k.id,
        priceCentsPerDollar: o.priceCents,
        quantityMicroDiem: o.quantityMicroDiem,
        remainingMicroDiem: o.quantityMicroDiem,
        expiresAt: nextUtcMidnight(app.rt.clock.now()),
      },
    });
    keys.push({ secret, upstreamKeyId: k.id, offerId: offer.id, priceCents: o.priceCents });
  }
  return { supplierAccountId: supplier.id, supplierWallet: wallet, keys };
}

/** Credits confirmed USDC through the books (a settled top-up, then its confirmation). */
export async function fundConfirmed(app: TestApp, accountId: string, amountMicroUsdc: bigint): Promise<void> {
  const paymentId = randomUUID();
  await app.rt.db.$transaction(async (tx) => {
    const nonce = `0x${randomUUID().replaceAll("-", "")}${randomUUID().replaceAll("-", "")}`;
    const acct = await tx.account.findUniqueOrThrow({ where: { id: accountId } });
    await tx.payment.create({
      data: {
        id: paymentId,
        accountId,
        kind: "top_up",
        status: "confirmed",
        payerAddress: acct.walletAddress,
        payToAddress: acct.walletAddress,
        assetAddress: acct.walletAddress,
        amountMicroUsdc,
        authorizationNonce: nonce,
        settlementTxHash: `0x${randomUUID().replaceAll("-", "")}${randomUUID().replaceAll("-", "")}`,
      },
    });
    await creditPendingTopUp(tx, { accountId, paymentId, amountMicroUsdc });
    await confirmTopUp(tx, { accountId, paymentId, amountMicroUsdc, at: new Date() });
  });
}

/** A signed-in buyer with an API key and `confirmedMicroUsdc` of spendable balance. */
export async function fundedBuyerKey(app: TestApp, confirmedMicroUsdc: bigint, maxPrice?: number) {
  const user = await signIn(app);
  const key = await createKey(app, user);
  if (confirmedMicroUsdc > 0n) await fundConfirmed(app, user.accountId, confirmedMicroUsdc);
  if (maxPrice !== undefined)
    await app.rt.db.account.update({ where: { id: user.accountId }, data: { maxPriceCentsPerDollar: maxPrice } });
  return { user, apiKey: key.apiKey, accountId: user.accountId };
}

export async function confirmedOf(app: TestApp, accountId: string): Promise<bigint> {
  return (await app.rt.db.account.findUniqueOrThrow({ where: { id: accountId } })).confirmedMicroUsdc;
}

/**
 * Opens a text request straight on the pipeline (as the chat route does, with the given prompt
 * estimate): escrow is taken, nothing is sent upstream.
 */
export async function openSession(
  app: TestApp,
  accountId: string,
  o: { model?: string; stream?: boolean; promptEstimate?: number; maxTokens?: number } = {},
): Promise<AttemptingSession> {
  return app.rt.services.inference.open({
    accountId,
    apiKeyId: (await app.rt.db.apiKey.findFirstOrThrow({ where: { accountId } })).id,
    route: "chat",
    modality: "text",
    model: o.model ?? "zai-org-glm-5-1",
    stream: o.stream ?? false,
    price: (model) => textPricer(model, o.promptEstimate ?? 40, o.maxTokens ?? 20),
  });
}

/** POST /v1/chat/completions with a Bearer key. */
export function chat(app: TestApp, apiKey: string, body: Record<string, unknown>) {
  return call(app, {
    method: "POST",
    path: "/v1/chat/completions",
    headers: { authorization: `Bearer ${apiKey}` },
    body,
  });
}

/** POST /v1/responses with a Bearer key. */
export function responses(app: TestApp, apiKey: string, body: Record<string, unknown>) {
  return call(app, { method: "POST", path: "/v1/responses", headers: { authorization: `Bearer ${apiKey}` }, body });
}

/** A request record with its attempts typed (in ordinal order), by support reference (its request id). */
export async function requestByReference(app: TestApp, ref: string) {
  const r = await app.rt.db.inferenceRequest.findFirstOrThrow({ where: { id: ref } });
  return { ...r, attempts: await attemptsOf(app, r) };
}

/** A record's attempts as the view `inference_request_attempts` reads them (a lone success from its clear). */
async function attemptsOf(app: TestApp, r: { id: string; startedAt: Date }) {
  const rows = await app.rt.db.$queryRaw<{ attempts: unknown }[]>`
    SELECT attempts FROM inference_request_attempts WHERE request_id = ${r.id}::uuid AND started_at = ${r.startedAt}`;
  return storedAttempts(rows[0]?.attempts);
}

/** The record of a request that is ending (it is written when the request ends), polled for up to 5 s. */
export async function endedRequest(app: TestApp, ref: string) {
  for (let i = 0; i < 100; i++) {
    const found = await app.rt.db.inferenceRequest.findFirst({ where: { id: ref } });
    if (found) return { ...found, attempts: await attemptsOf(app, found) };
    await new Promise((r) => setTimeout(r, 50));
  }
  return requestByReference(app, ref);
}

/**
 * Empties the offer book, so a test routes on the supply it adds next and on nothing an earlier test
 * of the file left: every active or paused offer is cancelled (ended at `endedAt`, default now), and
 * the cached book of `app` and of each of `peers` (other processes on the same database) is dropped.
 */
export async function emptyBook(app: TestApp, opts: { endedAt?: Date; peers?: TestApp[] } = {}): Promise<void> {
  await app.rt.db.offer.updateMany({
    where: { status: { in: ["active", "paused"] } },
    data: { status: "cancelled", endedAt: opts.endedAt ?? new Date() },
  });
  for (const a of [app, ...(opts.peers ?? [])]) a.rt.services.inference.invalidateBook();
}

/** Expires every video job an earlier test left rendering or waiting for its media: no poll picks it up. */
export async function expireLiveVideoJobs(app: TestApp): Promise<void> {
  await app.rt.db.videoJob.updateMany({
    where: { status: { in: ["rendering", "completed_no_media"] } },
    data: { status: "expired", nextPollAt: null },
  });
}

/** The account's USDC held for requests in flight. */
export async function reservedOf(app: TestApp, accountId: string): Promise<bigint> {
  return (await app.rt.db.account.findUniqueOrThrow({ where: { id: accountId } })).reservedMicroUsdc;
}

/** The supplier's share payable (final). */
export async function payableOf(app: TestApp, accountId: string): Promise<bigint> {
  return (await app.rt.db.account.findUniqueOrThrow({ where: { id: accountId } })).supplierPayableMicroUsdc;
}

/** The supplier's share on hold (a video job not yet final: docs/decisions.md "Payout hold"). */
export async function heldOf(app: TestApp, accountId: string): Promise<bigint> {
  return (await app.rt.db.account.findUniqueOrThrow({ where: { id: accountId } })).supplierHeldMicroUsdc;
}

/**
 * Takes a supply (`addSupply`) off the market: each of its offers still on the book (active or
 * paused; a sold-out one is already off) is cancelled through the service, as its supplier would.
 */
export async function withdrawSupply(
  app: TestApp,
  supply: { supplierAccountId: string; keys: { offerId: string }[] },
): Promise<void> {
  const live = await app.rt.db.offer.findMany({
    where: { id: { in: supply.keys.map((k) => k.offerId) }, status: { in: ["active", "paused"] } },
    select: { id: true },
  });
  for (const o of live) {
    await app.rt.services.offers.cancelOffer({ accountId: supply.supplierAccountId, offerId: o.id });
  }
}

/** What the simulator charged and refunded for videos on one upstream key (zero when none). */
export function simVideoBurn(sim: UpstreamSimulator, secret: string) {
  return sim.state.videoBurnByKey().get(secret) ?? { chargedMicro: 0n, refundedMicro: 0n, netMicro: 0n, jobs: 0 };
}
