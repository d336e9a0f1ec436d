import { builder } from "../builder.js";

builder.queryType({
  description: "Accounts, keys, offers, ledger and market data. Same services as the REST API.",
});
builder.mutationType({ description: "Writes go through the same domain services as the REST API." });
builder.subscriptionType({
  description: "Real-time events over SSE (`/graphql` with Accept: text/event-stream), fanned out through Redis.",
});

builder.queryField("apiVersion", (t) =>
  t.string({ description: 'Version of the API (SPEC "Versioning").', resolve: () => "1.0.0" }),
);
