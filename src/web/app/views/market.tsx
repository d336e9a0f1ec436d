import { useState } from "react";
import { Bar, BarChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { useQuery } from "urql";
import { DepthChart } from "../components/depth-chart";
import { Empty, ErrorNote, Loading, Panel, Stat, Stats, Table } from "../components/ui";
import { useCoalesced, useEvent, useNow } from "../lib/live";
import { bpsPercent, diem, formatMicro, plural, usd } from "../lib/money";
import {
  CAPACITY_CHANGED,
  CLEARS_SUBSCRIPTION,
  type Clear,
  MARKET,
  MARKET_STATS,
  type MarketData,
  type MarketStatsData,
  MODEL_STATS,
  type ModelStatsData,
  RECENT_CLEARS,
  type RecentClearsData,
} from "../lib/operations";
import { formatCountdown, msUntilUtcMidnight, timeOf } from "../lib/time";

const FEED_LENGTH = 30;
const WINDOWS = ["24h", "7d", "30d"] as const;

/** What tells two clears apart on screen (the feed carries no ids: clears are anonymised). */
function clearSignature(c: Clear): string {
  return `${c.at}|${c.model}|${c.priceCentsPerDollar}|${c.burnDiem}|${c.grossUsdc}`;
}

/** The public market: depth, prices, today's volume and savings, live clears, model shares. */
export function MarketView() {
  const [market, refetchMarket] = useQuery<MarketData>({ query: MARKET });
  const [stats, refetchStats] = useQuery<MarketStatsData>({ query: MARKET_STATS });
  const [statsWindow, setStatsWindow] = useState<(typeof WINDOWS)[number]>("24h");
  const [models, refetchModels] = useQuery<ModelStatsData>({ query: MODEL_STATS, variables: { window: statsWindow } });
  const [recent] = useQuery<RecentClearsData>({ query: RECENT_CLEARS, variables: { limit: FEED_LENGTH } });
  const [live, setLive] = useState<(Clear & { key: string })[]>([]);

  const fresh = { requestPolicy: "network-only" } as const;
  const marketSoon = useCoalesced(() => refetchMarket(fresh), 1000);
  const statsSoon = useCoalesced(() => {
    refetchStats(fresh);
    refetchMarket(fresh);
  }, 1000);
  const modelsSoon = useCoalesced(() => refetchModels(fresh), 5000);

  const clearsSub = useEvent<{ clears: Clear }>(CLEARS_SUBSCRIPTION, (d) => {
    // one event per clear even if the stream delivers it twice (a resubscription replays the tick)
    setLive((prev) =>
      prev.some((p) => clearSignature(p) === clearSignature(d.clears))
        ? prev
        : [{ ...d.clears, key: `${d.clears.at}-${Math.random()}` }, ...prev].slice(0, FEED_LENGTH),
    );
    statsSoon();
    modelsSoon();
  });
  const capacitySub = useEvent(CAPACITY_CHANGED, () => marketSoon());

  // a clear heard live and also in the (re-)read recent list is shown once: each recent clear
  // cancels one live event with the same time, model, price and charge
  const recentClears = recent.data?.recentClears ?? [];
  const unmatched = new Map<string, number>();
  for (const c of recentClears) unmatched.set(clearSignature(c), (unmatched.get(clearSignature(c)) ?? 0) + 1);
  const liveOnly = live.filter((c) => {
    const n = unmatched.get(clearSignature(c)) ?? 0;
    if (n === 0) return true;
    unmatched.set(clearSignature(c), n - 1);
    return false;
  });
  const feed = [...liveOnly, ...recentClears.map((c, i) => ({ ...c, key: `r-${c.at}-${i}` }))].slice(0, FEED_LENGTH);
  const m = market.data?.market;
  const s = stats.data?.marketStats;
  const liveError = clearsSub.error ?? capacitySub.error;

  return (
    <div className="view market-view">
      <div className="view-head">
        <h1>Market</h1>
        <p className="lede">
          Expiring DIEM capacity (1 DIEM = $1 of upstream inference) cleared at the cheapest posted price under each
          buyer's ceiling.{" "}
          <span className={`live-dot ${liveError ? "live-off" : ""}`} role="status">
            {liveError ? "Live updates interrupted — reconnecting" : "Live"}
          </span>
        </p>
      </div>

      <Panel title="Right now">
        {market.error ? (
          <ErrorNote error={market.error} what="the market" onRetry={() => refetchMarket(fresh)} />
        ) : null}
        <Stats label="Market figures">
          <Stat
            label="Cheapest posted price"
            testId="cheapest-posted"
            value={m ? (m.cheapestPostedCents === null ? "nothing posted" : `${m.cheapestPostedCents}¢`) : "…"}
            hint="per $1 of face value"
          />
          <Stat
            label="Routable DIEM"
            testId="routable-diem"
            value={m ? formatMicro(m.routableDiem, 2) : "…"}
            title={m ? `${formatMicro(m.routableDiem)} DIEM` : undefined}
            hint={m ? `${usd(m.usdcToBuyAll)} buys it all` : undefined}
          />
          <Countdown />
          <Stat
            label="Today's volume"
            testId="today-volume"
            value={s ? usd(s.todayGross) : "…"}
            title={s ? `${formatMicro(s.todayGross)} USDC` : undefined}
            hint={s ? `${plural(s.todayClears, "clear")} · ${diem(s.todayBurn)}` : undefined}
          />
          <Stat
            label="Buyers saved vs face"
            testId="buyer-savings"
            value={s ? usd(s.saved) : "…"}
            title={s ? `${formatMicro(s.saved)} USDC saved on ${formatMicro(s.faceValue)} of face value` : undefined}
            hint={s ? `paid ${bpsPercent(s.paidOfFaceBps)} of face over ${plural(s.clears, "clear")}` : undefined}
          />
          <Stat
            label="Average clearing price today"
            value={s ? (s.todayAverageClearingPriceCents === null ? "—" : `${s.todayAverageClearingPriceCents}¢`) : "…"}
            hint="weighted by DIEM burned"
          />
        </Stats>
      </Panel>

      <Panel title="Capacity ladder">
        {!m && market.fetching ? <Loading what="the ladder" /> : null}
        {m ? <DepthChart prices={m.prices} /> : null}
        {m && m.prices.length === 0 ? (
          <Empty>Nothing is posted at any price right now. Suppliers post DIEM from 1¢ to 80¢ per $1.</Empty>
        ) : null}
        {m && m.prices.length > 0 ? (
          <Table caption="Routable DIEM by price" testId="ladder-table">
            <thead>
              <tr>
                <th scope="col">Price</th>
                <th scope="col">Routable DIEM</th>
                <th scope="col">USDC to buy all</th>
              </tr>
            </thead>
            <tbody>
              {m.prices.map((p) => (
                <tr key={p.priceCentsPerDollar}>
                  <td>{p.priceCentsPerDollar}¢</td>
                  <td className="num">{formatMicro(p.routableDiem, 2)}</td>
                  <td className="num">{usd(p.usdcToBuyAll)}</td>
                </tr>
              ))}
            </tbody>
          </Table>
        ) : null}
      </Panel>

      <div className="two-col">
        <Panel title="Live clears">
          {recent.error ? <ErrorNote error={recent.error} what="recent clears" /> : null}
          {feed.length === 0 ? (
            <Empty>No clears yet today. Each completed request appears here the moment it settles.</Empty>
          ) : (
            <ol className="feed" aria-live="polite" aria-label="Latest clears, newest first" data-testid="clears-feed">
              {feed.map((c) => (
                <li key={c.key} className="feed-item">
                  <time dateTime={c.at}>{timeOf(c.at)}</time>
                  <span className="feed-model">{c.model}</span>
                  <span className="badge">{c.modality}</span>
                  <span className="num feed-price">{c.priceCentsPerDollar}¢</span>
                  <span
                    className="num feed-gross"
                    title={`${formatMicro(c.grossUsdc)} USDC for ${formatMicro(c.burnDiem)} DIEM`}
                  >
                    {usd(c.grossUsdc)}
                  </span>
                </li>
              ))}
            </ol>
          )}
        </Panel>

        <Panel
          title="Model usage"
          actions={
            <fieldset className="segmented">
              <legend className="sr-only">Window</legend>
              {WINDOWS.map((w) => (
                <label key={w}>
                  <input
                    type="radio"
                    name="window"
                    value={w}
                    checked={statsWindow === w}
                    onChange={() => setStatsWindow(w)}
                  />
                  <span>{w}</span>
                </label>
              ))}
            </fieldset>
          }
        >
          {models.error ? <ErrorNote error={models.error} what="model usage" /> : null}
          <ModelShares data={models.data} />
          {s ? (
            <Table caption="Today's clears by modality">
              <thead>
                <tr>
                  <th scope="col">Modality</th>
                  <th scope="col">Clears</th>
                  <th scope="col">DIEM</th>
                  <th scope="col">USDC</th>
                </tr>
              </thead>
              <tbody>
                {s.todayByModality.map((d) => (
                  <tr key={d.modality}>
                    <td>{d.modality}</td>
                    <td className="num">{d.clears}</td>
                    <td className="num">{formatMicro(d.burn, 2)}</td>
                    <td className="num">{usd(d.gross)}</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          ) : null}
        </Panel>
      </div>
    </div>
  );
}

function ModelShares(props: { data: ModelStatsData | undefined }) {
  const stats = props.data?.modelStats;
  if (!stats) return null;
  if (!stats.hasSufficientVolume || stats.models.length === 0) {
    return (
      <Empty>
        Not enough volume in the last {stats.window} to publish model shares (they are withheld below a privacy
        threshold).
      </Empty>
    );
  }
  const data = stats.models.slice(0, 10).map((m) => ({ id: m.id, share: Math.round(m.usageShare * 1000) / 10 }));
  return (
    <figure className="chart" data-testid="model-shares">
      <div
        className="chart-box"
        role="img"
        aria-label={`Usage share by model over ${stats.window}: ${data.map((d) => `${d.id} ${d.share}%`).join(", ")}`}
      >
        <ResponsiveContainer width="100%" height={Math.max(120, data.length * 28)}>
          <BarChart data={data} layout="vertical" margin={{ left: 8, right: 16 }}>
            <XAxis type="number" domain={[0, 100]} tickFormatter={(v: number) => `${v}%`} stroke="#3d4756" />
            <YAxis type="category" dataKey="id" width={150} stroke="#3d4756" />
            <Tooltip formatter={(v) => [`${v}%`, "share"]} />
            <Bar dataKey="share" fill="#1f5fbf" isAnimationActive={false} />
          </BarChart>
        </ResponsiveContainer>
      </div>
      <figcaption>Share of usage by model, {stats.window} window, top 10.</figcaption>
    </figure>
  );
}

function Countdown() {
  const now = useNow(1000);
  return (
    <Stat
      label="Offers expire in"
      testId="expiry-countdown"
      value={
        <time dateTime={`PT${Math.floor(msUntilUtcMidnight(now) / 1000)}S`}>
          {formatCountdown(msUntilUtcMidnight(now))}
        </time>
      }
      hint="at UTC midnight, when DIEM resets"
    />
  );
}
