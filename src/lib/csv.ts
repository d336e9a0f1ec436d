/**
 * CSV text (RFC 4180): fields separated by commas, records by CRLF; a field holding a comma, a
 * double quote, CR or LF is enclosed in double quotes with its quotes doubled.
 *
 * Formula-injection guard (OWASP "CSV Injection"): a spreadsheet runs a cell that begins with
 * `=`, `+`, `-` or `@` (or a tab or carriage return, which some programs strip first) as a formula,
 * so such a cell is written with a leading `'`, which spreadsheets show as text. The service's own
 * cells never begin so (amounts are unsigned); user-chosen text (a key's name) may.
 * See docs/decisions.md "History as CSV".
 */
export type CsvValue = string | number | null | undefined;

const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]/;

/** One field: null and undefined are empty; formula-like text is neutralised, then quoted if needed. */
export function csvField(value: CsvValue): string {
  if (value === null || value === undefined) return "";
  let text = String(value);
  if (FORMULA_START.test(text)) text = `'${text}`;
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** Records (the header first) as CSV text, each record ended by CRLF. */
export function toCsv(records: readonly (readonly CsvValue[])[]): string {
  return records.map((r) => `${r.map(csvField).join(",")}\r\n`).join("");
}
