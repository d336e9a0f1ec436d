import { Empty } from "../../components/ui";
import { formatMicro, usd } from "../../lib/money";
import { type FragmentOf, type ResultOf, readFragment } from "../../lib/tada";
import { timeOf } from "../../lib/time";
import { FeedClearFragment } from "./clears-feed.gql";

export type FeedClear = FragmentOf<typeof FeedClearFragment>;

/** What tells two clears apart on screen (the feed carries no ids: clears are anonymised). */
export function clearSignature(c: ResultOf<typeof FeedClearFragment>): string {
  return `${c.at}|${c.model}|${c.priceCentsPerDollar}|${c.burnDiem}|${c.grossUsdc}`;
}

/** The live clears feed, newest first: the cache holds the seed with every event heard since prepended. */
export function ClearsFeed(props: { clears: readonly FeedClear[] }) {
  const clears = readFragment(FeedClearFragment, props.clears);
  if (clears.length === 0) {
    return <Empty>No clears yet today. Each completed request appears here the moment it settles.</Empty>;
  }
  // a key that survives a prepend: the clear's signature and which occurrence of it this is
  const seen = new Map<string, number>();
  return (
    <ol className="feed" aria-live="polite" aria-label="Latest clears, newest first" data-testid="clears-feed">
      {clears.map((c) => {
        const sig = clearSignature(c);
        const n = (seen.get(sig) ?? 0) + 1;
        seen.set(sig, n);
        return (
          <li key={`${sig}#${n}`} className="feed-item">
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
        );
      })}
    </ol>
  );
}
