import { type FormEvent, type ReactNode, useEffect, useState } from "react";
import { useMutation } from "urql";
import { Empty, Notice, Panel } from "../../components/ui";
import { errorInfo } from "../../lib/graphql";
import { bigOf, diem } from "../../lib/money";
import { type FragmentOf, readFragment } from "../../lib/tada";
import { CeilingLimitsFragment, CeilingMarketFragment, SetMaxPriceMutation } from "./ceiling.gql";

export function CeilingPanel(props: {
  ceiling: number;
  market: FragmentOf<typeof CeilingMarketFragment> | undefined;
  limits: FragmentOf<typeof CeilingLimitsFragment>;
  onSaved: () => void;
}) {
  const limits = readFragment(CeilingLimitsFragment, props.limits);
  const [value, setValue] = useState(String(props.ceiling));
  // a ceiling set elsewhere (an agent's PATCH /v1/agent/max-price) arrives by balanceChanged
  useEffect(() => setValue(String(props.ceiling)), [props.ceiling]);
  const [state, setMaxPrice] = useMutation(SetMaxPriceMutation);
  const [saved, setSaved] = useState<string | undefined>();
  const m = props.market ? readFragment(CeilingMarketFragment, props.market) : undefined;

  async function save(cents: number) {
    setSaved(undefined);
    const r = await setMaxPrice({ input: { maxPriceCentsPerDollar: cents } });
    if (!r.error) {
      setValue(String(cents));
      setSaved(`Ceiling set to ${cents}¢.`);
      props.onSaved();
    }
  }

  function submit(e: FormEvent) {
    e.preventDefault();
    void save(Number(value));
  }

  const reachable = m
    ? m.prices.filter((p) => p.priceCentsPerDollar <= props.ceiling).reduce((a, p) => a + bigOf(p.routableDiem), 0n)
    : 0n;
  let situation: ReactNode = null;
  if (m && m.cheapestPostedCents === null) {
    situation = (
      <Empty>Nothing is posted at any price right now; requests answer 503 pool_empty until supply returns.</Empty>
    );
  } else if (m && m.cheapestPostedCents !== null && m.cheapestPostedCents > props.ceiling) {
    const raiseTo = Math.max(limits.ceilingCentsMin, m.cheapestPostedCents);
    situation = (
      <div className="callout" role="status" data-testid="ceiling-empty">
        <p>
          Nothing posted at your ceiling — raise it to {raiseTo}¢. Requests answer 503 no_eligible_supply until you do.
        </p>
        <button type="button" onClick={() => void save(raiseTo)} disabled={state.fetching}>
          Raise to {raiseTo}¢
        </button>
      </div>
    );
  } else if (m && m.cheapestPostedCents !== null) {
    situation = (
      <p role="status">
        Requests clear from {m.cheapestPostedCents}¢ now; {diem(reachable)} routable at or below {props.ceiling}¢.
      </p>
    );
  }

  return (
    <Panel title="Price ceiling">
      <form className="form" onSubmit={submit}>
        <label>
          Ceiling (cents per $1 of face, {limits.ceilingCentsMin}–{limits.ceilingCentsMax})
          <input
            name="ceiling"
            type="number"
            min={limits.ceilingCentsMin}
            max={limits.ceilingCentsMax}
            step={1}
            value={value}
            onChange={(e) => setValue(e.target.value)}
            required
          />
        </label>
        <button type="submit" disabled={state.fetching}>
          Save ceiling
        </button>
      </form>
      <p className="hint">
        Current ceiling: <strong data-testid="current-ceiling">{props.ceiling}¢</strong>. You pay the posted price of
        the offer that clears, never the ceiling.
      </p>
      {situation}
      {state.error ? <Notice tone="error">{errorInfo(state.error).message}</Notice> : null}
      {saved && !state.error ? <Notice>{saved}</Notice> : null}
    </Panel>
  );
}

/** Paid vs saved per hour (a short history) or per UTC day, summed exactly in micro-USDC. */
