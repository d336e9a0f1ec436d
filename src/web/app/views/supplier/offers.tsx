import { type FormEvent, useEffect, useState } from "react";
import { useMutation } from "urql";
import { Dialog, Empty, Notice, Panel, StatusBadge, Table } from "../../components/ui";
import { errorInfo } from "../../lib/graphql";
import { formatMicro, parseDecimal6 } from "../../lib/money";
import { type FragmentOf, type ResultOf, readFragment } from "../../lib/tada";
import { dateTimeOf } from "../../lib/time";
import { UpstreamKeyRowFragment } from "./keys.gql";
import { StandingFields, StandingForm, standingDraftOf, standingOf } from "./offer-standing";
import {
  CancelOfferMutation,
  OfferLimitsFragment,
  OfferRowFragment,
  PostOfferMutation,
  UpdateOfferMutation,
} from "./offers.gql";

export function OffersPanel(props: {
  offers: readonly FragmentOf<typeof OfferRowFragment>[];
  keys: readonly FragmentOf<typeof UpstreamKeyRowFragment>[];
  limits: FragmentOf<typeof OfferLimitsFragment>;
  onChanged: () => void;
}) {
  const keys = readFragment(UpstreamKeyRowFragment, props.keys);
  const limits = readFragment(OfferLimitsFragment, props.limits);
  const offers = readFragment(OfferRowFragment, props.offers);
  const free = keys.filter((k) => k.status === "ACTIVE" && !k.liveOffer);
  const [keyId, setKeyId] = useState("");
  const [price, setPrice] = useState("45");
  const [quantity, setQuantity] = useState("10");
  const [postState, post] = useMutation(PostOfferMutation);
  const [updateState, update] = useMutation(UpdateOfferMutation);
  const [cancelState, cancel] = useMutation(CancelOfferMutation);
  const [formError, setFormError] = useState<string | undefined>();
  const [standing, setStanding] = useState(() => standingDraftOf());
  const [editing, setEditing] = useState<string | undefined>();
  const edited = offers.find((o) => o.id === editing);
  const labels = new Map(keys.map((k) => [k.id, k.label]));
  const chosen = free.find((k) => k.id === keyId) ?? free[0];

  async function submit(e: FormEvent) {
    e.preventDefault();
    setFormError(undefined);
    const micro = parseDecimal6(quantity);
    if (micro === undefined || micro <= 0n) {
      setFormError("Enter a quantity of DIEM greater than 0 (at most six decimals).");
      return;
    }
    const s = standingOf(standing);
    if ("problem" in s) {
      setFormError(s.problem);
      return;
    }
    if (!chosen) return;
    const r = await post({
      input: {
        upstreamKeyId: chosen.id,
        priceCentsPerDollar: Number(price),
        quantity: micro.toString(),
        ...(s.repostDaily ? { repostDaily: true } : {}),
        ...(s.dailyQuantity !== null ? { dailyQuantity: s.dailyQuantity } : {}),
        ...(s.schedule !== null ? { schedule: s.schedule } : {}),
      },
    });
    if (!r.error) {
      setStanding(standingDraftOf());
      props.onChanged();
    }
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
              Price (¢ per $1, {limits.offerPriceCentsMin}–{limits.offerPriceCentsMax})
              <input
                name="price"
                type="number"
                min={limits.offerPriceCentsMin}
                max={limits.offerPriceCentsMax}
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
          <StandingFields
            draft={standing}
            onChange={setStanding}
            basePrice={Number(price)}
            priceMin={limits.offerPriceCentsMin}
            priceMax={limits.offerPriceCentsMax}
          />
          <button type="submit" disabled={postState.fetching}>
            Post offer
          </button>
        </form>
      ) : (
        <Empty>
          {keys.some((k) => k.status === "ACTIVE")
            ? "Every active key already has its one live offer: reprice, pause or cancel it below."
            : "Register an upstream key above to post an offer."}
        </Empty>
      )}
      {formError ? <Notice tone="error">{formError}</Notice> : null}
      {error ? <Notice tone="error">{errorInfo(error).message}</Notice> : null}
      {offers.length === 0 ? (
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
            {offers.map((o) => (
              <OfferRow
                key={o.id}
                offer={o}
                limits={limits}
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
                onEdit={() => setEditing(o.id)}
              />
            ))}
          </tbody>
        </Table>
      )}
      <Dialog
        title={edited ? `Offer on ${labels.get(edited.upstreamKeyId) ?? "a key"}` : "Offer"}
        open={edited !== undefined}
        onClose={() => setEditing(undefined)}
      >
        {edited ? (
          <StandingForm
            offer={edited}
            priceMin={limits.offerPriceCentsMin}
            priceMax={limits.offerPriceCentsMax}
            onDone={() => {
              setEditing(undefined);
              props.onChanged();
            }}
          />
        ) : null}
      </Dialog>
    </Panel>
  );
}

function OfferRow(props: {
  offer: ResultOf<typeof OfferRowFragment>;
  limits: ResultOf<typeof OfferLimitsFragment>;
  keyLabel: string;
  onReprice: (cents: number) => Promise<void>;
  onStatus: (status: "ACTIVE" | "PAUSED") => Promise<void>;
  onCancel: () => Promise<void>;
  onEdit: () => void;
}) {
  const o = props.offer;
  const [price, setPrice] = useState(String(o.priceCentsPerDollar));
  // a reprice from elsewhere (another tab, the REST API) replaces what the field shows
  useEffect(() => setPrice(String(o.priceCentsPerDollar)), [o.priceCentsPerDollar]);
  const [confirmCancel, setConfirmCancel] = useState(false);
  const live = o.status === "ACTIVE" || o.status === "PAUSED";
  // a depleted offer still takes the standing settings until its midnight: what tomorrow's carries
  const editable = live || o.status === "DEPLETED";
  return (
    <tr data-testid={`offer-${o.id}`}>
      <td>{props.keyLabel}</td>
      <td>
        <div data-testid="offer-price">
          <strong>{o.effectivePriceCentsPerDollar}¢</strong>
          {o.effectivePriceCentsPerDollar !== o.priceCentsPerDollar ? (
            <span className="hint"> now (scheduled; base {o.priceCentsPerDollar}¢)</span>
          ) : o.schedule ? (
            <span className="hint"> (scheduled)</span>
          ) : null}
        </div>
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
              <input
                type="number"
                min={props.limits.offerPriceCentsMin}
                max={props.limits.offerPriceCentsMax}
                step={1}
                value={price}
                onChange={(e) => setPrice(e.target.value)}
              />
            </label>
            <button type="submit" className="secondary" disabled={Number(price) === o.priceCentsPerDollar}>
              Reprice
            </button>
          </form>
        ) : null}
      </td>
      <td>
        <StatusBadge status={o.status} />
        {o.keyStatus !== "ACTIVE" ? (
          <span className="hint"> key {o.keyStatus.toLowerCase().replace(/_/g, " ")}</span>
        ) : null}
        {o.repostDaily ? (
          <span
            className="badge badge-standing"
            title={`posted again at each UTC midnight${o.dailyQuantity ? `, at most ${formatMicro(o.dailyQuantity, 2)} DIEM` : ""}`}
          >
            standing
          </span>
        ) : null}
        {o.repostedFromId ? (
          <span className="hint" title={o.repostedFromId}>
            {" "}
            reposted from {o.repostedFromId.slice(0, 8)}…
          </span>
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
        {editable ? (
          <button
            type="button"
            className="secondary"
            onClick={props.onEdit}
            aria-label={`Edit schedule of the offer on ${props.keyLabel}`}
          >
            Schedule
          </button>
        ) : null}
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
