import fc from "fast-check";
import { describe, expect, test } from "vitest";
import type { UpstreamModel } from "../../../src/adapters/upstream/client.js";
import { normalizeUpstreamModel } from "../../../src/domain/catalog/catalog-normalize.js";
import { textPricingOf } from "../../../src/domain/catalog/catalog-pricing.js";
import { usageOf } from "../../../src/domain/inference/settlement/usage.js";
import { burnMicroDiem } from "../../../src/lib/money.js";
import { computeBurnMicroDiem, DEFAULT_SIM_MODELS } from "../../../src/local/upstream-sim/index.js";

/**
 * Issue 39 item 3: the service prices a text request exactly as the upstream burns it, cache reads
 * and cache writes included. Every priced text model of the simulator's catalog goes through the
 * catalog's normalisation (what a sync stores) and the service's metering (`usageOf` →
 * `burnMicroDiem`); the burn equals the simulator's (`computeBurnMicroDiem`, the reference's
 * formula) for any usage the upstream may report.
 */

const textModels = DEFAULT_SIM_MODELS.filter((m) => m.type === "text" && m.model_spec.pricing && !m.model_spec.offline);

describe("service and simulator price a request the same", () => {
  test("some catalog model publishes a cache-write rate above its input rate", () => {
    const rows = textModels.map((m) => normalizeUpstreamModel(m as unknown as UpstreamModel, "text"));
    expect(
      rows.some(
        (r) => r.cacheWriteMicroPerM !== null && r.inputMicroPerM !== null && r.cacheWriteMicroPerM > r.inputMicroPerM,
      ),
    ).toBe(true);
    expect(rows.find((r) => r.id === "claude-sonnet-4-6")?.pricing).toMatchObject({
      input_per_million: 3_600_000,
      cache_write_per_million: 4_500_000,
    });
  });

  test.each(textModels.map((m) => [m.id, m] as const))("%s: burn(usage) agrees to the micro-DIEM", (_id, model) => {
    const row = normalizeUpstreamModel(model as unknown as UpstreamModel, "text");
    if (row.status !== "live") return;
    const pricing = textPricingOf({ ...row, created: null, syncedAt: new Date(0) });
    const simPricing = model.type === "text" ? model.model_spec.pricing : undefined;
    fc.assert(
      fc.property(
        fc.nat(400_000),
        fc.integer({ min: 1, max: 50_000 }),
        fc.nat(400_000),
        fc.nat(400_000),
        (p, c, r, w) => {
          const upstreamUsage = {
            prompt_tokens: p,
            completion_tokens: c,
            prompt_tokens_details: { cached_tokens: r, cache_creation_input_tokens: w },
          };
          const usage = usageOf(upstreamUsage);
          if (!usage) return false;
          return burnMicroDiem(pricing, usage) === computeBurnMicroDiem(simPricing, upstreamUsage);
        },
      ),
      { numRuns: 300 },
    );
  });
});
