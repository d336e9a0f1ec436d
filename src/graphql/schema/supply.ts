// GraphQL types, queries, mutations and subscriptions of issue 5 (supply).
import "../builder.js";
