import { type FormEvent, useState } from "react";
import { useMutation } from "urql";
import { Empty, Notice, Panel, StatusBadge, Table } from "../../components/ui";
import { errorInfo } from "../../lib/graphql";
import { formatMicro } from "../../lib/money";
import { type FragmentOf, readFragment } from "../../lib/tada";
import { RegisterUpstreamKeyMutation, RevokeUpstreamKeyMutation, UpstreamKeyRowFragment } from "./keys.gql";

export function KeysPanel(props: {
  keys: readonly FragmentOf<typeof UpstreamKeyRowFragment>[];
  onChanged: () => void;
}) {
  const keys = readFragment(UpstreamKeyRowFragment, props.keys);
  const [label, setLabel] = useState("");
  const [secret, setSecret] = useState("");
  const [registerState, register] = useMutation(RegisterUpstreamKeyMutation);
  const [revokeState, revoke] = useMutation(RevokeUpstreamKeyMutation);
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

  async function onRevoke(k: { id: string }) {
    if (confirming !== k.id) {
      setConfirming(k.id);
      return;
    }
    setConfirming(undefined);
    const r = await revoke({ input: { id: k.id } });
    if (!r.error && r.data) {
      const n = r.data.revokeUpstreamKey.cancelledOffers;
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
      {keys.length === 0 ? (
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
            {keys.map((k) => (
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
