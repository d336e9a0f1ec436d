import { type FormEvent, useState } from "react";
import { useMutation } from "urql";
import { Empty, Notice, Panel, Table } from "../../components/ui";
import { errorInfo } from "../../lib/graphql";
import { type FragmentOf, type ResultOf, readFragment } from "../../lib/tada";
import { dateTimeOf } from "../../lib/time";
import { ApiKeyRowFragment, CreateApiKeyMutation, RevokeApiKeyMutation } from "./api-keys.gql";

export function ApiKeysPanel(props: { keys: readonly FragmentOf<typeof ApiKeyRowFragment>[]; onChanged: () => void }) {
  const keys = readFragment(ApiKeyRowFragment, props.keys);
  const [name, setName] = useState("");
  const [created, setCreated] = useState<ResultOf<typeof CreateApiKeyMutation>["createApiKey"] | undefined>();
  const [createState, createKey] = useMutation(CreateApiKeyMutation);
  const [revokeState, revokeKey] = useMutation(RevokeApiKeyMutation);
  const [confirming, setConfirming] = useState<string | undefined>();
  const [copied, setCopied] = useState(false);

  async function submit(e: FormEvent) {
    e.preventDefault();
    const r = await createKey({ input: { name: name.trim() } });
    if (r.data) {
      setCreated(r.data.createApiKey);
      setName("");
      setCopied(false);
      props.onChanged();
    }
  }

  async function revoke(id: string) {
    if (confirming !== id) {
      setConfirming(id);
      return;
    }
    setConfirming(undefined);
    const r = await revokeKey({ input: { id } });
    if (!r.error) props.onChanged();
  }

  return (
    <Panel title="API keys">
      {created ? (
        <div className="callout secret" role="status" data-testid="new-api-key">
          <p>
            <strong>Copy your new key now: it is shown once.</strong> Use it as <code>Authorization: Bearer …</code> on{" "}
            <code>/v1</code>.
          </p>
          <div className="row">
            <code className="secret-value" data-testid="new-api-key-value">
              {created.apiKey}
            </code>
            <button
              type="button"
              className="secondary"
              onClick={() => {
                void navigator.clipboard?.writeText(created.apiKey).then(
                  () => setCopied(true),
                  () => setCopied(false),
                );
              }}
            >
              {copied ? "Copied" : "Copy"}
            </button>
            <button type="button" className="secondary" onClick={() => setCreated(undefined)}>
              I stored it
            </button>
          </div>
        </div>
      ) : null}
      <form className="form inline" onSubmit={submit}>
        <label>
          New key name
          <input
            name="keyName"
            value={name}
            onChange={(e) => setName(e.target.value)}
            maxLength={64}
            minLength={1}
            required
          />
        </label>
        <button type="submit" disabled={createState.fetching}>
          Create key
        </button>
      </form>
      {createState.error ? <Notice tone="error">{errorInfo(createState.error).message}</Notice> : null}
      {revokeState.error ? <Notice tone="error">{errorInfo(revokeState.error).message}</Notice> : null}
      {keys.length === 0 ? (
        <Empty>No active keys. Create one to call the API (at most 10 active).</Empty>
      ) : (
        <Table caption="Active API keys" testId="api-keys">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Prefix</th>
              <th scope="col">Made by</th>
              <th scope="col">Created</th>
              <th scope="col">Last used</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.map((k) => (
              <tr key={k.id}>
                <td>{k.name}</td>
                <td className="mono">{k.keyPrefix}…</td>
                <td>{k.source.toLowerCase()}</td>
                <td>{dateTimeOf(k.createdAt)}</td>
                <td>{dateTimeOf(k.lastUsedAt)}</td>
                <td>
                  <button
                    type="button"
                    className="danger"
                    onClick={() => void revoke(k.id)}
                    aria-label={`${confirming === k.id ? "Confirm revoking" : "Revoke"} key ${k.name}`}
                  >
                    {confirming === k.id ? "Confirm revoke" : "Revoke"}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
    </Panel>
  );
}
