import { useState } from "react";
import { useMutation, useQuery } from "urql";
import { useCoalesced, useEvent } from "../../lib/live";
import { readFragment } from "../../lib/tada";
import { Empty, ErrorNote, Loading, Notice, Panel, Table } from "../ui";
import { DeliveryLog } from "./delivery-log";
import { shownTo, type WebhookSide } from "./events";
import { SecretOnce } from "./secret-once";
import { messageOf, WebhookForm } from "./webhook-form";
import { type EndpointAction, EndpointRows } from "./webhook-row";
import {
  DeleteWebhookMutation,
  EnableWebhookMutation,
  RotateWebhookSecretMutation,
  SendTestWebhookMutation,
  WebhookRowFragment,
  WebhooksQuery,
  WebhookUpdatedSubscription,
} from "./webhooks.gql";

const fresh = { requestPolicy: "network-only" } as const;
const OTHER: Record<WebhookSide, string> = { buyer: "Supplier", supplier: "Buyer" };

/**
 * The account's webhook endpoints as one side of it sees them (the buyer view with buyer events,
 * the supplier view with supplier events): add one (its secret shown once), send a test event,
 * rotate the secret, enable a disabled one, delete one, and read an endpoint's delivery log. Live:
 * each `webhookUpdated` event re-reads the list and the open log (throttled, 1 s).
 */
export function WebhooksPanel(props: { side: WebhookSide }) {
  const [res, refetch] = useQuery({ query: WebhooksQuery });
  const [secret, setSecret] = useState<{ secret: string; url: string; rotated: boolean } | undefined>();
  const [logOf, setLogOf] = useState<string | undefined>();
  const [version, setVersion] = useState(0);
  const [confirming, setConfirming] = useState<{ action: EndpointAction; id: string } | undefined>();
  const [note, setNote] = useState<string | undefined>();
  const [failure, setFailure] = useState<unknown>();
  const [, sendTest] = useMutation(SendTestWebhookMutation);
  const [, rotate] = useMutation(RotateWebhookSecretMutation);
  const [, enable] = useMutation(EnableWebhookMutation);
  const [, remove] = useMutation(DeleteWebhookMutation);
  const soon = useCoalesced(() => {
    refetch(fresh);
    setVersion((v) => v + 1);
  }, 1000);
  useEvent(WebhookUpdatedSubscription, soon);

  const all = res.data ? readFragment(WebhookRowFragment, res.data.myWebhooks) : undefined;
  const hooks = all?.filter((w) => shownTo(props.side, w.events)) ?? [];
  const others = (all?.length ?? 0) - hooks.length;
  const opened = hooks.find((w) => w.id === logOf);
  const disabled = hooks.filter((w) => w.status === "DISABLED");

  /** The outcome of the last action on a row: a refusal (409 on a disabled endpoint, 404) shows above the table. */
  async function onAction(action: EndpointAction, id: string) {
    setNote(undefined);
    setFailure(undefined);
    // rotating and deleting ask twice
    if (action === "rotate" || action === "delete") {
      if (confirming?.action !== action || confirming.id !== id) {
        setConfirming({ action, id });
        return;
      }
    }
    setConfirming(undefined);
    if (action === "log") setLogOf(id);
    else if (action === "enable") setFailure((await enable({ input: { id } })).error);
    else if (action === "test") {
      setLogOf(id);
      const r = await sendTest({ input: { id } });
      setFailure(r.error);
      if (!r.error) {
        setNote("Test event queued: watch it in the delivery log.");
        setVersion((v) => v + 1);
      }
    } else if (action === "rotate") {
      const r = await rotate({ input: { id } });
      setFailure(r.error);
      const answer = r.data?.rotateWebhookSecret;
      if (answer) {
        const w = readFragment(WebhookRowFragment, answer.webhook);
        setSecret({ secret: answer.secret, url: w.url, rotated: true });
      }
    } else {
      const r = await remove({ input: { id } });
      setFailure(r.error);
      if (!r.error) {
        if (logOf === id) setLogOf(undefined);
        refetch(fresh);
      }
    }
  }

  return (
    <Panel title="Webhooks">
      <p className="hint">
        The service POSTs each event you choose to your endpoint, signed (Standard Webhooks), retried for over 24 h. At
        most 10 endpoints per account, buyer and supplier together.
      </p>
      {secret ? <SecretOnce {...secret} onDismiss={() => setSecret(undefined)} /> : null}
      <WebhookForm
        side={props.side}
        onCreated={(c) => {
          const w = readFragment(WebhookRowFragment, c.webhook);
          setSecret({ secret: c.secret, url: w.url, rotated: false });
          setLogOf(w.id);
          refetch(fresh);
        }}
      />
      {disabled.length > 0 ? (
        <Notice tone="error">
          webhook.disabled: every attempt of an event to {disabled.map((w) => w.url).join(", ")} failed, so nothing is
          sent there until you re-enable it.
        </Notice>
      ) : null}
      {note ? <Notice tone="ok">{note}</Notice> : null}
      {failure ? <Notice tone="error">{messageOf(failure)}</Notice> : null}
      {res.error && !all ? <ErrorNote error={res.error} what="your webhooks" onRetry={() => refetch(fresh)} /> : null}
      {!all && !res.error ? <Loading what="your webhooks" /> : null}
      {all && hooks.length === 0 ? <Empty>No endpoints yet. Add one above to be told instead of polling.</Empty> : null}
      {hooks.length > 0 ? (
        <Table caption="Webhook endpoints, oldest first" testId="webhooks">
          <thead>
            <tr>
              <th scope="col">Endpoint</th>
              <th scope="col">Events</th>
              <th scope="col">Status</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {hooks.map((w) => (
              <EndpointRows
                key={w.id}
                webhook={w}
                logOpen={logOf === w.id}
                confirming={confirming?.id === w.id ? confirming.action : undefined}
                onAction={(action) => void onAction(action, w.id)}
              />
            ))}
          </tbody>
        </Table>
      ) : null}
      {others > 0 ? (
        <p className="hint">
          {others} more endpoint{others === 1 ? "" : "s"} of this account, for {OTHER[props.side].toLowerCase()} events,{" "}
          {others === 1 ? "is" : "are"} on the {OTHER[props.side]} page.
        </p>
      ) : null}
      {opened ? <DeliveryLog key={opened.id} webhookId={opened.id} url={opened.url} version={version} /> : null}
    </Panel>
  );
}
