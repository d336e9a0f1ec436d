import { Area, Bar, CartesianGrid, ComposedChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { chartUnits, diem } from "../lib/money";
import { type FragmentOf, readFragment } from "../lib/tada";
import { DepthChartLimitsFragment, DepthChartPriceFragment } from "./depth-chart.gql";

interface Point {
  price: number;
  level: number;
  cumulative: number;
}

/**
 * The capacity ladder as a depth chart: bars = routable DIEM posted at each price, the stepped area
 * = DIEM a buyer with that ceiling can reach (everything at or below it, the router's rule).
 * Prices below the corridor (offers may post from 1 ¢) widen the axis instead of disappearing.
 */
export function DepthChart(props: {
  prices: readonly FragmentOf<typeof DepthChartPriceFragment>[];
  limits: FragmentOf<typeof DepthChartLimitsFragment>;
}) {
  const prices = readFragment(DepthChartPriceFragment, props.prices);
  const { ceilingCentsMin: corridorLow, ceilingCentsMax: high } = readFragment(DepthChartLimitsFragment, props.limits);
  const low = Math.min(corridorLow, ...prices.map((p) => p.priceCentsPerDollar));
  const byPrice = new Map(prices.map((p) => [p.priceCentsPerDollar, chartUnits(p.routableDiem)]));
  const data: Point[] = [];
  let cumulative = 0;
  for (let price = low; price <= high; price++) {
    const level = byPrice.get(price) ?? 0;
    cumulative += level;
    data.push({ price, level, cumulative });
  }
  const summary =
    prices.length === 0
      ? "No routable capacity at any price."
      : `Routable capacity at ${prices.length} price level${prices.length === 1 ? "" : "s"}: ${prices
          .map((p) => `${diem(p.routableDiem)} at ${p.priceCentsPerDollar}¢`)
          .join(", ")}.`;
  return (
    <figure className="chart" data-testid="depth-chart">
      <div className="chart-box" role="img" aria-label={`Depth chart. ${summary}`}>
        <ResponsiveContainer width="100%" height={260}>
          <ComposedChart data={data} margin={{ top: 8, right: 8, bottom: 8, left: 0 }}>
            <CartesianGrid strokeDasharray="3 3" stroke="#d5dae1" />
            <XAxis
              dataKey="price"
              type="number"
              domain={[low, high]}
              ticks={ticks(low, high)}
              tickFormatter={(v: number) => `${v}¢`}
              stroke="#3d4756"
            />
            <YAxis stroke="#3d4756" width={52} tickFormatter={(v: number) => compact(v)} />
            <Tooltip
              formatter={(value, name) => [
                `${Number(value).toLocaleString()} DIEM`,
                name === "level" ? "at this price" : "at or below",
              ]}
              labelFormatter={(label) => `${label}¢ per $1 face`}
            />
            <Area
              type="stepAfter"
              dataKey="cumulative"
              name="cumulative"
              stroke="#1f5fbf"
              fill="#9cc0f5"
              fillOpacity={0.45}
              isAnimationActive={false}
            />
            <Bar dataKey="level" name="level" fill="#0b7a53" isAnimationActive={false} />
          </ComposedChart>
        </ResponsiveContainer>
      </div>
      <figcaption>
        Green bars: DIEM posted at each price. Blue steps: DIEM reachable with a ceiling at that price. {summary}
      </figcaption>
    </figure>
  );
}

function ticks(low: number, high: number): number[] {
  const out: number[] = [];
  for (let t = Math.ceil(low / 10) * 10; t <= high; t += 10) out.push(t);
  if (out[0] !== low) out.unshift(low);
  return out;
}

function compact(v: number): string {
  if (v >= 1_000_000) return `${Math.round(v / 100_000) / 10}M`;
  if (v >= 1_000) return `${Math.round(v / 100) / 10}k`;
  return String(Math.round(v * 10) / 10);
}
