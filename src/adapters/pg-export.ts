import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, open, rename, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pg from "pg";
import { to as copyTo } from "pg-copy-streams";

/** A table written to a CSV file: where, how many rows and bytes, and the file's sha256 (hex). */
export interface ExportedFile {
  file: string;
  rows: number;
  bytes: number;
  sha256: string;
}

/**
 * Writes `table` (a plain table: a detached partition) to `file` as CSV with a header row, as
 * `COPY … TO STDOUT (FORMAT csv, HEADER)` renders it, so `COPY … FROM … (FORMAT csv, HEADER)`
 * reads it back exactly (docs/operations.md "Restoring a retained month"). Durable before it
 * returns: the rows go to `<file>.partial`, which is fsynced, renamed to `file`, and the directory
 * fsynced, so a crash leaves either no `file` or a whole one (a leftover `.partial` is overwritten by
 * the next attempt). `client` must not be in use by anything else while the copy streams.
 */
export async function exportTableCsv(client: pg.ClientBase, table: string, file: string): Promise<ExportedFile> {
  await mkdir(dirname(file), { recursive: true });
  const partial = `${file}.partial`;
  const hash = createHash("sha256");
  let bytes = 0;
  const tally = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  const quoted = `"${table.replaceAll('"', '""')}"`;
  const source = client.query(copyTo(`COPY ${quoted} TO STDOUT WITH (FORMAT csv, HEADER true)`));
  await pipeline(source, tally, createWriteStream(partial));
  await fsync(partial);
  await rename(partial, file);
  await fsync(dirname(file));
  return { file, rows: source.rowCount, bytes, sha256: hash.digest("hex") };
}

/** The file is there, whole: its size and sha256 are what the export recorded. */
export async function exportedFileIntact(f: ExportedFile): Promise<boolean> {
  try {
    if ((await stat(f.file)).size !== f.bytes) return false;
  } catch {
    return false;
  }
  const hash = createHash("sha256");
  const fh = await open(f.file, "r");
  try {
    for await (const chunk of fh.createReadStream()) hash.update(chunk as Buffer);
  } finally {
    await fh.close().catch(() => undefined);
  }
  return hash.digest("hex") === f.sha256;
}

async function fsync(path: string): Promise<void> {
  const fh = await open(path, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
