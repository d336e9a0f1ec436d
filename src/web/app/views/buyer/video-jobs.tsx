import { Empty, ErrorNote, Panel, StatusBadge, Table } from "../../components/ui";
import { formatMicro } from "../../lib/money";
import { type ResultOf, readFragment } from "../../lib/tada";
import { dateTimeOf } from "../../lib/time";
import type { VideoJobsQuery } from "./documents";
import { VideoJobRowFragment } from "./video-jobs.gql";

export function VideoJobsPanel(props: { videos: { data?: ResultOf<typeof VideoJobsQuery>; error?: unknown } }) {
  const { videos } = props;
  const jobs = videos.data ? readFragment(VideoJobRowFragment, videos.data.myVideoJobs) : undefined;
  return (
    <Panel title="Video jobs">
      {videos.error ? <ErrorNote error={videos.error} what="video jobs" /> : null}
      {jobs && jobs.length === 0 ? (
        <Empty>No video jobs. Quote and queue one with POST /v1/video/quote and /v1/video/queue.</Empty>
      ) : null}
      {jobs && jobs.length > 0 ? (
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
            {jobs.map((j) => (
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
  );
}
