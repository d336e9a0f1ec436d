import { describe, expect, test } from "vitest";
import { parseStatsWindow, rankModels, shareOf, utcDaysBetween } from "../../../src/domain/catalog/catalog-stats.js";

describe("shareOf (rounded half-up to 4 decimals)", () => {
  test.each([
    ["whole", 1n, 1n, 1],
    ["a third", 1n, 3n, 0.3333],
    ["two thirds rounds up", 2n, 3n, 0.6667],
    ["exact half of the last digit rounds up", 10n, 200_000n, 0.0001],
    ["just below half rounds down", 9n, 200_000n, 0],
    ["zero part", 0n, 10n, 0],
    ["zero total", 0n, 0n, 0],
    ["6/11", 6n, 11n, 0.5455],
  ])("%s", (_label, part, total, expected) => {
    expect(shareOf(part, total)).toBe(expected);
  });
});

describe("parseStatsWindow", () => {
  test.each([
    [undefined, "7d"],
    ["24h", "24h"],
    ["7d", "7d"],
    ["30d", "30d"],
  ])("%s → %s", (v, w) => {
    expect(parseStatsWindow(v)).toBe(w);
  });
  test.each([["1d"], [""], ["7D"], [["7d", "24h"]], [7]])("%j → invalid_request", (v) => {
    expect(() => parseStatsWindow(v)).toThrow(expect.objectContaining({ code: "invalid_request" }));
  });
});

describe("utcDaysBetween", () => {
  test("a 24h window ending at noon touches two UTC days", () => {
    expect(utcDaysBetween(new Date("2026-11-19T12:00:00Z"), new Date("2026-11-20T12:00:00Z"))).toEqual([
      "2026-11-19",
      "2026-11-20",
    ]);
  });
  test("a window ending at midnight includes the new day", () => {
    expect(utcDaysBetween(new Date("2026-02-27T00:00:00Z"), new Date("2026-03-01T00:00:00Z"))).toEqual([
      "2026-02-27",
      "2026-02-28",
      "2026-03-01",
    ]);
  });
});

describe("rankModels", () => {
  test("ranks by burn (ties by id), window shares and per-day shares", () => {
    const days = ["2026-01-01", "2026-01-02"];
    const out = rankModels(
      [
        { model: "b", modality: "text", burnMicroDiem: 300n },
        { model: "a", modality: "text", burnMicroDiem: 300n },
        { model: "c", modality: "image", burnMicroDiem: 400n },
      ],
      [
        { model: "a", day: "2026-01-01", burnMicroDiem: 300n },
        { model: "b", day: "2026-01-01", burnMicroDiem: 100n },
        { model: "b", day: "2026-01-02", burnMicroDiem: 200n },
        { model: "c", day: "2026-01-02", burnMicroDiem: 400n },
      ],
      days,
    );
    expect(out).toEqual([
      {
        id: "c",
        modality: "image",
        rank: 1,
        usageShare: 0.4,
        daily: [
          { day: "2026-01-01", share: 0 },
          { day: "2026-01-02", share: 0.6667 },
        ],
      },
      {
        id: "a",
        modality: "text",
        rank: 2,
        usageShare: 0.3,
        daily: [
          { day: "2026-01-01", share: 0.75 },
          { day: "2026-01-02", share: 0 },
        ],
      },
      {
        id: "b",
        modality: "text",
        rank: 3,
        usageShare: 0.3,
        daily: [
          { day: "2026-01-01", share: 0.25 },
          { day: "2026-01-02", share: 0.3333 },
        ],
      },
    ]);
  });
});
