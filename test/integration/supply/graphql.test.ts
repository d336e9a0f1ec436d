import { randomUUID } from "node:crypto";
import { createClient } from "graphql-sse";
import { describe, expect } from "vitest";
import { call, createKey, type SignedInUser, signIn } from "../../../testkit/actors.js";
import { fileWorld, appTest as test } from "../../../testkit/app-test.js";
import { simKey } from "../../../testkit/supply.js";

test.override("appOptions", { sim: {}, catalogSyncKey: false });
const world = fileWorld(test);

interface GqlResult<T> {
  data?: T;
  errors?: { message: string; extensions?: { code?: string } }[];
}

async function gql<T>(
  headers: Record<string, string>,
  query: string,
  variables: Record<string, unknown> = {},
): Promise<GqlResult<T>> {
  const res = await call(world.app, { method: "POST", path: "/graphql", headers, body: { query, variables } });
  return res.body as GqlResult<T>;
}

const session = (u: SignedInUser) => ({ cookie: u.cookie });
const codeOf = (r: GqlResult<unknown>) => r.errors?.[0]?.extensions?.code;

const REGISTER = `mutation($k: String!, $l: String!) {
  registerUpstreamKey(input: { upstreamApiKey: $k, label: $l }) {
    upstreamKey { id label status maskedKey balance lastBalanceAt liveOffer { id } }
  }
}`;
const POST = `mutation($key: ID!, $price: Int!, $q: MicroDiem!) {
  postOffer(input: { upstreamKeyId: $key, priceCentsPerDollar: $price, quantity: $q }) {
    offer { id status priceCentsPerDollar quantity remaining sold keyStatus expiresAt upstreamKey { id maskedKey } }
  }
}`;
const UPDATE = `mutation($id: ID!, $price: Int, $status: OfferStatusChange) {
  updateOffer(input: { id: $id, priceCentsPerDollar: $price, status: $status }) { offer { id status priceCentsPerDollar } }
}`;

type Registered = { registerUpstreamKey: { upstreamKey: { id: string; maskedKey: string; balance: string } } };
type Posted = { postOffer: { offer: { id: string; status: string; quantity: string; keyStatus: string } } };

async function registered(user: SignedInUser, diem = 30_000_000n): Promise<{ keyId: string; secret: string }> {
  const secret = simKey(world.sim, diem);
  const r = await gql<Registered>(session(user), REGISTER, { k: secret, l: "gql key" });
  expect(r.errors).toBeUndefined();
  return { keyId: r.data?.registerUpstreamKey.upstreamKey.id ?? "", secret };
}

describe("success", () => {
  test("register, post, pause, reprice, cancel and revoke through the same services as REST", async () => {
    const user = await signIn(world.app);
    const secret = simKey(world.sim, 30_000_000n);
    const reg = await gql<Registered>(session(user), REGISTER, { k: secret, l: "gql key" });
    expect(reg.errors).toBeUndefined();
    const key = reg.data?.registerUpstreamKey.upstreamKey;
    expect(key).toMatchObject({
      status: "ACTIVE",
      maskedKey: `…${secret.slice(-4)}`,
      balance: "30000000",
      liveOffer: null,
    });
    expect(JSON.stringify(reg)).not.toContain(secret);

    const posted = await gql<Posted>(session(user), POST, { key: key?.id, price: 33, q: "2500000" });
    expect(posted.errors).toBeUndefined();
    const offer = posted.data?.postOffer.offer;
    expect(offer).toMatchObject({
      status: "ACTIVE",
      quantity: "2500000",
      remaining: "2500000",
      sold: "0",
      keyStatus: "ACTIVE",
    });
    // REST shows the same offer
    const rest = await call(world.app, { method: "GET", path: "/v1/supply/offers/mine", headers: session(user) });
    expect((rest.body as { data: { id: string; quantityDiem: string }[] }).data[0]).toMatchObject({
      id: offer?.id,
      quantityDiem: "2.500000",
    });

    const paused = await gql<{ updateOffer: { offer: { status: string; priceCentsPerDollar: number } } }>(
      session(user),
      UPDATE,
      { id: offer?.id, status: "PAUSED", price: 34 },
    );
    expect(paused.data?.updateOffer.offer).toMatchObject({ status: "PAUSED", priceCentsPerDollar: 34 });

    const lists = await gql<{
      myUpstreamKeys: { id: string; liveOffer: { id: string; status: string } | null; offers: { id: string }[] }[];
      myOffers: { edges: { node: { id: string; status: string; keyStatus: string } }[] };
    }>(
      session(user),
      `{ myUpstreamKeys { id liveOffer { id status } offers { id } }
         myOffers(first: 10) { edges { node { id status keyStatus } } } }`,
    );
    expect(lists.errors).toBeUndefined();
    expect(lists.data?.myUpstreamKeys).toEqual([
      { id: key?.id, liveOffer: { id: offer?.id, status: "PAUSED" }, offers: [{ id: offer?.id }] },
    ]);
    expect(lists.data?.myOffers.edges.map((e) => e.node)).toEqual([
      { id: offer?.id, status: "PAUSED", keyStatus: "ACTIVE" },
    ]);

    const cancelled = await gql<{ cancelOffer: { offer: { status: string } } }>(
      session(user),
      "mutation($id: ID!) { cancelOffer(input: { id: $id }) { offer { status } } }",
      { id: offer?.id },
    );
    expect(cancelled.data?.cancelOffer.offer.status).toBe("CANCELLED");

    const again = await gql<Posted>(session(user), POST, { key: key?.id, price: 35, q: "1000000" });
    expect(again.errors).toBeUndefined();
    const revoked = await gql<{ revokeUpstreamKey: { cancelledOffers: number; upstreamKey: { status: string } } }>(
      session(user),
      "mutation($id: ID!) { revokeUpstreamKey(input: { id: $id }) { cancelledOffers upstreamKey { status revokedAt } } }",
      { id: key?.id },
    );
    expect(revoked.data?.revokeUpstreamKey).toMatchObject({ cancelledOffers: 1, upstreamKey: { status: "REVOKED" } });
  });

  test("mySupplierLedger and mySupplierInferenceHistory answer with the REST numbers", async () => {
    const user = await signIn(world.app);
    const r = await gql<{
      mySupplierLedger: { payable: string; paidOut: string; payoutMinimum: string; entries: unknown[] };
      mySupplierInferenceHistory: { items: unknown[]; nextCursor: string | null };
    }>(
      session(user),
      "{ mySupplierLedger { payable paidOut payoutMinimum entries { id amount } nextCursor } mySupplierInferenceHistory { items { clearId } nextCursor } }",
    );
    expect(r.errors).toBeUndefined();
    expect(r.data).toEqual({
      mySupplierLedger: { payable: "0", paidOut: "0", payoutMinimum: "1000000", entries: [], nextCursor: null },
      mySupplierInferenceHistory: { items: [], nextCursor: null },
    });
  });

  test("the UpstreamKey type has no field that could carry the secret", async () => {
    const r = await gql<{ __type: { fields: { name: string }[] } }>(
      {},
      '{ __type(name: "UpstreamKey") { fields { name } } }',
    );
    const names = r.data?.__type.fields.map((f) => f.name) ?? [];
    expect(names).toContain("maskedKey");
    expect(names.filter((n) => /secret|cipher|fingerprint|apiKey|plain/i.test(n))).toEqual([]);
  });
});

describe("standing offers and schedules (issue 30)", () => {
  const POST_STANDING = `mutation($key: ID!, $q: MicroDiem!, $daily: MicroDiem, $schedule: [PriceStepInput!]) {
    postOffer(input: { upstreamKeyId: $key, priceCentsPerDollar: 64, quantity: $q, repostDaily: true,
                       dailyQuantity: $daily, schedule: $schedule }) {
      offer { id priceCentsPerDollar effectivePriceCentsPerDollar repostDaily dailyQuantity repostedFromId
              schedule { fromUtc priceCentsPerDollar } }
    }
  }`;
  const SET = `mutation($id: ID!, $repost: Boolean, $daily: MicroDiem, $schedule: [PriceStepInput!]) {
    updateOffer(input: { id: $id, repostDaily: $repost, dailyQuantity: $daily, schedule: $schedule }) {
      offer { id effectivePriceCentsPerDollar repostDaily dailyQuantity schedule { fromUtc priceCentsPerDollar } }
    }
  }`;
  type StandingOffer = {
    id: string;
    priceCentsPerDollar: number;
    effectivePriceCentsPerDollar: number;
    repostDaily: boolean;
    dailyQuantity: string | null;
    repostedFromId: string | null;
    schedule: { fromUtc: string; priceCentsPerDollar: number }[] | null;
  };

  test("postOffer and updateOffer set them; Offer carries them and the effective price (as REST)", async () => {
    const user = await signIn(world.app);
    const { keyId } = await registered(user);
    // a step at 00:00 is in effect all day, whatever the time of the run
    const schedule = [{ fromUtc: "00:00", priceCentsPerDollar: 33 }];
    const r = await gql<{ postOffer: { offer: StandingOffer } }>(session(user), POST_STANDING, {
      key: keyId,
      q: "2000000",
      daily: "9000000",
      schedule,
    });
    expect(r.errors).toBeUndefined();
    const offer = r.data?.postOffer.offer;
    expect(offer).toMatchObject({
      priceCentsPerDollar: 64,
      effectivePriceCentsPerDollar: 33,
      repostDaily: true,
      dailyQuantity: "9000000",
      repostedFromId: null,
      schedule,
    });
    const rest = await call(world.app, { method: "GET", path: "/v1/supply/offers/mine", headers: session(user) });
    expect((rest.body as { data: unknown[] }).data[0]).toMatchObject({
      id: offer?.id,
      effectivePriceCentsPerDollar: 33,
      dailyQuantityDiem: "9.000000",
      schedule,
    });

    // absent leaves a setting alone; null removes the cap and the schedule
    const kept = await gql<{ updateOffer: { offer: StandingOffer } }>(session(user), SET, {
      id: offer?.id,
      repost: false,
    });
    expect(kept.data?.updateOffer.offer).toMatchObject({ repostDaily: false, dailyQuantity: "9000000", schedule });
    const removed = await gql<{ updateOffer: { offer: StandingOffer } }>(session(user), SET, {
      id: offer?.id,
      daily: null,
      schedule: null,
    });
    expect(removed.errors).toBeUndefined();
    expect(removed.data?.updateOffer.offer).toMatchObject({
      dailyQuantity: null,
      schedule: null,
      effectivePriceCentsPerDollar: 64,
    });

    // a bad step is invalid_request naming the field; nothing changes
    const bad = await gql(session(user), SET, {
      id: offer?.id,
      schedule: [
        { fromUtc: "10:00", priceCentsPerDollar: 40 },
        { fromUtc: "09:00", priceCentsPerDollar: 30 },
      ],
    });
    expect(codeOf(bad)).toBe("invalid_request");
    expect((bad.errors?.[0]?.extensions as { details?: { field?: string } } | undefined)?.details?.field).toBe(
      "schedule.1.fromUtc",
    );
    const row = await world.app.rt.db.offer.findUniqueOrThrow({ where: { id: offer?.id ?? "" } });
    expect(row.schedule).toBeNull();
  });
});

describe("subscriptions", () => {
  test("offerUpdated and earningsChanged reach the owner only", async () => {
    const owner = await signIn(world.app);
    const stranger = await signIn(world.app);
    const { keyId } = await registered(owner);
    const client = createClient({ url: `${world.app.baseUrl}/graphql`, headers: session(owner), retryAttempts: 0 });
    const offers = client.iterate<{ offerUpdated: { subject: string; id: string; status: string } }>({
      query: "subscription { offerUpdated { subject id status at } }",
    });
    const earnings = client.iterate<{ earningsChanged: { kind: string } }>({
      query: "subscription { earningsChanged { kind at } }",
    });
    // the bus carries the change typed (which offer or key, its new status), not a string to split
    const raw = world.app.rt.bus.subscribe("offerUpdated", owner.accountId)[Symbol.asyncIterator]();
    const firstRaw = raw.next();
    const firstOffer = offers.next();
    const firstEarning = earnings.next();
    await new Promise((r) => setTimeout(r, 400)); // let the subscriptions reach Redis

    // someone else's activity is not delivered
    const other = await registered(stranger);
    void other;
    world.app.rt.bus.publish("earningsChanged", stranger.accountId, {
      accountId: stranger.accountId,
      kind: "payout:x:submitted",
      at: new Date().toISOString(),
    });
    const posted = await gql<Posted>(session(owner), POST, { key: keyId, price: 36, q: "1000000" });
    const offerId = posted.data?.postOffer.offer.id;
    world.app.rt.bus.publish("earningsChanged", owner.accountId, {
      accountId: owner.accountId,
      kind: "payout:mine:submitted",
      at: new Date().toISOString(),
    });

    const timeout = <T>(p: Promise<T>) => Promise.race([p, new Promise<null>((r) => setTimeout(() => r(null), 5_000))]);
    const o = (await timeout(firstOffer)) as {
      value: { data: { offerUpdated: { subject: string; id: string; status: string } } };
    };
    expect(o?.value.data.offerUpdated).toEqual({
      subject: "offer",
      id: offerId,
      status: "active",
      at: expect.any(String),
    });
    expect((await timeout(firstRaw))?.value).toEqual({
      kind: "offer",
      id: offerId,
      status: "active",
      accountId: owner.accountId,
      at: expect.any(String),
    });
    await raw.return?.();
    const e = (await timeout(firstEarning)) as { value: { data: { earningsChanged: { kind: string } } } };
    expect(e?.value.data.earningsChanged.kind).toBe("payout:mine:submitted");
    await offers.return?.();
    await earnings.return?.();
    client.dispose();
  });
});

describe("rejection and authorisation", () => {
  test("validation errors carry invalid_request; nothing is written", async () => {
    const user = await signIn(world.app);
    const { keyId } = await registered(user);
    const zeroPrice = await gql(session(user), POST, { key: keyId, price: 0, q: "1000000" });
    expect(codeOf(zeroPrice)).toBe("invalid_request");
    const zeroQty = await gql(session(user), POST, { key: keyId, price: 30, q: "0" });
    expect(codeOf(zeroQty)).toBe("invalid_request");
    const badId = await gql(session(user), POST, { key: "not-a-uuid", price: 30, q: "1" });
    expect(codeOf(badId)).toBe("invalid_request");
    const emptyUpdate = await gql(session(user), UPDATE, { id: randomUUID() });
    expect(codeOf(emptyUpdate)).toBe("invalid_request");
    const rejected = await gql(session(user), REGISTER, { k: `vk-unknown-${randomUUID()}`, l: "x" });
    expect(codeOf(rejected)).toBe("invalid_request");
    expect(await world.app.rt.db.offer.count({ where: { accountId: user.accountId } })).toBe(0);
  });

  test("another account's ids are not_found; a Bearer key or no credential is refused", async () => {
    const owner = await signIn(world.app);
    const other = await signIn(world.app);
    const { keyId } = await registered(owner);
    const posted = await gql<Posted>(session(owner), POST, { key: keyId, price: 37, q: "1000000" });
    const offerId = posted.data?.postOffer.offer.id;
    expect(codeOf(await gql(session(other), UPDATE, { id: offerId, status: "PAUSED" }))).toBe("not_found");
    expect(
      codeOf(
        await gql(session(other), "mutation($id: ID!) { cancelOffer(input: { id: $id }) { offer { id } } }", {
          id: offerId,
        }),
      ),
    ).toBe("not_found");
    expect(
      codeOf(
        await gql(session(other), "mutation($id: ID!) { revokeUpstreamKey(input: { id: $id }) { cancelledOffers } }", {
          id: keyId,
        }),
      ),
    ).toBe("not_found");
    expect(codeOf(await gql(session(other), POST, { key: keyId, price: 37, q: "1" }))).toBe("not_found");
    const theirs = await gql<{ myUpstreamKeys: unknown[]; myOffers: { edges: unknown[] } }>(
      session(other),
      "{ myUpstreamKeys { id } myOffers(first: 5) { edges { node { id } } } }",
    );
    expect(theirs.data).toEqual({ myUpstreamKeys: [], myOffers: { edges: [] } });

    const apiKey = await createKey(world.app, owner);
    const bearer = { authorization: `Bearer ${apiKey.apiKey}` };
    expect(codeOf(await gql(bearer, "{ myUpstreamKeys { id } }"))).toBe("authentication_failed");
    expect(codeOf(await gql(bearer, UPDATE, { id: offerId, status: "PAUSED" }))).toBe("authentication_failed");
    expect(codeOf(await gql({}, "{ myOffers(first: 1) { edges { node { id } } } }"))).toBe("authentication_failed");
    expect((await world.app.rt.db.offer.findUniqueOrThrow({ where: { id: offerId ?? "" } })).status).toBe("active");
  });
});
