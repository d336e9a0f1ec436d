import { useState } from "react";
import { useQuery } from "urql";
import { DepthChart } from "../../components/depth-chart";
import { Empty, ErrorNote, Loading, Panel, Stat, Stats, Table } from "../../components/ui";
import { useCoalesced, useEvent, useNow } from "../../lib/live";
import { bpsPercent, diem, formatMicro, plural, usd } from "../../lib/money";
import { formatCountdown, msUntilUtcMidnight } from "../../lib/time";
import { ClearsFeed } from "./clears-feed";
import {
  CapacityChangedSubscription,
  ClearsSubscription,
  FEED_LENGTH,
  MarketQuery,
  MarketStatsQuery,
  ModelStatsQuery,
  RecentClearsQuery,
} from "./documents";
import { ModelShares } from "./model-shares";

const WINDOWS = ["24h", "7d", "30d"] as const;

/** The public market: depth, prices, today's volume and savings, live clears, model shares. */
export function MarketView() {
  const [market, refetchMarket] = useQuery({ query: MarketQuery });
  const [stats, refetchStats] = useQuery({ query: MarketStatsQuery });
  const [statsWindow, setStatsWindow] = useState<(typeof WINDOWS)[number]>("24h");
  const [models, refetchModels] = useQuery({ query: ModelStatsQuery, variables: { window: statsWindow } });
  const [recent] = useQuery({ query: RecentClearsQuery, variables: { limit: FEED_LENGTH } });

  const fresh = { requestPolicy: "network-only" } as const;
  const marketSoon = useCoalesced(() => refetchMarket(fresh), 1000);
  const statsSoon = useCoalesced(() => {
    refetchStats(fresh);
    refetchMarket(fresh);
  }, 1000);
  const modelsSoon = useCoalesced(() => refetchModels(fresh), 5000);

  // the clear itself is prepended to the cached feed by the client's cache (cache.ts);
  // the figures it moves (today's volume, savings, the ladder, model shares) are the server's sums,
  // so they are re-read, throttled
  const clearsSub = useEvent(ClearsSubscription, () => {
    statsSoon();
    modelsSoon();
  });
  const capacitySub = useEvent(CapacityChangedSubscription, () => marketSoon());

  const m = market.data?.market;
  const limits = market.data?.limits;
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
        {m && limits ? <DepthChart prices={m.prices} limits={limits} /> : null}
        {m && limits && m.prices.length === 0 ? (
          <Empty>
            Nothing is posted at any price right now. Suppliers post DIEM from {limits.offerPriceCentsMin}¢ to{" "}
            {limits.offerPriceCentsMax}¢ per $1.
          </Empty>
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
          <ClearsFeed clears={recent.data?.recentClears ?? []} />
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
          <ModelShares stats={models.data?.modelStats} />
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
