import { graphql } from "../../lib/tada.js";

export const ApiKeyRowFragment = graphql(`
  fragment ApiKeyRow on ApiKey {
    id
    name
    keyPrefix
    source
    createdAt
    lastUsedAt
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

export const RevokeApiKeyMutation = graphql(`
  mutation RevokeApiKey($input: RevokeApiKeyInput!) {
    revokeApiKey(input: $input) {
      id
      status
    }
  }
`);
