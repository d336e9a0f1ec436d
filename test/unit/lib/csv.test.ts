import { describe, expect, test } from "vitest";
import { csvField, toCsv } from "../../../src/lib/csv.js";

describe("csvField: RFC 4180 quoting and the formula-injection guard", () => {
  test.each([
    { label: "plain text", value: "zai-org-glm-5-1", out: "zai-org-glm-5-1" },
    { label: "null is empty", value: null, out: "" },
    { label: "undefined is empty", value: undefined, out: "" },
    { label: "a number", value: 40, out: "40" },
    { label: "an amount", value: "0.001234", out: "0.001234" },
    { label: "a comma is quoted", value: "a,b", out: '"a,b"' },
    { label: "a quote is doubled inside quotes", value: 'say "hi"', out: '"say ""hi"""' },
    { label: "a line feed is quoted", value: "two\nlines", out: '"two\nlines"' },
    { label: "a carriage return is quoted", value: "two\rlines", out: '"two\rlines"' },
    { label: "= starts a formula: prefixed", value: "=1+1", out: "'=1+1" },
    { label: "+ prefixed", value: "+1", out: "'+1" },
    { label: "- prefixed", value: "-1", out: "'-1" },
    { label: "@ prefixed", value: "@SUM(A1)", out: "'@SUM(A1)" },
    { label: "a leading tab prefixed", value: "\t=1", out: "'\t=1" },
    { label: "a leading CR prefixed and quoted", value: "\r=1", out: '"\'\r=1"' },
    {
      label: "a formula with a comma and quotes: prefixed, then quoted",
      value: '=HYPERLINK("http://x","y")',
      out: `"'=HYPERLINK(""http://x"",""y"")"`,
    },
    { label: "= later in the text is left alone", value: "a=b", out: "a=b" },
  ])("$label", ({ value, out }) => {
    expect(csvField(value)).toBe(out);
  });
});

test("toCsv: records ended by CRLF", () => {
  expect(
    toCsv([
      ["a", "b"],
      ["1", null],
    ]),
  ).toBe("a,b\r\n1,\r\n");
});
