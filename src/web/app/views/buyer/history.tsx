import { useState } from "react";
import { useQuery } from "urql";
import { Dialog, Empty, ErrorNote, Loading, Panel, StatusBadge, Table } from "../../components/ui";
import { bigOf, formatMicro } from "../../lib/money";
import { type ResultOf, readFragment } from "../../lib/tada";
import { dateTimeOf } from "../../lib/time";
import type { HistoryQuery } from "./documents";
import { HistoryRowFragment, RequestDetailFragment, RequestDetailQuery } from "./history.gql";

export function HistoryPanel(props: {
  history: { data?: ResultOf<typeof HistoryQuery>; error?: unknown; fetching: boolean };
  onRetry: () => void;
}) {
  const [reference, setReference] = useState<string | undefined>();
  const [lookup, setLookup] = useState("");
  const page = props.history.data?.myInferenceHistory.items;
  const items = page ? readFragment(HistoryRowFragment, page) : undefined;
  return (
    <Panel title="Inference history">
      <form
        className="form inline"
        onSubmit={(e) => {
          e.preventDefault();
          setReference(lookup.trim());
        }}
      >
        <label>
          Support reference
          <input
            name="supportReference"
            value={lookup}
            onChange={(e) => setLookup(e.target.value)}
            placeholder="X-Svc-Support-Reference"
            pattern="^[0-9a-fA-F-]{36}$"
            required
            spellCheck={false}
            autoComplete="off"
          />
        </label>
        <button type="submit" className="secondary">
          Look up
        </button>
      </form>
      {props.history.error ? (
        <ErrorNote error={props.history.error} what="your history" onRetry={props.onRetry} />
      ) : null}
      {!items && props.history.fetching ? <Loading what="your history" /> : null}
      {items && items.length === 0 ? (
        <Empty>
          No requests yet. Call POST /v1/chat/completions with one of your keys; it appears here when it settles.
        </Empty>
      ) : null}
      {items && items.length > 0 ? (
        <Table caption={`Your latest ${items.length} requests, newest first`} testId="history">
          <thead>
            <tr>
              <th scope="col">Started</th>
              <th scope="col">Model</th>
              <th scope="col">Status</th>
              <th scope="col">Cost (USDC)</th>
              <th scope="col">Clearing price</th>
              <th scope="col">Burn (DIEM)</th>
              <th scope="col">Support reference</th>
            </tr>
          </thead>
          <tbody>
            {items.map((r) => (
              <tr key={r.requestId}>
                <td>{dateTimeOf(r.startedAt)}</td>
                <td>
                  {r.model} <span className="hint">{r.modality}</span>
                </td>
                <td>
                  <StatusBadge status={r.status} />
                  {r.errorCode ? <span className="hint"> {r.errorCode}</span> : null}
                </td>
                <td className="num">{r.cost === null ? "—" : formatMicro(r.cost)}</td>
                <td className="num">{r.clearingPriceCents === null ? "—" : `${r.clearingPriceCents}¢`}</td>
                <td className="num">{r.burn === null ? "—" : formatMicro(r.burn)}</td>
                <td>
                  <button
                    type="button"
                    className="link mono"
                    onClick={() => setReference(r.supportReference)}
                    aria-label={`Details of request ${r.supportReference}`}
                  >
                    {r.supportReference.slice(0, 8)}…
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      ) : null}
      <Dialog title="Request detail" open={reference !== undefined} onClose={() => setReference(undefined)}>
        {reference ? <RequestDetail supportReference={reference} /> : null}
      </Dialog>
    </Panel>
  );
}

function RequestDetail(props: { supportReference: string }) {
  const [res] = useQuery({
    query: RequestDetailQuery,
    variables: { supportReference: props.supportReference },
    requestPolicy: "network-only",
  });
  if (res.error) return <ErrorNote error={res.error} what="that request" />;
  const found = res.data?.myInferenceRequest;
  if (!found) return <Loading what="the request" />;
  const r = readFragment(RequestDetailFragment, found);
  const rows: [string, string][] = [
    ["Support reference", r.supportReference],
    ["Request id", r.requestId],
    ["Route", `${r.route}${r.stream ? " (streamed)" : ""}`],
    ["Model", `${r.model} (${r.modality})`],
    ["Status", `${r.status}${r.errorCode ? ` — ${r.errorCode}` : ""}`],
    ["Cost", r.cost === null ? "—" : `${formatMicro(r.cost)} USDC`],
    ["Clearing price", r.clearingPriceCents === null ? "—" : `${r.clearingPriceCents}¢ per $1 of face`],
    ["Ceiling at the time", `${r.maxPriceCents}¢`],
    ["Burn", r.burn === null ? "—" : `${formatMicro(r.burn)} DIEM`],
    ["Saved vs face", r.cost === null || r.burn === null ? "—" : `${formatMicro(bigOf(r.burn) - bigOf(r.cost))} USDC`],
    ["Supplier keys tried", String(r.attempts)],
    ["Started", dateTimeOf(r.startedAt)],
    ["Completed", dateTimeOf(r.completedAt)],
  ];
  return (
    <dl className="detail" data-testid="request-detail">
      {rows.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}
