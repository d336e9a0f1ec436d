import { describe, expect, test } from "vitest";
import {
  exampleAnnotation,
  fencedBlocks,
  isCurlCommand,
  parseCurl,
  shellCommands,
  workedExamples,
} from "../../../testkit/doc-examples.js";

const env = { SVC_API_KEY: "svc_abc", ID: "42" };

describe("the document example reader", () => {
  test.each([
    {
      label: "GET with a Bearer header in double quotes",
      cmd: `curl -s http://h/v1/agent/me -H "authorization: Bearer $SVC_API_KEY"`,
      want: { method: "GET", url: "http://h/v1/agent/me", headers: { authorization: "Bearer svc_abc" } },
    },
    {
      label: "a body implies POST; single quotes are literal",
      cmd: `curl -sN http://h/x -H 'content-type: application/json' -d '{"a": "$ID"}'`,
      want: { method: "POST", body: '{"a": "$ID"}', headers: { "content-type": "application/json" } },
    },
    {
      label: "escaped quotes and expansion inside double quotes, the braced form",
      cmd: `curl -X PATCH "http://h/o/\${ID}?q=1" -d "{\\"id\\": \\"$ID\\"}"`,
      want: { method: "PATCH", url: "http://h/o/42?q=1", body: '{"id": "42"}' },
    },
    {
      label: "output options take their argument and change nothing",
      cmd: `curl -s -D - -o out.json -w '%{http_code}' http://h/y`,
      want: { method: "GET", url: "http://h/y", body: undefined },
    },
  ])("$label", ({ cmd, want }) => {
    expect(parseCurl(cmd, env)).toMatchObject(want);
  });

  test("a captured field: NAME=$(curl … | jq -r .a.b)", () => {
    const c = parseCurl(`OFFER=$(curl -s http://h/z -d '{}' | jq -r .data.id)`, env);
    expect(c.capture).toEqual({ variable: "OFFER", path: ["data", "id"] });
    expect(c.method).toBe("POST");
  });

  test.each([
    { label: "unknown variable", cmd: "curl http://h/$NOPE" },
    { label: "unknown option", cmd: "curl --compressed http://h/" },
    { label: "another pipe", cmd: "curl http://h/ | grep x" },
    { label: "a command list", cmd: "curl http://h/; echo" },
    { label: "no URL", cmd: "curl -s" },
  ])("refuses $label", ({ cmd }) => {
    expect(() => parseCurl(cmd, env)).toThrow();
  });

  test("blocks, annotations, commands and worked examples", () => {
    const md = [
      "text",
      "<!-- example: expect=402 -->",
      "```sh",
      "# a comment",
      "curl -s http://h/a \\",
      "  -H 'x: 1'",
      "claude mcp add svc http://h/mcp",
      "```",
      "<!-- worked-example -->",
      "```json",
      '{"example": "text", "n": 1}',
      "```",
    ].join("\n");
    const blocks = fencedBlocks(md);
    expect(blocks.map((b) => [b.lang, b.line])).toEqual([
      ["sh", 3],
      ["json", 10],
    ]);
    expect(exampleAnnotation(blocks[0] as never)).toEqual({ expectStatus: 402 });
    const cmds = shellCommands((blocks[0] as { code: string }).code);
    expect(cmds.map(isCurlCommand)).toEqual([true, false]);
    expect(parseCurl(cmds[0] as string, env).headers).toEqual({ x: "1" });
    expect(workedExamples(md)).toEqual([{ line: 10, example: { example: "text", n: 1 } }]);
    expect(exampleAnnotation({ lang: "sh", code: "", line: 1, annotation: "example: skip=paid" })).toEqual({
      skip: "paid",
    });
  });
});
