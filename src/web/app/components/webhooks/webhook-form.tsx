import { type FormEvent, useState } from "react";
import { useMutation } from "urql";
import { errorInfo } from "../../lib/graphql";
import { parseDecimal6 } from "../../lib/money";
import type { ResultOf } from "../../lib/tada";
import { Notice } from "../ui";
import { ACCOUNT_EVENTS, type EventInfo, SIDE_EVENTS, type WebhookEvent, type WebhookSide } from "./events";
import { CreateWebhookMutation } from "./webhooks.gql";

export type Created = ResultOf<typeof CreateWebhookMutation>["createWebhook"];

const THRESHOLD_PROBLEM = "The balance.low threshold must be a USDC amount with at most six decimals (e.g. 5 or 2.50).";

/**
 * Registers an endpoint: its URL, the side's events (and the account's `webhook.disabled`), a
 * description, and for buyers the `balance.low` threshold. The server checks the URL (https, no
 * private or metadata address, after DNS) and the cap; its refusal, naming the field, shows here.
 */
export function WebhookForm(props: { side: WebhookSide; onCreated: (created: Created) => void }) {
  const [url, setUrl] = useState("");
  const [description, setDescription] = useState("");
  const [events, setEvents] = useState<ReadonlySet<WebhookEvent>>(new Set());
  const [threshold, setThreshold] = useState("");
  const [problem, setProblem] = useState<string | undefined>();
  const [state, create] = useMutation(CreateWebhookMutation);
  const lowChosen = events.has("BALANCE_LOW");

  function toggle(e: WebhookEvent, on: boolean) {
    const next = new Set(events);
    if (on) next.add(e);
    else next.delete(e);
    setEvents(next);
  }

  async function submit(e: FormEvent) {
    e.preventDefault();
    if (events.size === 0) {
      setProblem("Choose at least one event.");
      return;
    }
    let balanceLowThresholdUsdc: string | undefined;
    if (lowChosen && threshold.trim() !== "") {
      const micro = parseDecimal6(threshold);
      if (micro === undefined) {
        setProblem(THRESHOLD_PROBLEM);
        return;
      }
      balanceLowThresholdUsdc = micro.toString();
    }
    setProblem(undefined);
    const input = {
      url: url.trim(),
      events: [...events],
      ...(description.trim() === "" ? {} : { description: description.trim() }),
      ...(balanceLowThresholdUsdc === undefined ? {} : { balanceLowThresholdUsdc }),
    };
    const r = await create({ input });
    if (r.data) {
      props.onCreated(r.data.createWebhook);
      setUrl("");
      setDescription("");
      setEvents(new Set());
      setThreshold("");
    }
  }

  const box = (info: EventInfo) => (
    <label key={info.value} className="check">
      <input
        type="checkbox"
        name="events"
        value={info.value}
        checked={events.has(info.value)}
        onChange={(e) => toggle(info.value, e.target.checked)}
      />
      <span>
        <code>{info.name}</code> <span className="hint">{info.about}</span>
      </span>
    </label>
  );

  return (
    <form className="form" onSubmit={submit} data-testid="webhook-form" autoComplete="off">
      <div className="row">
        <label className="grow">
          Endpoint URL
          <input
            name="url"
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            placeholder="https://example.com/hooks/svc"
            maxLength={2048}
            required
            spellCheck={false}
          />
        </label>
        <label className="grow">
          Description (optional)
          <input
            name="description"
            value={description}
            onChange={(e) => setDescription(e.target.value)}
            maxLength={256}
          />
        </label>
      </div>
      <fieldset className="checks">
        <legend>Events</legend>
        {SIDE_EVENTS[props.side].map(box)}
        {ACCOUNT_EVENTS.map(box)}
      </fieldset>
      {props.side === "buyer" ? (
        <div className="row">
          <label>
            balance.low threshold (USDC; required with balance.low)
            <input
              name="balanceLowThresholdUsdc"
              inputMode="decimal"
              value={threshold}
              onChange={(e) => setThreshold(e.target.value)}
              disabled={!lowChosen}
              placeholder="5.00"
            />
          </label>
        </div>
      ) : null}
      <button type="submit" disabled={state.fetching}>
        Add endpoint
      </button>
      {problem ? <Notice tone="error">{problem}</Notice> : null}
      {state.error && !problem ? <Notice tone="error">{messageOf(state.error)}</Notice> : null}
    </form>
  );
}

/** The server's message with its code (`webhook_limit_reached`, `invalid_request`). */
export function messageOf(error: unknown): string {
  const { code, message } = errorInfo(error);
  return code ? `${message} (${code})` : message;
}
