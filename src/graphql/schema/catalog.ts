// GraphQL types, queries, mutations and subscriptions of issue 5 (catalog).
import "../builder.js";
