import { type FormEvent, useEffect, useState } from "react";
import { useMutation } from "urql";
import { Notice } from "../../components/ui";
import { errorInfo } from "../../lib/graphql";
import { formatMicro, parseDecimal6 } from "../../lib/money";
import type { ResultOf, VariablesOf } from "../../lib/tada";
import { type OfferRowFragment, UpdateOfferMutation } from "./offers.gql";

/**
 * An offer's standing settings (docs/decisions.md "Standing offers", "Price schedules"):
 * `repostDaily`, the daily quantity cap and the price schedule, with a preview of the price through
 * the UTC day. The server checks every rule (times strictly increasing, prices within the offer's
 * bounds, at most 24 steps) and names the bad field; the form only refuses what cannot be sent.
 */

export type OfferRow = ResultOf<typeof OfferRowFragment>;
type UpdateInput = VariablesOf<typeof UpdateOfferMutation>["input"];

export interface Step {
  fromUtc: string;
  priceCentsPerDollar: number;
}

interface StepDraft {
  key: number;
  fromUtc: string;
  price: string;
}

export interface StandingDraft {
  repostDaily: boolean;
  dailyCap: string;
  steps: StepDraft[];
}

const HH_MM = /^([01]\d|2[0-3]):([0-5]\d)$/;
let nextKey = 1;

export function standingDraftOf(o?: OfferRow): StandingDraft {
  return {
    repostDaily: o?.repostDaily ?? false,
    dailyCap: o?.dailyQuantity ? formatMicro(o.dailyQuantity).replaceAll(",", "") : "",
    steps: (o?.schedule ?? []).map((s) => ({
      key: nextKey++,
      fromUtc: s.fromUtc,
      price: String(s.priceCentsPerDollar),
    })),
  };
}

/** The steps as sent: in time order (the server refuses two at the same minute, naming the field). */
function sortedSteps(steps: readonly Step[]): Step[] {
  return [...steps].sort((a, b) => (a.fromUtc < b.fromUtc ? -1 : a.fromUtc > b.fromUtc ? 1 : 0));
}

function stepOf(d: StepDraft): Step | undefined {
  if (!HH_MM.test(d.fromUtc) || !/^\d{1,3}$/.test(d.price.trim())) return undefined;
  return { fromUtc: d.fromUtc, priceCentsPerDollar: Number(d.price) };
}

/** What the draft sends, or the one thing that cannot be sent. `schedule: null` is no schedule. */
export function standingOf(
  d: StandingDraft,
): { repostDaily: boolean; dailyQuantity: string | null; schedule: Step[] | null } | { problem: string } {
  let dailyQuantity: string | null = null;
  if (d.dailyCap.trim() !== "") {
    const micro = parseDecimal6(d.dailyCap);
    if (micro === undefined || micro <= 0n) {
      return { problem: "The daily quantity cap must be DIEM greater than 0 (at most six decimals), or empty." };
    }
    dailyQuantity = micro.toString();
  }
  const steps: Step[] = [];
  for (const [i, row] of d.steps.entries()) {
    const step = stepOf(row);
    if (!step) return { problem: `Step ${i + 1} needs a UTC time (HH:MM) and a whole price in cents.` };
    steps.push(step);
  }
  return { repostDaily: d.repostDaily, dailyQuantity, schedule: steps.length === 0 ? null : sortedSteps(steps) };
}

const minuteOf = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

export interface Segment {
  from: string;
  to: string;
  price: number;
  minutes: number;
  current: boolean;
}

/**
 * The price through the UTC day: one segment per step (and the offer's own price before the first
 * step), the one holding `now` marked. The same rule as the server's `effectivePrice` (the step
 * whose time most recently passed today, else the offer's price; at one minute the later step wins),
 * restated here because the browser does not import the domain: the offers table shows the server's
 * `effectivePriceCentsPerDollar`, the authority.
 */
export function segmentsOf(basePrice: number, steps: readonly Step[], now: Date): Segment[] {
  const bounds: { at: number; price: number }[] = [{ at: 0, price: basePrice }];
  for (const s of sortedSteps(steps)) {
    const at = minuteOf(s.fromUtc);
    const last = bounds[bounds.length - 1];
    if (last && last.at === at) last.price = s.priceCentsPerDollar;
    else bounds.push({ at, price: s.priceCentsPerDollar });
  }
  const nowMinute = now.getUTCHours() * 60 + now.getUTCMinutes();
  const hhmm = (m: number) => `${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`;
  return bounds.map((b, i) => {
    const end = bounds[i + 1]?.at ?? 24 * 60;
    return {
      from: hhmm(b.at),
      to: hhmm(end),
      price: b.price,
      minutes: end - b.at,
      current: nowMinute >= b.at && nowMinute < end,
    };
  });
}

/** The current time, re-read every 30 s (the preview's "now" moves at step minutes). */
function useNow(): Date {
  const [now, setNow] = useState(() => new Date());
  useEffect(() => {
    const t = setInterval(() => setNow(new Date()), 30_000);
    return () => clearInterval(t);
  }, []);
  return now;
}

/** A 24-hour strip of the price (UTC), one cell per segment, the current one highlighted. */
export function PricePreview(props: { basePrice: number; steps: readonly Step[] }) {
  const now = useNow();
  const segments = segmentsOf(props.basePrice, props.steps, now);
  return (
    <ol className="price-strip" aria-label="Price through the day (UTC)" data-testid="price-preview">
      {segments.map((s) => (
        <li
          key={s.from}
          className={s.current ? "now" : undefined}
          style={{ flexGrow: s.minutes }}
          aria-current={s.current ? "time" : undefined}
          title={s.current ? "the price now" : undefined}
        >
          <span className="strip-time">
            {s.from}–{s.to}
          </span>{" "}
          <strong>{s.price}¢</strong>
        </li>
      ))}
    </ol>
  );
}

/** The steps of a draft that are complete, for the preview (an incomplete row is not shown yet). */
function previewSteps(d: StandingDraft): Step[] {
  return d.steps.map(stepOf).filter((s): s is Step => s !== undefined);
}

/** Repost daily, the daily cap, the schedule's rows and the preview; controlled by `draft`. */
export function StandingFields(props: {
  draft: StandingDraft;
  onChange: (d: StandingDraft) => void;
  basePrice: number;
  priceMin: number;
  priceMax: number;
}) {
  const d = props.draft;
  const set = (patch: Partial<StandingDraft>) => props.onChange({ ...d, ...patch });
  const setStep = (key: number, patch: Partial<StepDraft>) =>
    set({ steps: d.steps.map((s) => (s.key === key ? { ...s, ...patch } : s)) });
  function addStep() {
    const last = d.steps[d.steps.length - 1];
    const at = last && HH_MM.test(last.fromUtc) ? Math.min(minuteOf(last.fromUtc) + 60, 23 * 60) : 18 * 60;
    const fromUtc = `${String(Math.floor(at / 60)).padStart(2, "0")}:${String(at % 60).padStart(2, "0")}`;
    set({ steps: [...d.steps, { key: nextKey++, fromUtc, price: last?.price ?? String(props.basePrice) }] });
  }
  return (
    <fieldset className="checks standing">
      <legend>Standing offer and price schedule</legend>
      <label className="check">
        <input
          type="checkbox"
          name="repostDaily"
          checked={d.repostDaily}
          onChange={(e) => set({ repostDaily: e.target.checked })}
        />
        Repost daily (posted again at each UTC midnight with the key's fresh balance)
      </label>
      <label>
        Daily quantity cap (DIEM; empty: the key's whole fresh balance)
        <input
          name="dailyQuantity"
          inputMode="decimal"
          value={d.dailyCap}
          onChange={(e) => set({ dailyCap: e.target.value })}
        />
      </label>
      <div className="schedule" data-testid="schedule-steps">
        <p className="hint">
          Price steps (UTC): from each time on, the offer clears at that step's price ({props.priceMin}–{props.priceMax}
          ¢); before the first step, at the offer's price. Sent in time order; at most 24.
        </p>
        {d.steps.map((s, i) => (
          <div className="row" key={s.key}>
            <label>
              Step {i + 1} from (UTC)
              <input type="time" value={s.fromUtc} onChange={(e) => setStep(s.key, { fromUtc: e.target.value })} />
            </label>
            <label>
              Step {i + 1} price (¢ per $1)
              <input
                type="number"
                min={props.priceMin}
                max={props.priceMax}
                step={1}
                value={s.price}
                onChange={(e) => setStep(s.key, { price: e.target.value })}
              />
            </label>
            <button
              type="button"
              className="secondary"
              onClick={() => set({ steps: d.steps.filter((x) => x.key !== s.key) })}
            >
              Remove step {i + 1}
            </button>
          </div>
        ))}
        <button type="button" className="secondary" onClick={addStep} disabled={d.steps.length >= 24}>
          Add step
        </button>
      </div>
      <PricePreview basePrice={props.basePrice} steps={previewSteps(d)} />
    </fieldset>
  );
}

/** The server's message with its code (`invalid_request`, `conflict`): it names the bad field. */
function messageOf(error: unknown): string {
  const { code, message } = errorInfo(error);
  return code ? `${message} (${code})` : message;
}

/**
 * Edits a live or depleted offer's standing settings (PATCH semantics: only what changed is sent;
 * an emptied cap or schedule is `null`, which removes it). The answer rewrites the offer's row.
 */
export function StandingForm(props: { offer: OfferRow; priceMin: number; priceMax: number; onDone: () => void }) {
  const o = props.offer;
  const [draft, setDraft] = useState(() => standingDraftOf(o));
  const [problem, setProblem] = useState<string | undefined>();
  const [state, update] = useMutation(UpdateOfferMutation);

  async function submit(e: FormEvent) {
    e.preventDefault();
    const s = standingOf(draft);
    if ("problem" in s) {
      setProblem(s.problem);
      return;
    }
    setProblem(undefined);
    const input: UpdateInput = { id: o.id };
    if (s.repostDaily !== o.repostDaily) input.repostDaily = s.repostDaily;
    if (s.dailyQuantity !== (o.dailyQuantity ?? null)) input.dailyQuantity = s.dailyQuantity;
    const before = o.schedule?.map((x) => ({ fromUtc: x.fromUtc, priceCentsPerDollar: x.priceCentsPerDollar })) ?? null;
    if (JSON.stringify(s.schedule) !== JSON.stringify(before)) input.schedule = s.schedule;
    if (Object.keys(input).length === 1) {
      props.onDone();
      return;
    }
    const r = await update({ input });
    if (!r.error) props.onDone();
  }

  return (
    <form className="form" onSubmit={submit} data-testid="standing-form">
      <p className="hint">
        The offer's own price: {o.priceCentsPerDollar}¢ (reprice it in the table); now it clears at{" "}
        {o.effectivePriceCentsPerDollar}¢.
      </p>
      <StandingFields
        draft={draft}
        onChange={setDraft}
        basePrice={o.priceCentsPerDollar}
        priceMin={props.priceMin}
        priceMax={props.priceMax}
      />
      <button type="submit" disabled={state.fetching}>
        Save
      </button>
      {problem ? <Notice tone="error">{problem}</Notice> : null}
      {state.error && !problem ? <Notice tone="error">{messageOf(state.error)}</Notice> : null}
    </form>
  );
}
