import { describe, expect, test } from "vitest";
import { displayUrl } from "../../../src/lib/url-display.js";

describe("displayUrl: scheme, host and port, never what may hold a credential", () => {
  test.each([
    { label: "a bare origin", value: "http://localhost:6379", want: "http://localhost:6379" },
    { label: "an origin with a slash", value: "https://mainnet.base.org/", want: "https://mainnet.base.org" },
    { label: "a password", value: "postgresql://svc:hunter2@db:5432/svc", want: "postgresql://db:5432/…" },
    { label: "a user only", value: "redis://default@redis:6379", want: "redis://redis:6379/…" },
    { label: "a key in the path", value: "https://base.g.alchemy.com/v2/KEY", want: "https://base.g.alchemy.com/…" },
    { label: "a token in the query", value: "http://collector:4318?token=T", want: "http://collector:4318/…" },
    {
      label: "user:password without a scheme (parsed as scheme svc:)",
      value: "svc:hunter2@db:5432/svc",
      want: "svc:…",
    },
    { label: "not a URL", value: "//svc:hunter2@db:5432/svc", want: "(a value that is not a URL; not shown)" },
  ])("$label", ({ value, want }) => {
    expect(displayUrl(value)).toBe(want);
  });
});
