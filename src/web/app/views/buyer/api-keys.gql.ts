import { graphql } from "../../lib/tada.js";

/** A key's row: who made it, its policy and what it spent this period (re-read on `balanceChanged`). */
export const ApiKeyRowFragment = graphql(`
  fragment ApiKeyRow on ApiKey {
    id
    name
    keyPrefix
    source
    createdAt
    lastUsedAt
    limitUsdc
    limitReset
    maxPriceCentsPerDollar
    models
    expiresAt
    scopes
    parentId
    spentUsdc
    remainingUsdc
    resetsAt
  }
`);

/** A key's own ceiling has the account ceiling's bounds, as the server enforces them. */
export const ApiKeyLimitsFragment = graphql(`
  fragment ApiKeyLimits on Limits {
    ceilingCentsMin
    ceilingCentsMax
  }
`);

export const CreateApiKeyMutation = graphql(
  `
  mutation CreateApiKey($input: CreateApiKeyInput!) {
    createApiKey(input: $input) {
      apiKey
      key {
        ...ApiKeyRow
      }
    }
  }
`,
  [ApiKeyRowFragment],
);

/** Only the fields sent change; null removes a setting. The answer rewrites the key's cached row. */
export const UpdateApiKeyMutation = graphql(
  `
  mutation UpdateApiKey($input: UpdateApiKeyInput!) {
    updateApiKey(input: $input) {
      key {
        ...ApiKeyRow
      }
    }
  }
`,
  [ApiKeyRowFragment],
);

export const RevokeApiKeyMutation = graphql(`
  mutation RevokeApiKey($input: RevokeApiKeyInput!) {
    revokeApiKey(input: $input) {
      id
      status
    }
  }
`);
