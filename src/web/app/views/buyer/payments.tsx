import { StatusBadge, Table } from "../../components/ui";
import { formatMicro } from "../../lib/money";
import { type FragmentOf, readFragment } from "../../lib/tada";
import { dateTimeOf } from "../../lib/time";
import { PaymentRowFragment } from "./payments.gql";

export function Payments(props: { payments: readonly FragmentOf<typeof PaymentRowFragment>[] }) {
  const payments = readFragment(PaymentRowFragment, props.payments);
  if (payments.length === 0) return null;
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
        {payments.map((p) => (
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
