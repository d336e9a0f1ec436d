import { type ChangeEvent, type FormEvent, useState } from "react";
import { useMutation } from "urql";
import { Notice } from "../../components/ui";
import { errorInfo } from "../../lib/graphql";
import { bigOf, bpsPercent, formatMicro, parseDecimal6 } from "../../lib/money";
import type { ResultOf, VariablesOf } from "../../lib/tada";
import { dateTimeOf, isoOfLocalInput, localInputOf } from "../../lib/time";
import { type ApiKeyRowFragment, UpdateApiKeyMutation } from "./api-keys.gql";

export type KeyRow = ResultOf<typeof ApiKeyRowFragment>;
type Reset = KeyRow["limitReset"];
type UpdateInput = VariablesOf<typeof UpdateApiKeyMutation>["input"];

/** The periods a limit can run over, as the server counts them (docs/decisions.md "Per-key policy"). */
export const LIMIT_RESETS: readonly { value: Reset; label: string; per: string }[] = [
  { value: "DAILY", label: "Daily (UTC day)", per: "a day" },
  { value: "WEEKLY", label: "Weekly (from Monday, UTC)", per: "a week" },
  { value: "MONTHLY", label: "Monthly (calendar month, UTC)", per: "a month" },
  { value: "NEVER", label: "Never (one budget for all time)", per: "in all" },
];

const perOf = (reset: Reset) => LIMIT_RESETS.find((r) => r.value === reset)?.per ?? "";

export const LIMIT_PROBLEM = "The spending limit must be a USDC amount with at most six decimals (e.g. 5 or 2.50).";

/** A limit typed in USDC as the API takes it (MicroUsdc); `null` when empty; undefined when not an amount. */
export function limitOfInput(text: string): string | null | undefined {
  if (text.trim() === "") return null;
  return parseDecimal6(text)?.toString();
}

function isExpired(k: KeyRow): boolean {
  return k.expiresAt !== null && Date.parse(k.expiresAt) <= Date.now();
}

/** The key's policy in a few words: limit and period, its own ceiling, its models, its expiry. */
export function PolicySummary(props: { apiKey: KeyRow }) {
  const k = props.apiKey;
  const models = k.models ?? [];
  return (
    <ul className="policy" data-testid="key-policy">
      <li>
        {k.limitUsdc === null ? "No spending limit" : `Limit ${formatMicro(k.limitUsdc)} USDC ${perOf(k.limitReset)}`}
      </li>
      <li>{k.maxPriceCentsPerDollar === null ? "Account ceiling" : `Key ceiling ${k.maxPriceCentsPerDollar}¢`}</li>
      <li title={models.join(", ")}>
        {models.length === 0
          ? "Every model"
          : `Models: ${models.slice(0, 3).join(", ")}${models.length > 3 ? ` +${models.length - 3} more` : ""}`}
      </li>
      <li
        data-testid="key-scopes"
        title="what the key may do: inference (call models), keys (mint and change keys below it), account (ceiling, webhooks, history)"
      >
        {k.scopes.length === 3 ? "Every scope" : `Scopes: ${k.scopes.map((s) => s.toLowerCase()).join(", ")}`}
        {k.parentId === null ? "" : " · below another key"}
      </li>
      <li>
        {k.expiresAt === null ? (
          "Never expires"
        ) : isExpired(k) ? (
          <span className="badge badge-expired">expired {dateTimeOf(k.expiresAt)}</span>
        ) : (
          `Expires ${dateTimeOf(k.expiresAt)}`
        )}
      </li>
    </ul>
  );
}

/**
 * What the key spent this period against its limit: a bar (basis points, integer maths), what is
 * left and when the period starts again. A key with no limit shows only what it spent.
 */
export function KeySpend(props: { apiKey: KeyRow }) {
  const k = props.apiKey;
  const spent = bigOf(k.spentUsdc);
  if (k.limitUsdc === null) {
    return (
      <div className="spend">
        <span data-testid="key-spent">{formatMicro(spent)} USDC</span>
        <span className="hint">no limit</span>
      </div>
    );
  }
  const limit = bigOf(k.limitUsdc);
  const bps = Number(spent >= limit ? 10_000n : (spent * 10_000n) / limit);
  return (
    <div className="spend">
      <meter
        min={0}
        max={10_000}
        low={7_500}
        high={9_000}
        optimum={0}
        value={bps}
        aria-label={`Spent of the limit of key ${k.name}: ${bpsPercent(bps)}`}
        data-testid="key-spend-bar"
      />
      <span data-testid="key-spent">
        {formatMicro(spent)} of {formatMicro(limit)} USDC
      </span>
      <span className="hint" data-testid="key-remaining">
        {formatMicro(k.remainingUsdc)} USDC left
      </span>
      <span className="hint">{k.resetsAt ? `resets ${dateTimeOf(k.resetsAt)}` : "never resets"}</span>
    </div>
  );
}

interface Draft {
  name: string;
  limit: string;
  reset: Reset;
  ceiling: string;
  models: string;
  expires: string;
}

function draftOf(k: KeyRow): Draft {
  return {
    name: k.name,
    limit: k.limitUsdc === null ? "" : formatMicro(k.limitUsdc).replaceAll(",", ""),
    reset: k.limitReset,
    ceiling: k.maxPriceCentsPerDollar === null ? "" : String(k.maxPriceCentsPerDollar),
    models: (k.models ?? []).join(", "),
    expires: localInputOf(k.expiresAt),
  };
}

/**
 * The update to send: only the fields the form changed (an unchanged models list is not re-checked
 * against the catalog, an unchanged expiry not against the clock); an emptied field is `null`,
 * which removes the setting. The server checks the values and names the first bad one.
 */
function changeOf(k: KeyRow, d: Draft): { input: UpdateInput; changed: boolean } | { problem: string } {
  const input: UpdateInput = { id: k.id };
  const before = draftOf(k);
  if (d.name.trim() !== k.name) input.name = d.name.trim();
  const limit = limitOfInput(d.limit);
  if (limit === undefined) return { problem: LIMIT_PROBLEM };
  if (limit !== k.limitUsdc) input.limitUsdc = limit;
  if (d.reset !== k.limitReset) input.limitReset = d.reset;
  const ceiling = d.ceiling.trim() === "" ? null : Number(d.ceiling);
  if (ceiling !== k.maxPriceCentsPerDollar) input.maxPriceCentsPerDollar = ceiling;
  const models = d.models.split(/[\s,]+/).filter((m) => m !== "");
  if (models.join(",") !== (k.models ?? []).join(",")) input.models = models.length === 0 ? null : models;
  if (d.expires !== before.expires) {
    if (d.expires === "") input.expiresAt = null;
    else {
      const iso = isoOfLocalInput(d.expires);
      if (iso === undefined) return { problem: "The expiry must be a date and a time." };
      input.expiresAt = iso;
    }
  }
  return { input, changed: Object.keys(input).length > 1 };
}

/** Edits a key's name and policy; the answer rewrites the key's row in the cache (no re-read). */
export function KeyPolicyForm(props: { apiKey: KeyRow; ceilingMin: number; ceilingMax: number; onDone: () => void }) {
  const [draft, setDraft] = useState(() => draftOf(props.apiKey));
  const [problem, setProblem] = useState<string | undefined>();
  const [state, update] = useMutation(UpdateApiKeyMutation);
  const set = (field: keyof Draft) => (e: ChangeEvent<HTMLInputElement | HTMLSelectElement>) =>
    setDraft({ ...draft, [field]: e.target.value });

  async function submit(e: FormEvent) {
    e.preventDefault();
    const change = changeOf(props.apiKey, draft);
    if ("problem" in change) {
      setProblem(change.problem);
      return;
    }
    setProblem(undefined);
    if (!change.changed) {
      props.onDone();
      return;
    }
    const r = await update({ input: change.input });
    if (!r.error) props.onDone();
  }

  return (
    <form className="form" onSubmit={submit} data-testid="key-policy-form">
      <label>
        Name
        <input name="name" value={draft.name} onChange={set("name")} maxLength={64} minLength={1} required />
      </label>
      <div className="row">
        <label>
          Spending limit (USDC; empty: no limit)
          <input name="limitUsdc" inputMode="decimal" value={draft.limit} onChange={set("limit")} />
        </label>
        <label>
          Resets
          <select name="limitReset" value={draft.reset} onChange={set("reset")}>
            {LIMIT_RESETS.map((r) => (
              <option key={r.value} value={r.value}>
                {r.label}
              </option>
            ))}
          </select>
        </label>
      </div>
      <label>
        Key ceiling (cents per $1 of face, {props.ceilingMin}–{props.ceilingMax}; empty: the account's)
        <input
          name="maxPriceCentsPerDollar"
          type="number"
          min={props.ceilingMin}
          max={props.ceilingMax}
          step={1}
          value={draft.ceiling}
          onChange={set("ceiling")}
        />
      </label>
      <label>
        Models (catalog ids, comma-separated; empty: every model)
        <input name="models" value={draft.models} onChange={set("models")} />
      </label>
      <label>
        Expires (your time zone; empty: never)
        <input name="expiresAt" type="datetime-local" value={draft.expires} onChange={set("expires")} />
      </label>
      <button type="submit" disabled={state.fetching}>
        Save policy
      </button>
      {problem ? <Notice tone="error">{problem}</Notice> : null}
      {state.error && !problem ? <Notice tone="error">{errorInfo(state.error).message}</Notice> : null}
    </form>
  );
}
