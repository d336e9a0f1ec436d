import { useQuery } from "urql";
import { Empty, ErrorNote, Loading, Panel, Stat, Stats, StatusBadge, Table } from "../../components/ui";
import { WebhooksPanel } from "../../components/webhooks/webhooks-panel";
import { useCoalesced, useEvent } from "../../lib/live";
import { formatMicro, usd } from "../../lib/money";
import type { Session } from "../../lib/session";
import { dateTimeOf, shortAddress } from "../../lib/time";
import { EarningsChangedSubscription, OfferUpdatedSubscription, SupplierQuery } from "./documents";
import { KeysPanel } from "./keys";
import { OffersPanel } from "./offers";

const fresh = { requestPolicy: "network-only" } as const;

/** The supplier's dashboard: upstream keys, offers with live fills, earnings, ledger, payouts, webhooks. */
export function SupplierView(props: { session: Session }) {
  const [res, refetch] = useQuery({ query: SupplierQuery });
  // the whole dashboard costs ~6,400 of the 100,000-per-minute GraphQL budget: at most one re-read
  // per 3 s however often the offers fill
  const soon = useCoalesced(() => refetch(fresh), 3000);
  useEvent(OfferUpdatedSubscription, soon);
  useEvent(EarningsChangedSubscription, soon);

  if (res.error && !res.data) return <ErrorNote error={res.error} what="your supply" onRetry={() => refetch(fresh)} />;
  const d = res.data;
  if (!d) return <Loading what="your supply" />;
  const offers = d.myOffers.edges.map((e) => e.node);
  const ledger = d.mySupplierLedger;

  return (
    <div className="view supplier-view">
      <div className="view-head">
        <h1>Supplier</h1>
        <p className="lede">
          Wallet{" "}
          <span className="mono">{props.session.viewer ? shortAddress(props.session.viewer.walletAddress) : ""}</span>.
          Post your upstream key's DIEM at a price; buyers whose ceiling reaches it clear against the cheapest offer
          first. Unsold DIEM expires at UTC midnight.
        </p>
      </div>

      <Panel title="Earnings">
        <Stats label="Earnings">
          <Stat
            label="Payable"
            testId="supplier-payable"
            value={usd(ledger.payable)}
            title={`${formatMicro(ledger.payable)} USDC`}
            hint={
              BigInt(ledger.payable) < 0n
                ? "a refund after a payout: recovered from your next earnings"
                : "earned, not yet paid out"
            }
          />
          <Stat
            label="On hold"
            testId="supplier-held"
            value={usd(ledger.held)}
            title={`${formatMicro(ledger.held)} USDC`}
            hint="video jobs not yet delivered: payable once they are"
          />
          <Stat label="Paid out" value={usd(ledger.paidOut)} title={`${formatMicro(ledger.paidOut)} USDC`} />
          <Stat label="Payout in progress" value={usd(ledger.payoutPending)} />
          <Stat label="Payout minimum" value={usd(ledger.payoutMinimum)} hint="daily payouts to your wallet, on Base" />
        </Stats>
      </Panel>

      <KeysPanel keys={d.myUpstreamKeys} onChanged={() => refetch(fresh)} />
      <OffersPanel offers={offers} keys={d.myUpstreamKeys} limits={d.limits} onChanged={() => refetch(fresh)} />

      <Panel title="Recent fills">
        {d.mySupplierInferenceHistory.items.length === 0 ? (
          <Empty>No fills yet. Each clear against your offers appears here as it settles.</Empty>
        ) : (
          <Table caption="Clears you sold, newest first" testId="fills">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Model</th>
                <th scope="col">Price</th>
                <th scope="col">Burn (DIEM)</th>
                <th scope="col">Gross (USDC)</th>
                <th scope="col">Fee</th>
                <th scope="col">Earned</th>
              </tr>
            </thead>
            <tbody>
              {d.mySupplierInferenceHistory.items.map((c) => (
                <tr key={c.clearId}>
                  <td>{dateTimeOf(c.createdAt)}</td>
                  <td>
                    {c.model} <span className="hint">{c.modality}</span>
                    {c.refundedAt ? <span className="hint"> refunded</span> : null}
                  </td>
                  <td className="num">{c.priceCentsPerDollar}¢</td>
                  <td className="num">{formatMicro(c.burn)}</td>
                  <td className="num">{formatMicro(c.gross)}</td>
                  <td className="num">{formatMicro(c.fee)}</td>
                  <td className="num">{formatMicro(c.earned)}</td>
                </tr>
              ))}
            </tbody>
          </Table>
        )}
      </Panel>

      <div className="two-col">
        <Panel title="Supplier ledger">
          {ledger.entries.length === 0 ? (
            <Empty>No ledger entries yet.</Empty>
          ) : (
            <Table caption="Changes to your payable and on-hold balances, newest first" testId="supplier-ledger">
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Balance</th>
                  <th scope="col">Amount (USDC)</th>
                </tr>
              </thead>
              <tbody>
                {ledger.entries.map((e) => (
                  <tr key={e.id}>
                    <td>{dateTimeOf(e.createdAt)}</td>
                    <td>{e.transactionKind.replace(/_/g, " ")}</td>
                    <td>{e.book === "supplier_held" ? "on hold" : "payable"}</td>
                    <td className="num">{formatMicro(e.amount)}</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          )}
        </Panel>
        <Panel title="Payouts">
          {ledger.recentPayouts.length === 0 ? (
            <Empty>No payouts yet. Earnings above the minimum are paid daily to your wallet.</Empty>
          ) : (
            <Table caption="Recent payouts" testId="payouts">
              <thead>
                <tr>
                  <th scope="col">Day</th>
                  <th scope="col">Amount (USDC)</th>
                  <th scope="col">Status</th>
                  <th scope="col">Transaction</th>
                </tr>
              </thead>
              <tbody>
                {ledger.recentPayouts.map((p) => (
                  <tr key={p.id}>
                    <td>{p.period}</td>
                    <td className="num">{formatMicro(p.amount)}</td>
                    <td>
                      <StatusBadge status={p.status} />
                    </td>
                    <td className="mono">{p.transaction ? shortAddress(p.transaction) : "—"}</td>
                  </tr>
                ))}
              </tbody>
            </Table>
          )}
        </Panel>
      </div>

      <WebhooksPanel side="supplier" />
    </div>
  );
}
