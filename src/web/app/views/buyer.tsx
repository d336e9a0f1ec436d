import { type FormEvent, type ReactNode, useEffect, useState } from "react";
import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { useMutation, useQuery } from "urql";
import { Dialog, Empty, ErrorNote, Loading, Notice, Panel, Stat, Stats, StatusBadge, Table } from "../components/ui";
import { errorInfo } from "../lib/graphql";
import { useCoalesced, useEvent } from "../lib/live";
import { bigOf, chartUnits, diem, dollarTick, formatMicro, parseDecimal6, usd } from "../lib/money";
import {
  type ApiKey,
  BALANCE_CHANGED,
  BUYER,
  type BuyerData,
  CAPACITY_CHANGED,
  CREATE_API_KEY,
  type CreateApiKeyData,
  HISTORY,
  type HistoryData,
  type InferenceRequest,
  MARKET,
  type MarketData,
  PAYMENT_CONFIRMED,
  type Payment,
  REQUEST_DETAIL,
  REVOKE_API_KEY,
  type RequestDetailData,
  SET_MAX_PRICE,
  VIDEO_JOB_UPDATED,
  VIDEO_JOBS,
  type VideoJobsData,
} from "../lib/operations";
import type { Session } from "../lib/session";
import { dateTimeOf, shortAddress } from "../lib/time";
import { devWalletProvider, injectedProvider, rememberedDevWallet, topUp } from "../lib/wallet";

const HISTORY_LIMIT = 50;
const fresh = { requestPolicy: "network-only" } as const;

/** The buyer's dashboard: balances, funding, ceiling, keys, history, video jobs. */
export function BuyerView(props: { session: Session }) {
  const [buyer, refetchBuyer] = useQuery<BuyerData>({ query: BUYER });
  const [history, refetchHistory] = useQuery<HistoryData>({ query: HISTORY, variables: { limit: HISTORY_LIMIT } });
  const [market, refetchMarket] = useQuery<MarketData>({ query: MARKET });
  const [videos, refetchVideos] = useQuery<VideoJobsData>({ query: VIDEO_JOBS });

  // ~700 of the per-minute GraphQL budget per re-read: at most one per 2 s while an agent spends
  const accountSoon = useCoalesced(() => {
    refetchBuyer(fresh);
    refetchHistory(fresh);
  }, 2000);
  const marketSoon = useCoalesced(() => refetchMarket(fresh), 1000);
  useEvent(BALANCE_CHANGED, accountSoon);
  useEvent(PAYMENT_CONFIRMED, accountSoon);
  useEvent(CAPACITY_CHANGED, marketSoon);
  const videosSoon = useCoalesced(() => refetchVideos(fresh), 2000);
  useEvent(VIDEO_JOB_UPDATED, videosSoon);

  if (buyer.error && !buyer.data)
    return <ErrorNote error={buyer.error} what="your account" onRetry={() => refetchBuyer(fresh)} />;
  const account = buyer.data?.viewer;
  if (!account) return <Loading what="your account" />;
  const savings = buyer.data?.mySavings;

  return (
    <div className="view buyer-view">
      <div className="view-head">
        <h1>Buyer</h1>
        <p className="lede">
          Wallet <span className="mono">{shortAddress(account.walletAddress)}</span>. Requests clear at the cheapest
          offer at or below your ceiling and are paid from confirmed USDC.
        </p>
      </div>

      <Panel title="Balance">
        <Stats label="Balances">
          <Stat
            label="Confirmed USDC"
            testId="buyer-confirmed"
            value={formatMicro(account.confirmedUsdc)}
            hint="spendable on inference"
          />
          <Stat
            label="Pending USDC"
            testId="buyer-pending"
            value={formatMicro(account.pendingUsdc)}
            hint={`confirms after ${props.session.config.confirmationBlocks} blocks; never spent before`}
          />
          <Stat
            label="Available now"
            value={formatMicro(account.availableUsdc)}
            hint={`${formatMicro(account.reservedUsdc)} held by requests in flight`}
          />
        </Stats>
        {!account.hasEverFunded ? (
          <Empty>No funds yet: top up below, or pay an x402 signup or refill from an agent.</Empty>
        ) : null}
        <Payments payments={account.payments.edges.map((e) => e.node)} />
      </Panel>

      <div className="two-col">
        <TopUpPanel session={props.session} walletAddress={account.walletAddress} onDone={accountSoon} />
        <CeilingPanel ceiling={account.maxPriceCentsPerDollar} market={market.data} onSaved={accountSoon} />
      </div>

      <Panel title="Spend and savings">
        {savings ? (
          <Stats label="Savings">
            <Stat
              label="Paid"
              value={usd(savings.paid)}
              title={`${formatMicro(savings.paid)} USDC`}
              hint={`${savings.clears} clears`}
            />
            <Stat label="Face value" value={usd(savings.faceValue)} hint="1 DIEM = $1 of upstream usage" />
            <Stat
              label="Saved vs face"
              testId="buyer-saved"
              value={usd(savings.savedVsFace)}
              title={`${formatMicro(savings.savedVsFace)} USDC`}
            />
            <Stat
              label="Saved vs your ceiling"
              value={usd(savings.savedVsCeiling)}
              hint="what the ceiling would have cost"
            />
          </Stats>
        ) : null}
        <SpendChart items={history.data?.myInferenceHistory.items ?? []} />
      </Panel>

      <ApiKeysPanel keys={account.apiKeys} onChanged={() => refetchBuyer(fresh)} />

      <HistoryPanel history={history} onRetry={() => refetchHistory(fresh)} />

      <Panel title="Video jobs">
        {videos.error ? <ErrorNote error={videos.error} what="video jobs" /> : null}
        {videos.data && videos.data.myVideoJobs.length === 0 ? (
          <Empty>No video jobs. Quote and queue one with POST /v1/video/quote and /v1/video/queue.</Empty>
        ) : null}
        {videos.data && videos.data.myVideoJobs.length > 0 ? (
          <Table caption="Your video jobs, newest first">
            <thead>
              <tr>
                <th scope="col">Queued</th>
                <th scope="col">Model</th>
                <th scope="col">Status</th>
                <th scope="col">Charge (USDC)</th>
                <th scope="col">Price</th>
                <th scope="col">Quote (DIEM)</th>
                <th scope="col">Support reference</th>
              </tr>
            </thead>
            <tbody>
              {videos.data.myVideoJobs.map((j) => (
                <tr key={j.queueId}>
                  <td>{dateTimeOf(j.createdAt)}</td>
                  <td>{j.model}</td>
                  <td>
                    <StatusBadge status={j.status} />
                    {j.failureReason ? <span className="hint"> {j.failureReason}</span> : null}
                  </td>
                  <td className="num">{formatMicro(j.chargeUsdc)}</td>
                  <td className="num">{j.clearingPriceCents === null ? "—" : `${j.clearingPriceCents}¢`}</td>
                  <td className="num">{formatMicro(j.quoteDiem, 2)}</td>
                  <td className="mono">{j.supportReference}</td>
                </tr>
              ))}
            </tbody>
          </Table>
        ) : null}
      </Panel>
    </div>
  );
}

function Payments(props: { payments: Payment[] }) {
  if (props.payments.length === 0) return null;
  return (
    <Table caption="Recent payments" testId="payments">
      <thead>
        <tr>
          <th scope="col">When</th>
          <th scope="col">Kind</th>
          <th scope="col">Amount (USDC)</th>
          <th scope="col">Status</th>
          <th scope="col">Confirmations</th>
        </tr>
      </thead>
      <tbody>
        {props.payments.map((p) => (
          <tr key={p.id}>
            <td>{dateTimeOf(p.createdAt)}</td>
            <td>{p.kind.toLowerCase().replace(/_/g, "-")}</td>
            <td className="num">{formatMicro(p.amount)}</td>
            <td>
              <StatusBadge status={p.status} />
            </td>
            <td className="num">
              {p.status === "CONFIRMED"
                ? `${p.confirmationsRequired} / ${p.confirmationsRequired}`
                : `${Math.min(p.confirmations, p.confirmationsRequired)} / ${p.confirmationsRequired}`}
            </td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

function TopUpPanel(props: { session: Session; walletAddress: string; onDone: () => void }) {
  const { config } = props.session;
  const [amount, setAmount] = useState("10");
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ tone: "ok" | "error"; text: string } | undefined>();
  const dev = rememberedDevWallet();
  const devMatches = dev && dev.address.toLowerCase() === props.walletAddress.toLowerCase() ? dev : undefined;
  const provider = devMatches ? devWalletProvider(devMatches, config.chainId) : injectedProvider();

  async function submit(e: FormEvent) {
    e.preventDefault();
    const micro = parseDecimal6(amount);
    if (micro === undefined || micro < 1_000_000n || micro > 1_000_000_000n) {
      setResult({ tone: "error", text: "Enter an amount from 1 to 1000 USDC (at most six decimals)." });
      return;
    }
    if (!provider) return;
    setBusy(true);
    setResult(undefined);
    try {
      const r = await topUp(config, provider, { amountMicroUsdc: micro, sessionWallet: props.walletAddress });
      setResult({
        tone: "ok",
        text: `Paid ${r.topUpAmountUsdc} USDC. It is pending until ${config.confirmationBlocks} blocks confirm it; this page updates when it does.`,
      });
      props.onDone();
    } catch (err) {
      setResult({ tone: "error", text: err instanceof Error ? err.message : String(err) });
    } finally {
      setBusy(false);
    }
  }

  return (
    <Panel title="Top up">
      {provider ? (
        <form className="form" onSubmit={submit}>
          <p>
            Pay USDC on Base with x402 from{" "}
            {devMatches ? `the dev wallet (${devMatches.label})` : "your browser wallet"}. The payer must be the
            signed-in wallet.
          </p>
          <label>
            Amount (USDC)
            <input
              name="amount"
              inputMode="decimal"
              value={amount}
              onChange={(e) => setAmount(e.target.value)}
              required
            />
          </label>
          <button type="submit" disabled={busy}>
            {busy ? "Waiting for the payment…" : "Top up"}
          </button>
        </form>
      ) : (
        <Empty>
          No browser wallet found. Install an EIP-1193 wallet to top up here, or fund from an agent with POST
          /v1/x402/refill and an API key.
        </Empty>
      )}
      {result ? <Notice tone={result.tone}>{result.text}</Notice> : null}
    </Panel>
  );
}

function CeilingPanel(props: { ceiling: number; market: MarketData | undefined; onSaved: () => void }) {
  const [value, setValue] = useState(String(props.ceiling));
  // a ceiling set elsewhere (an agent's PATCH /v1/agent/max-price) arrives by balanceChanged
  useEffect(() => setValue(String(props.ceiling)), [props.ceiling]);
  const [state, setMaxPrice] = useMutation(SET_MAX_PRICE);
  const [saved, setSaved] = useState<string | undefined>();
  const m = props.market?.market;

  async function save(cents: number) {
    setSaved(undefined);
    const r = await setMaxPrice({ input: { maxPriceCentsPerDollar: cents } });
    if (!r.error) {
      setValue(String(cents));
      setSaved(`Ceiling set to ${cents}¢.`);
      props.onSaved();
    }
  }

  function submit(e: FormEvent) {
    e.preventDefault();
    void save(Number(value));
  }

  const reachable = m
    ? m.prices.filter((p) => p.priceCentsPerDollar <= props.ceiling).reduce((a, p) => a + bigOf(p.routableDiem), 0n)
    : 0n;
  let situation: ReactNode = null;
  if (m && m.cheapestPostedCents === null) {
    situation = (
      <Empty>Nothing is posted at any price right now; requests answer 503 pool_empty until supply returns.</Empty>
    );
  } else if (m && m.cheapestPostedCents !== null && m.cheapestPostedCents > props.ceiling) {
    const raiseTo = Math.max(30, m.cheapestPostedCents);
    situation = (
      <div className="callout" role="status" data-testid="ceiling-empty">
        <p>
          Nothing posted at your ceiling — raise it to {raiseTo}¢. Requests answer 503 no_eligible_supply until you do.
        </p>
        <button type="button" onClick={() => void save(raiseTo)} disabled={state.fetching}>
          Raise to {raiseTo}¢
        </button>
      </div>
    );
  } else if (m && m.cheapestPostedCents !== null) {
    situation = (
      <p role="status">
        Requests clear from {m.cheapestPostedCents}¢ now; {diem(reachable)} routable at or below {props.ceiling}¢.
      </p>
    );
  }

  return (
    <Panel title="Price ceiling">
      <form className="form" onSubmit={submit}>
        <label>
          Ceiling (cents per $1 of face, 30–80)
          <input
            name="ceiling"
            type="number"
            min={30}
            max={80}
            step={1}
            value={value}
            onChange={(e) => setValue(e.target.value)}
            required
          />
        </label>
        <button type="submit" disabled={state.fetching}>
          Save ceiling
        </button>
      </form>
      <p className="hint">
        Current ceiling: <strong data-testid="current-ceiling">{props.ceiling}¢</strong>. You pay the posted price of
        the offer that clears, never the ceiling.
      </p>
      {situation}
      {state.error ? <Notice tone="error">{errorInfo(state.error).message}</Notice> : null}
      {saved && !state.error ? <Notice>{saved}</Notice> : null}
    </Panel>
  );
}

/** Paid vs saved per hour (a short history) or per UTC day, summed exactly in micro-USDC. */
function SpendChart(props: { items: InferenceRequest[] }) {
  const rows = props.items.filter((r) => r.cost !== null && r.burn !== null);
  if (rows.length === 0) return <Empty>No paid requests yet. Spend and savings appear after your first clear.</Empty>;
  const times = rows.map((r) => Date.parse(r.startedAt));
  const span = Math.max(...times) - Math.min(...times);
  const hourly = span < 48 * 3600 * 1000;
  const buckets = new Map<string, { paid: bigint; saved: bigint }>();
  for (const r of rows) {
    const key = hourly ? `${r.startedAt.slice(0, 13)}:00Z` : r.startedAt.slice(0, 10);
    const b = buckets.get(key) ?? { paid: 0n, saved: 0n };
    const paid = bigOf(r.cost);
    b.paid += paid;
    b.saved += bigOf(r.burn) - paid; // 1 micro-DIEM of burn = 1 micro-USD of face value
    buckets.set(key, b);
  }
  const data = [...buckets.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([key, b]) => ({
      label: hourly ? `${key.slice(5, 10)} ${key.slice(11, 16)}` : key,
      paid: chartUnits(b.paid),
      saved: chartUnits(b.saved),
      paidText: formatMicro(b.paid),
      savedText: formatMicro(b.saved),
    }));
  return (
    <figure className="chart" data-testid="spend-chart">
      <div
        className="chart-box"
        role="img"
        aria-label={`Spend and savings ${hourly ? "per hour (UTC)" : "per UTC day"}: ${data
          .map((d) => `${d.label} paid ${d.paidText}, saved ${d.savedText} USDC`)
          .join("; ")}`}
      >
        <ResponsiveContainer width="100%" height={220}>
          <BarChart data={data} margin={{ top: 8, right: 8, bottom: 8, left: 0 }}>
            <CartesianGrid strokeDasharray="3 3" stroke="#d5dae1" />
            <XAxis dataKey="label" stroke="#3d4756" />
            <YAxis stroke="#3d4756" width={76} tickFormatter={dollarTick} />
            <Tooltip formatter={(v, name) => [dollarTick(Number(v)), name]} />
            <Legend />
            <Bar dataKey="paid" name="paid" stackId="a" fill="#1f5fbf" isAnimationActive={false} />
            <Bar dataKey="saved" name="saved vs face" stackId="a" fill="#0b7a53" isAnimationActive={false} />
          </BarChart>
        </ResponsiveContainer>
      </div>
      <figcaption>
        Over your latest {rows.length} paid requests, {hourly ? "per hour (UTC)" : "per UTC day"}: what you paid and
        what you saved against face value.
      </figcaption>
    </figure>
  );
}

function ApiKeysPanel(props: { keys: ApiKey[]; onChanged: () => void }) {
  const [name, setName] = useState("");
  const [created, setCreated] = useState<CreateApiKeyData["createApiKey"] | undefined>();
  const [createState, createKey] = useMutation<CreateApiKeyData>(CREATE_API_KEY);
  const [revokeState, revokeKey] = useMutation(REVOKE_API_KEY);
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
      {props.keys.length === 0 ? (
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
            {props.keys.map((k) => (
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

function HistoryPanel(props: {
  history: { data?: HistoryData; error?: unknown; fetching: boolean };
  onRetry: () => void;
}) {
  const [reference, setReference] = useState<string | undefined>();
  const [lookup, setLookup] = useState("");
  const items = props.history.data?.myInferenceHistory.items;
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
  const [res] = useQuery<RequestDetailData>({
    query: REQUEST_DETAIL,
    variables: { supportReference: props.supportReference },
    requestPolicy: "network-only",
  });
  if (res.error) return <ErrorNote error={res.error} what="that request" />;
  const r = res.data?.myInferenceRequest;
  if (!r) return <Loading what="the request" />;
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
