import { z } from "./common.js";
import { type FundingKind, fundedResponse, fundingBody, signupBody, signupResponse } from "./funding.js";

/** x402 discovery (issue 29, docs/decisions.md "x402 discovery"): what indexes and agents read. */

/** A paid funding route: its path, the JSON body it takes and its 200 body (those /openapi.json documents). */
export interface FundingRoute {
  path: string;
  body: z.ZodTypeAny;
  ok: z.ZodTypeAny;
}

/** The three paid routes, all `POST` with a JSON body. */
export const FUNDING_ROUTES: Readonly<Record<FundingKind, FundingRoute>> = {
  signup: { path: "/v1/x402/signup", body: signupBody, ok: signupResponse },
  top_up: { path: "/v1/x402/top-up", body: fundingBody, ok: fundedResponse },
  refill: { path: "/v1/x402/refill", body: fundingBody, ok: fundedResponse },
};

/**
 * `GET /.well-known/x402`: the origin's paid resources, in the shape x402scan reads (its "fan-out"
 * document: `version` 1, `resources` as `"METHOD <url>"` strings, `instructions` for an agent). No
 * ratified standard exists; this is kept that small.
 */
export const x402DiscoveryDocument = z
  .object({
    version: z.literal(1),
    resources: z.array(z.string()).openapi({
      description: "The paid routes as `POST <absolute url>`: signup, top-up, refill.",
      example: ["POST https://svc.example/v1/x402/signup"],
    }),
    instructions: z.string().openapi({ description: "For an agent: how to fund once, then use the API." }),
  })
  .openapi("X402Discovery");
export type X402DiscoveryDocument = z.infer<typeof x402DiscoveryDocument>;
