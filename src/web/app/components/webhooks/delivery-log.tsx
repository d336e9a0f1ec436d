import { useEffect, useRef, useState } from "react";
import { useQuery } from "urql";
import { readFragment } from "../../lib/tada";
import { dateTimeOf } from "../../lib/time";
import { Empty, ErrorNote, Loading, StatusBadge, Table } from "../ui";
import { WebhookDeliveriesQuery, WebhookDeliveryRowFragment } from "./webhooks.gql";

const PAGE = 20;
/** the API's largest page: the log shows the latest 100 at most, re-read whole on each event */
const MOST = 100;

/**
 * One endpoint's delivery log, newest first: status, attempts, the last response, times. "More"
 * reads 20 more (to the latest 100); `version` moves on each `webhookUpdated` event, and the log
 * re-reads what it shows, so a row turns delivered (or failed) as it happens.
 */
export function DeliveryLog(props: { webhookId: string; url: string; version: number }) {
  const [limit, setLimit] = useState(PAGE);
  const [res, refetch] = useQuery({ query: WebhookDeliveriesQuery, variables: { webhookId: props.webhookId, limit } });
  const reread = useRef(refetch);
  reread.current = refetch;
  const first = useRef(props.version);
  useEffect(() => {
    if (props.version !== first.current) reread.current({ requestPolicy: "network-only" });
  }, [props.version]);

  const page = res.data?.myWebhookDeliveries;
  if (res.error && !page) return <ErrorNote error={res.error} what="the delivery log" />;
  if (!page) return <Loading what="the delivery log" />;
  const rows = readFragment(WebhookDeliveryRowFragment, page.nodes);
  return (
    <div data-testid="webhook-deliveries">
      <h3>
        Delivery log <span className="mono hint">{props.url}</span>
      </h3>
      {rows.length === 0 ? (
        <Empty>No deliveries yet. Send a test event to see one arrive.</Empty>
      ) : (
        <Table caption={`Deliveries to ${props.url}, newest first`} testId="webhook-delivery-log">
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts</th>
              <th scope="col">Last response</th>
              <th scope="col">Time</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((d) => (
              <tr key={d.id} data-delivery-id={d.id}>
                <td>
                  <code>{d.type}</code>
                  <div className="hint mono" title="webhook-id: the same on every attempt">
                    {d.id}
                  </div>
                </td>
                <td data-testid="delivery-status">
                  <StatusBadge status={d.status} />
                </td>
                <td className="num" data-testid="delivery-attempts">
                  {d.attempts}
                </td>
                <td data-testid="delivery-response">
                  {d.lastStatusCode ?? "—"}
                  {d.lastError ? <div className="hint wrap">{d.lastError}</div> : null}
                </td>
                <td>
                  {dateTimeOf(d.createdAt)}
                  <div className="hint">
                    {d.deliveredAt
                      ? `delivered ${dateTimeOf(d.deliveredAt)}`
                      : d.status === "PENDING" && d.nextAttemptAt
                        ? `next attempt ${dateTimeOf(d.nextAttemptAt)}`
                        : d.lastAttemptAt
                          ? `last attempt ${dateTimeOf(d.lastAttemptAt)}`
                          : "queued"}
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
      {page.nextCursor && limit < MOST ? (
        <button type="button" className="secondary" onClick={() => setLimit(Math.min(limit + PAGE, MOST))}>
          More
        </button>
      ) : null}
      {page.nextCursor && limit >= MOST ? (
        <p className="hint">
          The latest {MOST} are shown; <code>GET /v1/webhooks/{props.webhookId}/deliveries</code> pages through all.
        </p>
      ) : null}
    </div>
  );
}
