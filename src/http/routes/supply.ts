import { Router } from "express";
import { idParam, pageQuery } from "../../contract/common.js";
import { patchOfferBody, postOfferBody, registerUpstreamKeyBody } from "../../contract/supply.js";
import type {
  OfferView,
  PayoutView,
  SupplierClearRow,
  SupplierLedgerLine,
  UpstreamKeyView,
} from "../../domain/supply/supply-types.js";
import { formatDecimal6 } from "../../lib/money.js";
import type { Runtime } from "../../runtime.js";
import { requireSameOrigin, requireSession, viewerOf } from "../auth.js";
import { parse } from "../validate.js";

/**
 * REST output shapes of the supply side. DIEM and USDC amounts are six-decimal strings;
 * the upstream secret never appears (only `maskedKey`).
 */
const dec = formatDecimal6;
const iso = (d: Date | null): string | null => d?.toISOString() ?? null;

export function presentUpstreamKey(k: UpstreamKeyView) {
  return {
    id: k.id,
    label: k.label,
    status: k.status,
    maskedKey: k.maskedKey,
    balanceDiem: k.balanceMicroDiem === null ? null : dec(k.balanceMicroDiem),
    lastBalanceAt: iso(k.lastBalanceAt),
    authFailedAt: iso(k.authFailedAt),
    cooldownUntil: iso(k.cooldownUntil),
    createdAt: k.createdAt.toISOString(),
    revokedAt: iso(k.revokedAt),
    liveOfferId: k.liveOfferId,
  };
}

export function presentOffer(o: OfferView) {
  return {
    id: o.id,
    upstreamKeyId: o.upstreamKeyId,
    keyLabel: o.keyLabel,
    keyStatus: o.keyStatus,
    priceCentsPerDollar: o.priceCentsPerDollar,
    effectivePriceCentsPerDollar: o.effectivePriceCentsPerDollar,
    schedule: o.schedule,
    repostDaily: o.repostDaily,
    dailyQuantityDiem: o.dailyQuantityMicroDiem === null ? null : dec(o.dailyQuantityMicroDiem),
    repostedFromId: o.repostedFromId,
    quantityDiem: dec(o.quantityMicroDiem),
    remainingDiem: dec(o.remainingMicroDiem),
    reservedDiem: dec(o.reservedMicroDiem),
    soldDiem: dec(o.soldMicroDiem),
    status: o.status,
    expiresAt: o.expiresAt.toISOString(),
    createdAt: o.createdAt.toISOString(),
    updatedAt: o.updatedAt.toISOString(),
    endedAt: iso(o.endedAt),
  };
}

function presentLedgerLine(l: SupplierLedgerLine) {
  return {
    id: l.id,
    book: l.book,
    kind: l.kind,
    amountUsdc: dec(l.amountMicroUsdc),
    transactionId: l.transactionId,
    transactionKind: l.transactionKind,
    createdAt: l.createdAt.toISOString(),
  };
}

function presentPayout(p: PayoutView) {
  return {
    id: p.id,
    period: p.period,
    toAddress: p.toAddress,
    amountUsdc: dec(p.amountMicroUsdc),
    status: p.status,
    transaction: p.txHash,
    failureReason: p.failureReason,
    createdAt: p.createdAt.toISOString(),
    submittedAt: iso(p.submittedAt),
    confirmedAt: iso(p.confirmedAt),
  };
}

function presentClear(c: SupplierClearRow) {
  return {
    clearId: c.clearId,
    offerId: c.offerId,
    upstreamKeyId: c.upstreamKeyId,
    model: c.model,
    modality: c.modality,
    priceCentsPerDollar: c.priceCentsPerDollar,
    burnDiem: dec(c.burnMicroDiem),
    grossUsdc: dec(c.grossMicroUsdc),
    feeUsdc: dec(c.feeMicroUsdc),
    earnedUsdc: dec(c.earnedMicroUsdc),
    refunded: c.refundedAt !== null,
    refundedAt: iso(c.refundedAt),
    createdAt: c.createdAt.toISOString(),
  };
}

/** SPEC "Supplier (session)". Every route: session cookie only; writes must be same-origin. */
export function supplyRoutes(rt: Runtime): Router {
  const r = Router();
  const { supply, offers, earnings } = rt.services;
  const session = requireSession(rt.services);
  r.use(["/v1/supply/upstream-keys", "/v1/supply/offers"], requireSameOrigin(rt.config));

  r.post("/v1/supply/upstream-keys", session, async (req, res) => {
    const body = parse(registerUpstreamKeyBody, req.body);
    const key = await supply.registerUpstreamKey({
      accountId: viewerOf(res).accountId,
      upstreamApiKey: body.upstreamApiKey,
      label: body.label,
    });
    res.status(201).json(presentUpstreamKey(key));
  });

  r.get("/v1/supply/upstream-keys/mine", session, async (_req, res) => {
    const keys = await supply.listUpstreamKeys(viewerOf(res).accountId);
    res.json({ data: keys.map(presentUpstreamKey) });
  });

  r.delete("/v1/supply/upstream-keys/:id", session, async (req, res) => {
    const { id: upstreamKeyId } = parse(idParam, req.params);
    const out = await supply.revokeUpstreamKey({ accountId: viewerOf(res).accountId, upstreamKeyId });
    res.json({ status: "ok", cancelledOffers: out.cancelledOffers, upstreamKey: presentUpstreamKey(out.key) });
  });

  r.post("/v1/supply/offers", session, async (req, res) => {
    const body = parse(postOfferBody, req.body);
    const offer = await offers.postOffer({
      accountId: viewerOf(res).accountId,
      upstreamKeyId: body.upstreamKeyId,
      priceCentsPerDollar: body.priceCentsPerDollar,
      quantityMicroDiem: body.quantityDiem,
      repostDaily: body.repostDaily,
      dailyQuantityMicroDiem: body.dailyQuantityDiem ?? undefined,
      schedule: body.schedule ?? undefined,
    });
    res.status(201).json(presentOffer(offer));
  });

  r.get("/v1/supply/offers/mine", session, async (req, res) => {
    const q = parse(pageQuery, req.query);
    const page = await offers.listOffers({ accountId: viewerOf(res).accountId, limit: q.limit, cursor: q.cursor });
    res.json({ data: page.items.map(presentOffer), nextCursor: page.nextCursor });
  });

  r.patch("/v1/supply/offers/:id", session, async (req, res) => {
    const { id: offerId } = parse(idParam, req.params);
    const body = parse(patchOfferBody, req.body);
    const offer = await offers.updateOffer({
      accountId: viewerOf(res).accountId,
      offerId,
      priceCentsPerDollar: body.priceCentsPerDollar,
      status: body.status,
      repostDaily: body.repostDaily,
      // absent: unchanged; null: the cap removed
      dailyQuantityMicroDiem: body.dailyQuantityDiem,
      schedule: body.schedule,
    });
    res.json(presentOffer(offer));
  });

  r.delete("/v1/supply/offers/:id", session, async (req, res) => {
    const { id: offerId } = parse(idParam, req.params);
    const offer = await offers.cancelOffer({ accountId: viewerOf(res).accountId, offerId });
    res.json(presentOffer(offer));
  });

  r.get("/v1/supply/ledger", session, async (req, res) => {
    const q = parse(pageQuery, req.query);
    const l = await earnings.supplierLedger({ accountId: viewerOf(res).accountId, limit: q.limit, cursor: q.cursor });
    res.json({
      payableUsdc: dec(l.payableMicroUsdc),
      heldUsdc: dec(l.heldMicroUsdc),
      paidOutUsdc: dec(l.paidOutMicroUsdc),
      payoutPendingUsdc: dec(l.payoutPendingMicroUsdc),
      payoutMinimumUsdc: dec(l.payoutMinimumMicroUsdc),
      recentPayouts: l.recentPayouts.map(presentPayout),
      data: l.items.map(presentLedgerLine),
      nextCursor: l.nextCursor,
    });
  });

  r.get("/v1/supply/inference-history", session, async (req, res) => {
    const q = parse(pageQuery, req.query);
    const page = await earnings.supplierInferenceHistory({
      accountId: viewerOf(res).accountId,
      limit: q.limit,
      cursor: q.cursor,
    });
    res.json({ data: page.items.map(presentClear), nextCursor: page.nextCursor });
  });
  return r;
}
