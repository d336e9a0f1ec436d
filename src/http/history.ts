import type { Response } from "express";
import type { historyQuery } from "../contract/account.js";
import { HEADERS, type z } from "../contract/common.js";
import type { HistoryReader } from "../domain/keys/key-scopes.js";
import type { Services } from "../services.js";
import { presentHistoryCsv, presentHistoryRow } from "./present.js";

/**
 * The buyer history, as both routes answer it (`GET /v1/account/inference-history`, session;
 * `GET /v1/agent/requests`, Bearer): one service call with the filters, then a JSON page, or with
 * `format=csv` the page as text/csv, the next page's cursor in `X-Svc-Next-Cursor`.
 */
export async function answerHistory(
  services: Services,
  res: Response,
  reader: HistoryReader,
  q: z.infer<typeof historyQuery>,
): Promise<void> {
  const csv = q.format === "csv";
  const page = await services.accounts.inferenceHistory({
    ...reader,
    limit: q.limit,
    cursor: q.cursor,
    modality: q.modality,
    keyId: q.keyId,
    from: q.from === undefined ? undefined : new Date(q.from),
    to: q.to === undefined ? undefined : new Date(q.to),
    export: csv,
  });
  if (!csv) {
    res.json({ data: page.items.map(presentHistoryRow), nextCursor: page.nextCursor });
    return;
  }
  if (page.nextCursor) res.setHeader(HEADERS.nextCursor.name, page.nextCursor);
  res.setHeader("Content-Type", "text/csv; charset=utf-8");
  res.setHeader("Content-Disposition", 'attachment; filename="inference-history.csv"');
  res.send(presentHistoryCsv(page.items));
}
