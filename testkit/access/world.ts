import { randomBytes } from "node:crypto";
import { debitPayout } from "../../src/domain/ledger/ledger.js";
import type { UpstreamSimulator } from "../../src/local/upstream-sim/index.js";
import { bearer, createKey, type SignedInUser, signIn } from "../actors.js";
import type { TestApp } from "../harness.js";
import { addSupply, fundConfirmed } from "../market.js";
import { cookie, rest } from "./transports.js";

/**
 * The access matrix's world, seeded through the routes a client uses wherever one exists: two
 * accounts, each a buyer and a supplier with records of every owned kind, and a third supplier
 * who serves every request the matrix itself sends (so neither party's books move under another's
 * cell).
 */

export const TEXT_MODEL = "zai-org-glm-5-1";
export const IMAGE_MODEL = "venice-sd35";
export const VIDEO_JOB = {
  model: "wan-2.6-text-to-video",
  prompt: "a fox in the snow",
  duration: "5s",
  resolution: "720p",
};

export interface Party {
  user: SignedInUser;
  /** an active API key */
  key: { id: string; apiKey: string };
  /** an upstream key registered through REST, with `offerId` live on it */
  upstream: { id: string; secret: string };
  offerId: string;
  /** a second registered upstream key with no offer */
  bareUpstreamKeyId: string;
  /** a completed chat's support reference, and the completion's id */
  supportReference: string;
  completionId: string;
  /** a completed image request */
  imageReference: string;
  /** a video job still rendering */
  videoQueueId: string;
  /** the confirmed top-up that funded it */
  paymentId: string;
  /** a payout of part of its supplier earnings */
  payoutId: string;
}

export interface Owner extends Party {
  /** one of the owner's keys, revoked through REST */
  revokedKey: { id: string; apiKey: string };
  /** one of the owner's sessions, signed out through POST /auth/logout */
  loggedOutCookie: string;
}

export interface AccessWorld {
  owner: Owner;
  foreign: Party;
}

/** A fresh upstream secret the simulator knows, with 100 DIEM. */
export function newUpstreamSecret(sim: UpstreamSimulator): string {
  const secret = `vk-access-${randomBytes(16).toString("hex")}`;
  sim.state.addKey({ key: secret, diemMicro: 100_000_000n });
  return secret;
}

function expectStatus(r: { status: number; text: string }, status: number, what: string): void {
  if (r.status !== status) throw new Error(`${what}: expected ${status}, got ${r.status}: ${r.text.slice(0, 500)}`);
}

/** POST /v1/supply/upstream-keys with a fresh simulator secret. */
export async function registerUpstreamKey(app: TestApp, sim: UpstreamSimulator, user: SignedInUser) {
  const secret = newUpstreamSecret(sim);
  const r = await rest(app, "POST", "/v1/supply/upstream-keys", cookie(user.cookie), {
    upstreamApiKey: secret,
    label: "access matrix",
  });
  expectStatus(r, 201, "register upstream key");
  return { id: (r.body as { id: string }).id, secret };
}

/** POST /v1/supply/offers. */
export async function postOffer(app: TestApp, user: SignedInUser, upstreamKeyId: string, priceCents: number) {
  const r = await rest(app, "POST", "/v1/supply/offers", cookie(user.cookie), {
    upstreamKeyId,
    priceCentsPerDollar: priceCents,
    quantityDiem: "50.000000",
  });
  expectStatus(r, 201, "post offer");
  return (r.body as { id: string }).id;
}

/** A registered upstream key with a live offer at 80 (never the cheapest: nothing routes to it). */
export async function keyWithOffer(app: TestApp, sim: UpstreamSimulator, user: SignedInUser) {
  const key = await registerUpstreamKey(app, sim, user);
  return { upstreamKeyId: key.id, offerId: await postOffer(app, user, key.id, 80) };
}

/** A buffered chat; returns its support reference and completion id. */
export async function chatOnce(app: TestApp, apiKey: string) {
  const r = await rest(app, "POST", "/v1/chat/completions", bearer(apiKey), {
    model: TEXT_MODEL,
    messages: [{ role: "user", content: "access matrix [[sim:tokens=12]]" }],
  });
  expectStatus(r, 200, "chat");
  return {
    supportReference: r.headers.get("x-svc-support-reference") ?? "",
    completionId: (r.body as { id: string }).id,
  };
}

export async function imageOnce(app: TestApp, apiKey: string): Promise<string> {
  const r = await rest(app, "POST", "/v1/image/generate", bearer(apiKey), {
    model: IMAGE_MODEL,
    prompt: "a lighthouse",
  });
  expectStatus(r, 200, "image");
  return r.headers.get("x-svc-support-reference") ?? "";
}

/** POST /v1/video/queue; the simulator keeps it rendering. */
export async function queueVideo(app: TestApp, apiKey: string): Promise<string> {
  const r = await rest(app, "POST", "/v1/video/queue", bearer(apiKey), VIDEO_JOB);
  expectStatus(r, 200, "video queue");
  return (r.body as { queue_id: string }).queue_id;
}

/** A confirmed payout of half the supplier's payable balance (the payout run's records and journal). */
async function payOut(app: TestApp, user: SignedInUser): Promise<string> {
  const db = app.rt.db;
  const { supplierPayableMicroUsdc } = await db.account.findUniqueOrThrow({ where: { id: user.accountId } });
  const amountMicroUsdc = supplierPayableMicroUsdc / 2n;
  if (amountMicroUsdc <= 0n) throw new Error("no supplier earnings to pay out");
  return db.$transaction(async (tx) => {
    const p = await tx.payout.create({
      data: {
        accountId: user.accountId,
        period: "2020-01-01",
        toAddress: user.walletAddress.toLowerCase(),
        amountMicroUsdc,
        status: "confirmed",
        txHash: `0x${randomBytes(32).toString("hex")}`,
        submittedAt: new Date(),
        confirmedAt: new Date(),
      },
    });
    await debitPayout(tx, { accountId: user.accountId, payoutId: p.id, amountMicroUsdc });
    return p.id;
  });
}

async function latestPaymentId(app: TestApp, accountId: string): Promise<string> {
  const p = await app.rt.db.payment.findFirstOrThrow({ where: { accountId }, orderBy: { createdAt: "desc" } });
  return p.id;
}

/**
 * Seeds the world. Trades cross on purpose, so each party's supplier books hold the other's
 * purchases (which must never identify the buyer): the owner's offer (35) serves the foreign
 * account's chat, image and video; then the foreign offer (34) serves the owner's. Last, a market
 * supplier at 30 takes every later request.
 */
export async function seedAccessWorld(app: TestApp, sim: UpstreamSimulator): Promise<AccessWorld> {
  sim.state.setVideoConfig({ processingPolls: 100_000, renderMs: 0, defaultOutcome: "mp4" });
  const [ownerUser, foreignUser] = await Promise.all([signIn(app), signIn(app)]);
  const [ownerKey, foreignKey] = await Promise.all([createKey(app, ownerUser, "owner"), createKey(app, foreignUser)]);
  await fundConfirmed(app, ownerUser.accountId, 50_000_000n);
  await fundConfirmed(app, foreignUser.accountId, 50_000_000n);

  const ownerUpstream = await registerUpstreamKey(app, sim, ownerUser);
  const ownerOffer = await postOffer(app, ownerUser, ownerUpstream.id, 35);
  const ownerBare = await registerUpstreamKey(app, sim, ownerUser);
  const foreignChat = await chatOnce(app, foreignKey.apiKey);
  const foreignImage = await imageOnce(app, foreignKey.apiKey);
  const foreignVideo = await queueVideo(app, foreignKey.apiKey);

  const foreignUpstream = await registerUpstreamKey(app, sim, foreignUser);
  const foreignOffer = await postOffer(app, foreignUser, foreignUpstream.id, 34);
  const foreignBare = await registerUpstreamKey(app, sim, foreignUser);
  const ownerChat = await chatOnce(app, ownerKey.apiKey);
  const ownerImage = await imageOnce(app, ownerKey.apiKey);
  const ownerVideo = await queueVideo(app, ownerKey.apiKey);

  await addSupply(app, sim, [
    { priceCents: 30, quantityMicroDiem: 1_000_000_000n, keyBalanceMicroDiem: 2_000_000_000n },
  ]);
  app.rt.services.inference.invalidateBook();

  const [ownerPayout, foreignPayout] = [await payOut(app, ownerUser), await payOut(app, foreignUser)];

  // the revoked credentials were in use first (any cache of them is warm), then revoked the way a
  // client revokes them
  const revokedKey = await createKey(app, ownerUser, "revoked");
  await chatOnce(app, revokedKey.apiKey);
  expectStatus(await rest(app, "GET", "/v1/agent/me", bearer(revokedKey.apiKey)), 200, "key in use");
  const revoked = await rest(app, "DELETE", `/v1/account/api-keys/${revokedKey.id}`, cookie(ownerUser.cookie));
  expectStatus(revoked, 200, "revoke key");
  const second = await signIn(app, { address: ownerUser.walletAddress, privateKey: ownerUser.privateKey });
  if (second.accountId !== ownerUser.accountId) throw new Error("a second sign-in made another account");
  expectStatus(await rest(app, "GET", "/v1/me", cookie(second.cookie)), 200, "session in use");
  expectStatus(await rest(app, "POST", "/auth/logout", cookie(second.cookie)), 200, "logout");

  return {
    owner: {
      user: ownerUser,
      key: ownerKey,
      upstream: ownerUpstream,
      offerId: ownerOffer,
      bareUpstreamKeyId: ownerBare.id,
      supportReference: ownerChat.supportReference,
      completionId: ownerChat.completionId,
      imageReference: ownerImage,
      videoQueueId: ownerVideo,
      paymentId: await latestPaymentId(app, ownerUser.accountId),
      payoutId: ownerPayout,
      revokedKey,
      loggedOutCookie: second.cookie,
    },
    foreign: {
      user: foreignUser,
      key: foreignKey,
      upstream: foreignUpstream,
      offerId: foreignOffer,
      bareUpstreamKeyId: foreignBare.id,
      supportReference: foreignChat.supportReference,
      completionId: foreignChat.completionId,
      imageReference: foreignImage,
      videoQueueId: foreignVideo,
      paymentId: await latestPaymentId(app, foreignUser.accountId),
      payoutId: foreignPayout,
    },
  };
}

/** Secrets of a party that are not database columns: its key plaintexts, upstream secret, cookie. */
export function secretsOf(p: Party | Owner): string[] {
  const own = [p.key.apiKey, p.upstream.secret, p.user.cookie.slice("svc_session=".length)];
  return "revokedKey" in p ? [...own, p.revokedKey.apiKey, p.loggedOutCookie.slice("svc_session=".length)] : own;
}
