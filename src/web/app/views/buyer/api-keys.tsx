import { type FormEvent, useEffect, useRef, useState } from "react";
import { useMutation } from "urql";
import { Dialog, Empty, Notice, Panel, Table } from "../../components/ui";
import { errorInfo } from "../../lib/graphql";
import { type FragmentOf, type ResultOf, readFragment } from "../../lib/tada";
import { dateTimeOf } from "../../lib/time";
import { ApiKeyLimitsFragment, ApiKeyRowFragment, CreateApiKeyMutation, RevokeApiKeyMutation } from "./api-keys.gql";
import {
  KeyPolicyForm,
  type KeyRow,
  KeySpend,
  LIMIT_PROBLEM,
  LIMIT_RESETS,
  limitOfInput,
  PolicySummary,
} from "./key-policy";

/** setTimeout's longest delay (a monthly reset can be further away). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The account's keys: each key's policy and what it spent this period against its limit. The
 * numbers move with the account (the buyer view re-reads on `balanceChanged`, which every charge
 * and refund publishes), and the table re-reads itself when a period ends or a key expires.
 */
export function ApiKeysPanel(props: {
  keys: readonly FragmentOf<typeof ApiKeyRowFragment>[];
  limits: FragmentOf<typeof ApiKeyLimitsFragment>;
  onChanged: () => void;
}) {
  const keys = readFragment(ApiKeyRowFragment, props.keys);
  const bounds = readFragment(ApiKeyLimitsFragment, props.limits);
  const [name, setName] = useState("");
  const [limit, setLimit] = useState("");
  const [reset, setReset] = useState<KeyRow["limitReset"]>("DAILY");
  const [problem, setProblem] = useState<string | undefined>();
  const [editing, setEditing] = useState<string | undefined>();
  const edited = keys.find((k) => k.id === editing);
  const [created, setCreated] = useState<ResultOf<typeof CreateApiKeyMutation>["createApiKey"] | undefined>();
  const [createState, createKey] = useMutation(CreateApiKeyMutation);
  const [revokeState, revokeKey] = useMutation(RevokeApiKeyMutation);
  const [confirming, setConfirming] = useState<string | undefined>();
  const [copied, setCopied] = useState(false);

  const changed = useRef(props.onChanged);
  changed.current = props.onChanged;
  // the next period boundary or expiry: then the spend starts again (or the key stops), so re-read
  const next = keys.reduce<number | undefined>((soonest, k) => {
    for (const at of [k.resetsAt, k.expiresAt]) {
      const t = at ? Date.parse(at) : Number.NaN;
      if (t > Date.now() && (soonest === undefined || t < soonest)) soonest = t;
    }
    return soonest;
  }, undefined);
  useEffect(() => {
    if (next === undefined) return;
    const timer = setTimeout(() => changed.current(), Math.min(next - Date.now() + 1000, MAX_TIMER_MS));
    return () => clearTimeout(timer);
  }, [next]);

  async function submit(e: FormEvent) {
    e.preventDefault();
    const limitUsdc = limitOfInput(limit);
    if (limitUsdc === undefined) {
      setProblem(LIMIT_PROBLEM);
      return;
    }
    setProblem(undefined);
    const policy = limitUsdc === null ? {} : { limitUsdc, limitReset: reset };
    const r = await createKey({ input: { name: name.trim(), ...policy } });
    if (r.data) {
      setCreated(r.data.createApiKey);
      setName("");
      setLimit("");
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
        <label>
          Spending limit (USDC, optional)
          <input
            name="keyLimit"
            inputMode="decimal"
            value={limit}
            onChange={(e) => setLimit(e.target.value)}
            placeholder="no limit"
          />
        </label>
        <label>
          Limit resets
          <select name="keyLimitReset" value={reset} onChange={(e) => setReset(e.target.value as KeyRow["limitReset"])}>
            {LIMIT_RESETS.map((r) => (
              <option key={r.value} value={r.value}>
                {r.label}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={createState.fetching}>
          Create key
        </button>
      </form>
      <p className="hint">
        A key's limit, its own ceiling, the models it may call and its expiry can be changed at any time (Edit).
      </p>
      {problem ? <Notice tone="error">{problem}</Notice> : null}
      {createState.error && !problem ? <Notice tone="error">{errorInfo(createState.error).message}</Notice> : null}
      {revokeState.error ? <Notice tone="error">{errorInfo(revokeState.error).message}</Notice> : null}
      {keys.length === 0 ? (
        <Empty>No active keys. Create one to call the API (at most 10 active).</Empty>
      ) : (
        <Table caption="Active API keys" testId="api-keys">
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Policy</th>
              <th scope="col">Spent this period</th>
              <th scope="col">Last used</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.map((k) => (
              <tr key={k.id}>
                <td>
                  {k.name}
                  <div className="hint">
                    <span className="mono">{k.keyPrefix}…</span> · made by {k.source.toLowerCase()}
                  </div>
                </td>
                <td>
                  <PolicySummary apiKey={k} />
                </td>
                <td>
                  <KeySpend apiKey={k} />
                </td>
                <td>
                  {dateTimeOf(k.lastUsedAt)}
                  <div className="hint">created {dateTimeOf(k.createdAt)}</div>
                </td>
                <td>
                  <div className="key-actions">
                    <button
                      type="button"
                      className="secondary"
                      onClick={() => setEditing(k.id)}
                      aria-label={`Edit policy of key ${k.name}`}
                    >
                      Edit
                    </button>
                    <button
                      type="button"
                      className="danger"
                      onClick={() => void revoke(k.id)}
                      aria-label={`${confirming === k.id ? "Confirm revoking" : "Revoke"} key ${k.name}`}
                    >
                      {confirming === k.id ? "Confirm revoke" : "Revoke"}
                    </button>
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
      <Dialog
        title={edited ? `Key ${edited.name}` : "Key"}
        open={edited !== undefined}
        onClose={() => setEditing(undefined)}
      >
        {edited ? (
          <KeyPolicyForm
            apiKey={edited}
            ceilingMin={bounds.ceilingCentsMin}
            ceilingMax={bounds.ceilingCentsMax}
            onDone={() => setEditing(undefined)}
          />
        ) : null}
      </Dialog>
    </Panel>
  );
}
