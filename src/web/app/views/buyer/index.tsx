import { useQuery } from "urql";
import { Empty, ErrorNote, Loading, Panel, Stat, Stats } from "../../components/ui";
import { WebhooksPanel } from "../../components/webhooks/webhooks-panel";
import { useCoalesced, useEvent } from "../../lib/live";
import { formatMicro, usd } from "../../lib/money";
import type { Session } from "../../lib/session";
import { shortAddress } from "../../lib/time";
import { CapacityChangedSubscription } from "../market/documents";
import { ApiKeysPanel } from "./api-keys";
import { CeilingPanel } from "./ceiling";
import {
  BalanceChangedSubscription,
  BuyerMarketQuery,
  BuyerQuery,
  HistoryQuery,
  PaymentConfirmedSubscription,
  VideoJobsQuery,
  VideoJobUpdatedSubscription,
} from "./documents";
import { HistoryPanel } from "./history";
import { Payments } from "./payments";
import { SpendChart } from "./spend-chart";
import { TopUpPanel } from "./top-up";
import { VideoJobsPanel } from "./video-jobs";

const HISTORY_LIMIT = 50;
const fresh = { requestPolicy: "network-only" } as const;

/** The buyer's dashboard: balances, funding, ceiling, keys, history, video jobs, webhooks. */
export function BuyerView(props: { session: Session }) {
  const [buyer, refetchBuyer] = useQuery({ query: BuyerQuery });
  const [history, refetchHistory] = useQuery({ query: HistoryQuery, variables: { limit: HISTORY_LIMIT } });
  const [market, refetchMarket] = useQuery({ query: BuyerMarketQuery });
  const [videos] = useQuery({ query: VideoJobsQuery });

  // ~1,500 of the per-minute GraphQL budget per re-read: at most one per 2 s while an agent spends
  const accountSoon = useCoalesced(() => {
    refetchBuyer(fresh);
    refetchHistory(fresh);
  }, 2000);
  const marketSoon = useCoalesced(() => refetchMarket(fresh), 1000);
  useEvent(BalanceChangedSubscription, accountSoon);
  useEvent(PaymentConfirmedSubscription, accountSoon);
  useEvent(CapacityChangedSubscription, marketSoon);
  // a video job's event carries the whole row: the cache writes it (cache.ts), nothing is re-read
  useEvent(VideoJobUpdatedSubscription, () => undefined);

  if (buyer.error && !buyer.data)
    return <ErrorNote error={buyer.error} what="your account" onRetry={() => refetchBuyer(fresh)} />;
  const data = buyer.data;
  const account = data?.viewer;
  if (!data || !account) return <Loading what="your account" />;
  const savings = data.mySavings;

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
        <CeilingPanel
          ceiling={account.maxPriceCentsPerDollar}
          market={market.data?.market}
          limits={data.limits}
          onSaved={accountSoon}
        />
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

      <ApiKeysPanel keys={account.apiKeys} limits={data.limits} onChanged={() => refetchBuyer(fresh)} />

      <HistoryPanel history={history} onRetry={() => refetchHistory(fresh)} />

      <VideoJobsPanel videos={videos} />

      <WebhooksPanel side="buyer" />
    </div>
  );
}
