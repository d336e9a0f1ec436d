import { graphql } from "../../lib/tada.js";

/** An endpoint as its table row shows it (never its secret); the endpoint mutations answer with it. */
export const WebhookRowFragment = graphql(`
  fragment WebhookRow on Webhook {
    id
    url
    description
    events
    balanceLowThresholdUsdc
    status
    disabledReason
    disabledAt
    consecutiveFailures
    createdAt
  }
`);

/** One row of an endpoint's delivery log. */
export const WebhookDeliveryRowFragment = graphql(`
  fragment WebhookDeliveryRow on WebhookDelivery {
    id
    webhookId
    type
    status
    attempts
    lastStatusCode
    lastError
    lastAttemptAt
    nextAttemptAt
    deliveredAt
    createdAt
  }
`);

/** The account's endpoints (at most 10; re-read on `webhookUpdated`, throttled). */
export const WebhooksQuery = graphql(
  `
  query Webhooks {
    myWebhooks {
      ...WebhookRow
    }
  }
`,
  [WebhookRowFragment],
);

/** The latest `limit` deliveries of one endpoint, newest first (re-read on `webhookUpdated`). */
export const WebhookDeliveriesQuery = graphql(
  `
  query WebhookDeliveries($webhookId: ID!, $limit: Int!) {
    myWebhookDeliveries(webhookId: $webhookId, limit: $limit) {
      nodes {
        ...WebhookDeliveryRow
      }
      nextCursor
    }
  }
`,
  [WebhookDeliveryRowFragment],
);

/** The answer carries the signing secret: shown once, never stored by the page. */
export const CreateWebhookMutation = graphql(
  `
  mutation CreateWebhook($input: CreateWebhookInput!) {
    createWebhook(input: $input) {
      secret
      webhook {
        ...WebhookRow
      }
    }
  }
`,
  [WebhookRowFragment],
);

export const RotateWebhookSecretMutation = graphql(
  `
  mutation RotateWebhookSecret($input: WebhookIdInput!) {
    rotateWebhookSecret(input: $input) {
      secret
      webhook {
        ...WebhookRow
      }
    }
  }
`,
  [WebhookRowFragment],
);

export const DeleteWebhookMutation = graphql(`
  mutation DeleteWebhook($input: WebhookIdInput!) {
    deleteWebhook(input: $input) {
      id
    }
  }
`);

/** The answer rewrites the endpoint's cached row (status, reason). */
export const EnableWebhookMutation = graphql(
  `
  mutation EnableWebhook($input: WebhookIdInput!) {
    enableWebhook(input: $input) {
      ...WebhookRow
    }
  }
`,
  [WebhookRowFragment],
);

export const SendTestWebhookMutation = graphql(
  `
  mutation SendTestWebhook($input: WebhookIdInput!) {
    sendTestWebhook(input: $input) {
      ...WebhookDeliveryRow
    }
  }
`,
  [WebhookDeliveryRowFragment],
);

/** A signal only (`delivery:<id>:<status>`, `webhook:<id>:disabled`): the list and the open log are re-read. */
export const WebhookUpdatedSubscription = graphql(`
  subscription WebhookUpdated {
    webhookUpdated {
      at
      kind
    }
  }
`);
