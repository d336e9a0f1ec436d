import { formatMicro } from "../../lib/money";
import type { ResultOf } from "../../lib/tada";
import { dateTimeOf } from "../../lib/time";
import { StatusBadge } from "../ui";
import { eventName } from "./events";
import type { WebhookRowFragment } from "./webhooks.gql";

export type Endpoint = ResultOf<typeof WebhookRowFragment>;
export type EndpointAction = "log" | "test" | "enable" | "rotate" | "delete";

/**
 * One endpoint in the table, and under it, when it is disabled, the `webhook.disabled` notice: why
 * (the event and the last error) and since when. Rotating and deleting ask twice (`confirming`).
 */
export function EndpointRows(props: {
  webhook: Endpoint;
  logOpen: boolean;
  confirming: EndpointAction | undefined;
  onAction: (action: EndpointAction) => void;
}) {
  const w = props.webhook;
  const act = (a: EndpointAction) => () => props.onAction(a);
  const asking = (a: EndpointAction) => props.confirming === a;
  return (
    <>
      <tr data-webhook-id={w.id}>
        <td className="wrap">
          <span className="mono">{w.url}</span>
          {w.description ? <div className="hint">{w.description}</div> : null}
          <div className="hint">created {dateTimeOf(w.createdAt)}</div>
        </td>
        <td>
          <ul className="policy">
            {w.events.map((e) => (
              <li key={e}>
                <code>{eventName(e)}</code>
                {e === "BALANCE_LOW" && w.balanceLowThresholdUsdc
                  ? ` below ${formatMicro(w.balanceLowThresholdUsdc)} USDC`
                  : null}
              </li>
            ))}
          </ul>
        </td>
        <td data-testid="webhook-status">
          <StatusBadge status={w.status} />
          {w.status === "ACTIVE" && w.consecutiveFailures > 0 ? (
            <div className="hint">{w.consecutiveFailures} failed attempts in a row</div>
          ) : null}
        </td>
        <td>
          <div className="webhook-actions">
            <button
              type="button"
              className="secondary"
              onClick={act("log")}
              aria-label={`Delivery log of ${w.url}`}
              aria-pressed={props.logOpen}
            >
              Deliveries
            </button>
            {w.status === "DISABLED" ? (
              <button type="button" onClick={act("enable")} aria-label={`Re-enable ${w.url}`}>
                Re-enable
              </button>
            ) : (
              <button
                type="button"
                className="secondary"
                onClick={act("test")}
                aria-label={`Send a test event to ${w.url}`}
              >
                Send test
              </button>
            )}
            <button
              type="button"
              className="secondary"
              onClick={act("rotate")}
              aria-label={`${asking("rotate") ? "Confirm rotating" : "Rotate"} the secret of ${w.url}`}
            >
              {asking("rotate") ? "Confirm rotate" : "Rotate secret"}
            </button>
            <button
              type="button"
              className="danger"
              onClick={act("delete")}
              aria-label={`${asking("delete") ? "Confirm deleting" : "Delete"} ${w.url}`}
            >
              {asking("delete") ? "Confirm delete" : "Delete"}
            </button>
          </div>
        </td>
      </tr>
      {w.status === "DISABLED" ? (
        <tr className="webhook-reason">
          <td colSpan={4} className="wrap hint" data-testid="webhook-disabled-reason">
            Disabled {dateTimeOf(w.disabledAt)}: {w.disabledReason} — nothing is sent until you re-enable it.
          </td>
        </tr>
      ) : null}
    </>
  );
}
