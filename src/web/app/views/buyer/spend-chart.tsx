import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { Empty } from "../../components/ui";
import { bigOf, chartUnits, dollarTick, formatMicro } from "../../lib/money";
import { type FragmentOf, readFragment } from "../../lib/tada";
import { SpendChartRequestFragment } from "./spend-chart.gql";

export function SpendChart(props: { items: readonly FragmentOf<typeof SpendChartRequestFragment>[] }) {
  const rows = readFragment(SpendChartRequestFragment, props.items).filter((r) => r.cost !== null && r.burn !== null);
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
