import { type FormEvent, useEffect, useState } from "react";
import { useMutation, useQuery } from "urql";
import { Empty, ErrorNote, Loading, Notice, Panel, Stat, Stats, StatusBadge, Table } from "../components/ui";
import { errorInfo } from "../lib/graphql";
import { useCoalesced, useEvent } from "../lib/live";
import { formatMicro, parseDecimal6, usd } from "../lib/money";
import {
  CANCEL_OFFER,
  EARNINGS_CHANGED,
  OFFER_UPDATED,
  type Offer,
  POST_OFFER,
  REGISTER_UPSTREAM_KEY,
  REVOKE_UPSTREAM_KEY,
  SUPPLIER,
  type SupplierData,
  UPDATE_OFFER,
  type UpstreamKey,
} from "../lib/operations";
import type { Session } from "../lib/session";
import { dateTimeOf, shortAddress } from "../lib/time";

const fresh = { requestPolicy: "network-only" } as const;

/** The supplier's dashboard: upstream keys, offers with live fills, earnings, ledger, payouts. */
export function SupplierView(props: { session: Session }) {
  const [res, refetch] = useQuery<SupplierData>({ query: SUPPLIER });
  // the whole dashboard costs ~2,600 of the 100,000-per-minute GraphQL budget: at most one re-read
  // per 3 s however often the offers fill
  const soon = useCoalesced(() => refetch(fresh), 3000);
  useEvent(OFFER_UPDATED, soon);
  useEvent(EARNINGS_CHANGED, soon);

  if (res.error && !res.data) return <ErrorNote error={res.error} what="your supply" onRetry={() => refetch(fresh)} />;
  const d = res.data;
  if (!d) return <Loading what="your supply" />;
  const offers = d.myOffers.edges.map((e) => e.node);
  const ledger = d.mySupplierLedger;

  return (
    <div className="view supplier-view">
      <div className="view-head">
        <h1>Supplier</h1>
        <p className="lede">
          Wallet{" "}
          <span className="mono">{props.session.viewer ? shortAddress(props.session.viewer.walletAddress) : ""}</span>.
          Post your upstream key's DIEM at a price; buyers whose ceiling reaches it clear against the cheapest offer
          first. Unsold DIEM expires at UTC midnight.
        </p>
      </div>

      <Panel title="Earnings">
        <Stats label="Earnings">
          <Stat
            label="Payable"
            testId="supplier-payable"
            value={usd(ledger.payable)}
            title={`${formatMicro(ledger.payable)} USDC`}
            hint="earned, not yet paid out"
          />
          <Stat label="Paid out" value={usd(ledger.paidOut)} title={`${formatMicro(ledger.paidOut)} USDC`} />
          <Stat label="Payout in progress" value={usd(ledger.payoutPending)} />
          <Stat label="Payout minimum" value={usd(ledger.payoutMinimum)} hint="daily payouts to your wallet, on Base" />
        </Stats>
      </Panel>

      <KeysPanel keys={d.myUpstreamKeys} onChanged={() => refetch(fresh)} />
      <OffersPanel offers={offers} keys={d.myUpstreamKeys} onChanged={() => refetch(fresh)} />

      <Panel title="Recent fills">
        {d.mySupplierInferenceHistory.items.length === 0 ? (
          <Empty>No fills yet. Each clear against your offers appears here as it settles.</Empty>
        ) : (
          <Table caption="Clears you sold, newest first" testId="fills">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Model</th>
                <th scope="col">Price</th>
                <th scope="col">Burn (DIEM)</th>
                <th scope="col">Gross (USDC)</th>
                <th scope="col">Fee</th>
                <th scope="col">Earned</th>
              </tr>
            </thead>
            <tbody>
              {d.mySupplierInferenceHistory.items.map((c) => (
                <tr key={c.clearId}>
                  <td>{dateTimeOf(c.createdAt)}</td>
                  <td>
                    {c.model} <span className="hint">{c.modality}</span>
                    {c.refundedAt ? <span className="hint"> refunded</span> : null}
                  </td>
                  <td className="num">{c.priceCentsPerDollar}¢</td>
                  <td className="num">{formatMicro(c.burn)}</td>
                  <td className="num">{formatMicro(c.gross)}</td>
                  <td className="num">{formatMicro(c.fee)}</td>
                  <td className="num">{formatMicro(c.earned)}</td>
                </tr>
              ))}
            </tbody>
          </Table>
        )}
      </Panel>

      <div className="two-col">
        <Panel title="Supplier ledger">
          {ledger.entries.length === 0 ? (
            <Empty>No ledger entries yet.</Empty>
          ) : (
            <Table caption="Changes to your payable balance, newest first" testId="supplier-ledger">
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Amount (USDC)</th>
                </tr>
              </thead>
              <tbody>
                {ledger.entries.map((e) => (
                  <tr key={e.id}>
                    <td>{dateTimeOf(e.createdAt)}</td>
                    <td>{e.transactionKind.replace(/_/g, " ")}</td>
                    <td className="num">{formatMicro(e.amount)}</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          )}
        </Panel>
        <Panel title="Payouts">
          {ledger.recentPayouts.length === 0 ? (
            <Empty>No payouts yet. Earnings above the minimum are paid daily to your wallet.</Empty>
          ) : (
            <Table caption="Recent payouts" testId="payouts">
              <thead>
                <tr>
                  <th scope="col">Day</th>
                  <th scope="col">Amount (USDC)</th>
                  <th scope="col">Status</th>
                  <th scope="col">Transaction</th>
                </tr>
              </thead>
              <tbody>
                {ledger.recentPayouts.map((p) => (
                  <tr key={p.id}>
                    <td>{p.period}</td>
                    <td className="num">{formatMicro(p.amount)}</td>
                    <td>
                      <StatusBadge status={p.status} />
                    </td>
                    <td className="mono">{p.transaction ? shortAddress(p.transaction) : "—"}</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          )}
        </Panel>
      </div>
    </div>
  );
}

function KeysPanel(props: { keys: UpstreamKey[]; onChanged: () => void }) {
  const [label, setLabel] = useState("");
  const [secret, setSecret] = useState("");
  const [registerState, register] = useMutation(REGISTER_UPSTREAM_KEY);
  const [revokeState, revoke] = useMutation(REVOKE_UPSTREAM_KEY);
  const [confirming, setConfirming] = useState<string | undefined>();
  const [note, setNote] = useState<string | undefined>();

  async function submit(e: FormEvent) {
    e.preventDefault();
    setNote(undefined);
    const r = await register({ input: { label: label.trim(), upstreamApiKey: secret.trim() } });
    setSecret(""); // never kept in the page once sent
    if (!r.error) {
      setLabel("");
      setNote("Key registered. It is stored encrypted and never shown again.");
      props.onChanged();
    }
  }

  async function onRevoke(k: UpstreamKey) {
    if (confirming !== k.id) {
      setConfirming(k.id);
      return;
    }
    setConfirming(undefined);
    const r = await revoke({ input: { id: k.id } });
    if (!r.error) {
      const n = (r.data as { revokeUpstreamKey: { cancelledOffers: number } }).revokeUpstreamKey.cancelledOffers;
      setNote(
        `Key revoked${n > 0 ? `; ${n} offer${n === 1 ? "" : "s"} cancelled` : ""}. Revoke it at the provider too.`,
      );
      props.onChanged();
    }
  }

  return (
    <Panel title="Upstream keys">
      <form className="form" onSubmit={submit} autoComplete="off">
        <div className="row">
          <label>
            Label
            <input name="label" value={label} onChange={(e) => setLabel(e.target.value)} maxLength={64} required />
          </label>
          <label>
            Upstream API key
            <input
              name="upstreamApiKey"
              type="password"
              value={secret}
              onChange={(e) => setSecret(e.target.value)}
              required
              autoComplete="off"
              spellCheck={false}
            />
          </label>
        </div>
        <button type="submit" disabled={registerState.fetching}>
          {registerState.fetching ? "Checking with the provider…" : "Register key"}
        </button>
      </form>
      {registerState.error ? <Notice tone="error">{errorInfo(registerState.error).message}</Notice> : null}
      {revokeState.error ? <Notice tone="error">{errorInfo(revokeState.error).message}</Notice> : null}
      {note ? <Notice>{note}</Notice> : null}
      {props.keys.length === 0 ? (
        <Empty>No upstream keys yet. Register one to post its DIEM.</Empty>
      ) : (
        <Table caption="Your upstream keys" testId="upstream-keys">
          <thead>
            <tr>
              <th scope="col">Label</th>
              <th scope="col">Key</th>
              <th scope="col">Status</th>
              <th scope="col">Balance (DIEM)</th>
              <th scope="col">Live offer</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {props.keys.map((k) => (
              <tr key={k.id}>
                <td>{k.label}</td>
                <td className="mono">{k.maskedKey}</td>
                <td>
                  <StatusBadge status={k.status} />
                </td>
                <td className="num">{k.balance === null ? "—" : formatMicro(k.balance, 2)}</td>
                <td>{k.liveOffer ? "yes" : "no"}</td>
                <td>
                  {k.status !== "REVOKED" ? (
                    <button
                      type="button"
                      className="danger"
                      onClick={() => void onRevoke(k)}
                      aria-label={`${confirming === k.id ? "Confirm revoking" : "Revoke"} upstream key ${k.label}`}
                    >
                      {confirming === k.id ? "Confirm revoke" : "Revoke"}
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
    </Panel>
  );
}

function OffersPanel(props: { offers: Offer[]; keys: UpstreamKey[]; onChanged: () => void }) {
  const free = props.keys.filter((k) => k.status === "ACTIVE" && !k.liveOffer);
  const [keyId, setKeyId] = useState("");
  const [price, setPrice] = useState("45");
  const [quantity, setQuantity] = useState("10");
  const [postState, post] = useMutation(POST_OFFER);
  const [updateState, update] = useMutation(UPDATE_OFFER);
  const [cancelState, cancel] = useMutation(CANCEL_OFFER);
  const [formError, setFormError] = useState<string | undefined>();
  const labels = new Map(props.keys.map((k) => [k.id, k.label]));
  const chosen = free.find((k) => k.id === keyId) ?? free[0];

  async function submit(e: FormEvent) {
    e.preventDefault();
    setFormError(undefined);
    const micro = parseDecimal6(quantity);
    if (micro === undefined || micro <= 0n) {
      setFormError("Enter a quantity of DIEM greater than 0 (at most six decimals).");
      return;
    }
    if (!chosen) return;
    const r = await post({
      input: { upstreamKeyId: chosen.id, priceCentsPerDollar: Number(price), quantity: micro.toString() },
    });
    if (!r.error) props.onChanged();
  }

  const error = postState.error ?? updateState.error ?? cancelState.error;
  return (
    <Panel title="Offers">
      {free.length > 0 ? (
        <form className="form" onSubmit={submit}>
          <div className="row">
            <label>
              Upstream key
              <select name="upstreamKeyId" value={chosen?.id ?? ""} onChange={(e) => setKeyId(e.target.value)}>
                {free.map((k) => (
                  <option key={k.id} value={k.id}>
                    {k.label} ({k.maskedKey})
                  </option>
                ))}
              </select>
            </label>
            <label>
              Price (¢ per $1, 1–80)
              <input
                name="price"
                type="number"
                min={1}
                max={80}
                step={1}
                value={price}
                onChange={(e) => setPrice(e.target.value)}
                required
              />
            </label>
            <label>
              Quantity (DIEM)
              <input
                name="quantity"
                inputMode="decimal"
                value={quantity}
                onChange={(e) => setQuantity(e.target.value)}
                required
              />
            </label>
          </div>
          <button type="submit" disabled={postState.fetching}>
            Post offer
          </button>
        </form>
      ) : (
        <Empty>
          {props.keys.some((k) => k.status === "ACTIVE")
            ? "Every active key already has its one live offer: reprice, pause or cancel it below."
            : "Register an upstream key above to post an offer."}
        </Empty>
      )}
      {formError ? <Notice tone="error">{formError}</Notice> : null}
      {error ? <Notice tone="error">{errorInfo(error).message}</Notice> : null}
      {props.offers.length === 0 ? (
        <Empty>No offers yet today.</Empty>
      ) : (
        <Table caption="Your offers (cancelled ones hidden)" testId="offers">
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Price</th>
              <th scope="col">Status</th>
              <th scope="col">Quantity</th>
              <th scope="col">Filled</th>
              <th scope="col">Remaining</th>
              <th scope="col">Expires</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {props.offers.map((o) => (
              <OfferRow
                key={o.id}
                offer={o}
                keyLabel={labels.get(o.upstreamKeyId) ?? "—"}
                onReprice={async (cents) => {
                  const r = await update({ input: { id: o.id, priceCentsPerDollar: cents } });
                  if (!r.error) props.onChanged();
                }}
                onStatus={async (status) => {
                  const r = await update({ input: { id: o.id, status } });
                  if (!r.error) props.onChanged();
                }}
                onCancel={async () => {
                  const r = await cancel({ input: { id: o.id } });
                  if (!r.error) props.onChanged();
                }}
              />
            ))}
          </tbody>
        </Table>
      )}
    </Panel>
  );
}

function OfferRow(props: {
  offer: Offer;
  keyLabel: string;
  onReprice: (cents: number) => Promise<void>;
  onStatus: (status: "ACTIVE" | "PAUSED") => Promise<void>;
  onCancel: () => Promise<void>;
}) {
  const o = props.offer;
  const [price, setPrice] = useState(String(o.priceCentsPerDollar));
  // a reprice from elsewhere (another tab, the REST API) replaces what the field shows
  useEffect(() => setPrice(String(o.priceCentsPerDollar)), [o.priceCentsPerDollar]);
  const [confirmCancel, setConfirmCancel] = useState(false);
  const live = o.status === "ACTIVE" || o.status === "PAUSED";
  return (
    <tr data-testid={`offer-${o.id}`}>
      <td>{props.keyLabel}</td>
      <td>
        {live ? (
          <form
            className="inline-edit"
            onSubmit={(e) => {
              e.preventDefault();
              void props.onReprice(Number(price));
            }}
          >
            <label>
              <span className="sr-only">Price in cents for the offer on {props.keyLabel}</span>
              <input type="number" min={1} max={80} step={1} value={price} onChange={(e) => setPrice(e.target.value)} />
            </label>
            <button type="submit" className="secondary" disabled={Number(price) === o.priceCentsPerDollar}>
              Reprice
            </button>
          </form>
        ) : (
          `${o.priceCentsPerDollar}¢`
        )}
      </td>
      <td>
        <StatusBadge status={o.status} />
        {o.keyStatus !== "ACTIVE" ? (
          <span className="hint"> key {o.keyStatus.toLowerCase().replace(/_/g, " ")}</span>
        ) : null}
      </td>
      <td className="num">{formatMicro(o.quantity, 2)}</td>
      <td className="num" data-testid="offer-sold">
        {formatMicro(o.sold)}
      </td>
      <td className="num" data-testid="offer-remaining">
        {formatMicro(o.remaining)}
        {o.reserved !== "0" ? <span className="hint"> ({formatMicro(o.reserved)} in flight)</span> : null}
      </td>
      <td>{dateTimeOf(o.expiresAt)}</td>
      <td className="actions">
        {o.status === "ACTIVE" ? (
          <button type="button" className="secondary" onClick={() => void props.onStatus("PAUSED")}>
            Pause
          </button>
        ) : null}
        {o.status === "PAUSED" ? (
          <button type="button" className="secondary" onClick={() => void props.onStatus("ACTIVE")}>
            Unpause
          </button>
        ) : null}
        {live ? (
          <button
            type="button"
            className="danger"
            onClick={() => {
              if (confirmCancel) void props.onCancel();
              setConfirmCancel(!confirmCancel);
            }}
          >
            {confirmCancel ? "Confirm cancel" : "Cancel"}
          </button>
        ) : null}
      </td>
    </tr>
  );
}
