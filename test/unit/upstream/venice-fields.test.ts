// The allow-lists of what goes upstream (src/adapters/upstream/venice-fields.ts) are Venice's reference
// (vendor/venice/swagger.yaml), derived by scripts/venice-fields.ts: this fails when they differ (after
// refreshing the reference, run `node --import tsx scripts/venice-fields.ts`), and `documentedBody`
// keeps what they list and nothing else.
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { documentedBody } from "../../../src/adapters/upstream/reference.js";
import { VENICE_REQUEST_FIELDS } from "../../../src/adapters/upstream/venice-fields.js";
import { deriveRequestFields, veniceReference } from "../../../testkit/venice-reference.js";

describe("VENICE_REQUEST_FIELDS", () => {
  test("is what the vendored reference documents for each body the service sends", () => {
    expect(VENICE_REQUEST_FIELDS).toEqual(deriveRequestFields());
  });

  test("names the reference's commit", () => {
    const text = readFileSync(new URL("../../../src/adapters/upstream/venice-fields.ts", import.meta.url), "utf8");
    expect(text).toContain(veniceReference().source);
    expect(text).toContain(`info.version "${veniceReference().doc.info.version}"`);
  });

  test("reads the documented fields (spot checks against the reference's text)", () => {
    expect(VENICE_REQUEST_FIELDS["/chat/completions"].fields).toContain("fallbacks");
    expect(VENICE_REQUEST_FIELDS["/chat/completions"].objects.venice_parameters).toContain(
      "include_venice_system_prompt",
    );
    expect(VENICE_REQUEST_FIELDS["/responses"].fields).not.toContain("instructions");
    expect(VENICE_REQUEST_FIELDS["/video/quote"].fields).not.toContain("prompt");
    expect(VENICE_REQUEST_FIELDS["/video/quote"].fields).not.toContain("image_url");
  });
});

describe("documentedBody", () => {
  test("keeps the listed top-level fields and, in described objects, the listed keys", () => {
    const body = {
      model: "m",
      messages: [{ role: "user", content: "x", extra: 1 }],
      temperature: 1,
      logit_bias: { "1": 1 },
      venice_parameters: { include_venice_system_prompt: false, made_up: 1 },
      stream_options: { include_usage: true, other: 2 },
      metadata: { any_key: "kept: a map" },
      stop: null,
    };
    expect(documentedBody("/chat/completions", body)).toEqual({
      model: "m",
      // deeper values go as sent
      messages: [{ role: "user", content: "x", extra: 1 }],
      temperature: 1,
      venice_parameters: { include_venice_system_prompt: false },
      stream_options: { include_usage: true },
      metadata: { any_key: "kept: a map" },
      stop: null,
    });
    // the body itself is not changed
    expect(body.logit_bias).toEqual({ "1": 1 });
  });

  test("a described object sent as another type goes as sent (the upstream refuses it)", () => {
    expect(documentedBody("/chat/completions", { venice_parameters: null, reasoning: "high" })).toEqual({
      venice_parameters: null,
      reasoning: "high",
    });
  });

  test("video quote: the pricing inputs only", () => {
    expect(
      documentedBody("/video/quote", {
        model: "m",
        prompt: "p",
        negative_prompt: "n",
        duration: "5s",
        resolution: "720p",
        aspect_ratio: "16:9",
        audio: false,
        image_url: "https://x/y.png",
        reference_image_urls: ["https://x/z.png"],
      }),
    ).toEqual({ model: "m", duration: "5s", resolution: "720p", aspect_ratio: "16:9", audio: false });
  });
});
