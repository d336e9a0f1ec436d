import { Bar, BarChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { Empty } from "../../components/ui";
import { type FragmentOf, readFragment } from "../../lib/tada";
import { ModelSharesFragment } from "./model-shares.gql";

export function ModelShares(props: { stats: FragmentOf<typeof ModelSharesFragment> | undefined }) {
  if (!props.stats) return null;
  const stats = readFragment(ModelSharesFragment, props.stats);
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
