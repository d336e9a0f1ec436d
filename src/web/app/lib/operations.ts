import { gql } from "@urql/core";

/**
 * Every operation the app sends, with the shape of its answer. Micro-unit amounts are integer
 * strings (MicroUsdc, MicroDiem scalars).
 */

// ─────────────────────────────── market (public) ───────────────────────────────

export interface PriceLevel {
  priceCentsPerDollar: number;
  routableDiem: string;
  usdcToBuyAll: string;
}

export interface MarketData {
  market: {
    generatedAt: string;
    cheapestPostedCents: number | null;
    routableDiem: string;
    usdcToBuyAll: string;
    prices: PriceLevel[];
  };
}

export const MARKET = gql`
  query Market {
    market {
      generatedAt
      cheapestPostedCents
      routableDiem
      usdcToBuyAll
      prices {
        priceCentsPerDollar
        routableDiem
        usdcToBuyAll
      }
    }
  }
`;

export interface ModalityDay {
  modality: string;
  clears: number;
  burn: string;
  gross: string;
}

export interface MarketStatsData {
  marketStats: {
    generatedAt: string;
    clears: number;
    faceValue: string;
    paid: string;
    saved: string;
    paidOfFaceBps: number | null;
    todayClears: number;
    todayBurn: string;
    todayGross: string;
    todayAverageClearingPriceCents: number | null;
    todayByModality: ModalityDay[];
  };
}

export const MARKET_STATS = gql`
  query MarketStats {
    marketStats {
      generatedAt
      clears
      faceValue
      paid
      saved
      paidOfFaceBps
      todayClears
      todayBurn
      todayGross
      todayAverageClearingPriceCents
      todayByModality {
        modality
        clears
        burn
        gross
      }
    }
  }
`;

export interface ModelUsage {
  id: string;
  modality: string;
  rank: number;
  usageShare: number;
}

export interface ModelStatsData {
  modelStats: { generatedAt: string; window: string; hasSufficientVolume: boolean; models: ModelUsage[] };
}

export const MODEL_STATS = gql`
  query ModelStats($window: String!) {
    modelStats(window: $window) {
      generatedAt
      window
      hasSufficientVolume
      models {
        id
        modality
        rank
        usageShare
      }
    }
  }
`;

export interface Clear {
  at: string;
  model: string;
  modality: string;
  priceCentsPerDollar: number;
  burnDiem: string;
  grossUsdc: string;
}

export interface RecentClearsData {
  recentClears: Clear[];
}

export const RECENT_CLEARS = gql`
  query RecentClears($limit: Int!) {
    recentClears(limit: $limit) {
      at
      model
      modality
      priceCentsPerDollar
      burnDiem
      grossUsdc
    }
  }
`;

export const CLEARS_SUBSCRIPTION = gql`
  subscription Clears {
    clears {
      at
      model
      modality
      priceCentsPerDollar
      burnDiem
      grossUsdc
    }
  }
`;

export const CAPACITY_CHANGED = gql`
  subscription CapacityChanged {
    capacityChanged {
      generatedAt
      cheapestPostedCents
      routableDiem
      reason
    }
  }
`;

// ─────────────────────────────── viewer ───────────────────────────────

export interface ViewerIdentity {
  accountId: string;
  walletAddress: string;
  /** a session always has one (null only for an API-key caller that never signed in) */
  authProvider: "IDP" | "SIWE" | null;
}

export interface ViewerIdentityData {
  viewer: ViewerIdentity | null;
}

export const VIEWER_IDENTITY = gql`
  query ViewerIdentity {
    viewer {
      accountId
      walletAddress
      authProvider
    }
  }
`;

// ─────────────────────────────── buyer ───────────────────────────────

export interface ApiKey {
  id: string;
  name: string;
  keyPrefix: string;
  source: string;
  createdAt: string;
  lastUsedAt: string | null;
}

export interface Payment {
  id: string;
  kind: string;
  status: string;
  amount: string;
  transaction: string | null;
  confirmations: number;
  confirmationsRequired: number;
  createdAt: string;
  confirmedAt: string | null;
}

export interface BuyerAccount {
  accountId: string;
  walletAddress: string;
  maxPriceCentsPerDollar: number;
  confirmedUsdc: string;
  pendingUsdc: string;
  reservedUsdc: string;
  availableUsdc: string;
  hasEverFunded: boolean;
  firstFundedAt: string | null;
  apiKeys: ApiKey[];
  payments: { edges: { node: Payment }[] };
}

export interface BuyerData {
  viewer: BuyerAccount | null;
  mySavings: {
    clears: number;
    faceValue: string;
    paid: string;
    atCeiling: string;
    savedVsFace: string;
    savedVsCeiling: string;
  };
}

export const BUYER = gql`
  query Buyer {
    viewer {
      accountId
      walletAddress
      maxPriceCentsPerDollar
      confirmedUsdc
      pendingUsdc
      reservedUsdc
      availableUsdc
      hasEverFunded
      firstFundedAt
      apiKeys {
        id
        name
        keyPrefix
        source
        createdAt
        lastUsedAt
      }
      payments(first: 10) {
        edges {
          node {
            id
            kind
            status
            amount
            transaction
            confirmations
            confirmationsRequired
            createdAt
            confirmedAt
          }
        }
      }
    }
    mySavings {
      clears
      faceValue
      paid
      atCeiling
      savedVsFace
      savedVsCeiling
    }
  }
`;

export interface InferenceRequest {
  requestId: string;
  supportReference: string;
  route: string;
  modality: string;
  model: string;
  stream: boolean;
  status: string;
  errorCode: string | null;
  maxPriceCents: number;
  clearingPriceCents: number | null;
  burn: string | null;
  cost: string | null;
  attempts: number;
  startedAt: string;
  completedAt: string | null;
}

const INFERENCE_REQUEST_FIELDS = `
  requestId
  supportReference
  route
  modality
  model
  stream
  status
  errorCode
  maxPriceCents
  clearingPriceCents
  burn
  cost
  attempts
  startedAt
  completedAt
`;

export interface HistoryData {
  myInferenceHistory: { items: InferenceRequest[]; nextCursor: string | null };
}

export const HISTORY = gql`
  query History($limit: Int!, $cursor: String) {
    myInferenceHistory(limit: $limit, cursor: $cursor) {
      items { ${INFERENCE_REQUEST_FIELDS} }
      nextCursor
    }
  }
`;

export interface RequestDetailData {
  myInferenceRequest: InferenceRequest;
}

export const REQUEST_DETAIL = gql`
  query RequestDetail($supportReference: String!) {
    myInferenceRequest(supportReference: $supportReference) { ${INFERENCE_REQUEST_FIELDS} }
  }
`;

export interface VideoJob {
  queueId: string;
  model: string;
  status: string;
  chargeUsdc: string;
  clearingPriceCents: number | null;
  quoteDiem: string;
  createdAt: string;
  deliveredAt: string | null;
  refundedAt: string | null;
  failureReason: string | null;
  supportReference: string;
}

const VIDEO_JOB_FIELDS = `
  queueId
  model
  status
  chargeUsdc
  clearingPriceCents
  quoteDiem
  createdAt
  deliveredAt
  refundedAt
  failureReason
  supportReference
`;

export interface VideoJobsData {
  myVideoJobs: VideoJob[];
}

export const VIDEO_JOBS = gql`
  query VideoJobs {
    myVideoJobs(first: 20) { ${VIDEO_JOB_FIELDS} }
  }
`;

export const VIDEO_JOB_UPDATED = gql`
  subscription VideoJobUpdated {
    videoJobUpdated { ${VIDEO_JOB_FIELDS} }
  }
`;

export const BALANCE_CHANGED = gql`
  subscription BalanceChanged {
    balanceChanged {
      at
      kind
    }
  }
`;

export const PAYMENT_CONFIRMED = gql`
  subscription PaymentConfirmed {
    paymentConfirmed {
      at
      paymentId
    }
  }
`;

export const SET_MAX_PRICE = gql`
  mutation SetMaxPrice($input: SetMaxPriceInput!) {
    setMaxPrice(input: $input) {
      maxPriceCentsPerDollar
      walletAddress
    }
  }
`;

export interface CreateApiKeyData {
  createApiKey: { apiKey: string; key: ApiKey };
}

export const CREATE_API_KEY = gql`
  mutation CreateApiKey($input: CreateApiKeyInput!) {
    createApiKey(input: $input) {
      apiKey
      key {
        id
        name
        keyPrefix
        source
        createdAt
        lastUsedAt
      }
    }
  }
`;

export const REVOKE_API_KEY = gql`
  mutation RevokeApiKey($input: RevokeApiKeyInput!) {
    revokeApiKey(input: $input) {
      id
      status
    }
  }
`;

// ─────────────────────────────── supplier ───────────────────────────────

export interface Offer {
  id: string;
  priceCentsPerDollar: number;
  quantity: string;
  remaining: string;
  reserved: string;
  sold: string;
  status: string;
  keyStatus: string;
  upstreamKeyId: string;
  createdAt: string;
  expiresAt: string;
  endedAt: string | null;
}

const OFFER_FIELDS = `
  id
  priceCentsPerDollar
  quantity
  remaining
  reserved
  sold
  status
  keyStatus
  upstreamKeyId
  createdAt
  expiresAt
  endedAt
`;

export interface UpstreamKey {
  id: string;
  label: string;
  maskedKey: string;
  status: string;
  balance: string | null;
  lastBalanceAt: string | null;
  createdAt: string;
  revokedAt: string | null;
  liveOffer: { id: string } | null;
}

export interface SupplierLedgerLine {
  id: string;
  kind: string;
  amount: string;
  createdAt: string;
  transactionKind: string;
}

export interface SupplierPayout {
  id: string;
  period: string;
  amount: string;
  status: string;
  transaction: string | null;
  createdAt: string;
  confirmedAt: string | null;
}

export interface SupplierClear {
  clearId: string;
  createdAt: string;
  model: string;
  modality: string;
  priceCentsPerDollar: number;
  burn: string;
  gross: string;
  fee: string;
  earned: string;
  refundedAt: string | null;
}

export interface SupplierData {
  myUpstreamKeys: UpstreamKey[];
  myOffers: { edges: { node: Offer }[] };
  mySupplierLedger: {
    payable: string;
    paidOut: string;
    payoutPending: string;
    payoutMinimum: string;
    entries: SupplierLedgerLine[];
    recentPayouts: SupplierPayout[];
  };
  mySupplierInferenceHistory: { items: SupplierClear[] };
}

export const SUPPLIER = gql`
  query Supplier {
    myUpstreamKeys {
      id
      label
      maskedKey
      status
      balance
      lastBalanceAt
      createdAt
      revokedAt
      liveOffer {
        id
      }
    }
    myOffers(first: 50) {
      edges {
        node { ${OFFER_FIELDS} }
      }
    }
    mySupplierLedger(limit: 20) {
      payable
      paidOut
      payoutPending
      payoutMinimum
      entries {
        id
        kind
        amount
        createdAt
        transactionKind
      }
      recentPayouts {
        id
        period
        amount
        status
        transaction
        createdAt
        confirmedAt
      }
    }
    mySupplierInferenceHistory(limit: 20) {
      items {
        clearId
        createdAt
        model
        modality
        priceCentsPerDollar
        burn
        gross
        fee
        earned
        refundedAt
      }
    }
  }
`;

export const OFFER_UPDATED = gql`
  subscription OfferUpdated {
    offerUpdated {
      at
      id
      status
      subject
    }
  }
`;

export const EARNINGS_CHANGED = gql`
  subscription EarningsChanged {
    earningsChanged {
      at
      kind
    }
  }
`;

export const REGISTER_UPSTREAM_KEY = gql`
  mutation RegisterUpstreamKey($input: RegisterUpstreamKeyInput!) {
    registerUpstreamKey(input: $input) {
      upstreamKey {
        id
        label
        maskedKey
        status
      }
    }
  }
`;

export const REVOKE_UPSTREAM_KEY = gql`
  mutation RevokeUpstreamKey($input: RevokeUpstreamKeyInput!) {
    revokeUpstreamKey(input: $input) {
      cancelledOffers
      upstreamKey {
        id
        status
      }
    }
  }
`;

export const POST_OFFER = gql`
  mutation PostOffer($input: PostOfferInput!) {
    postOffer(input: $input) {
      offer { ${OFFER_FIELDS} }
    }
  }
`;

export const UPDATE_OFFER = gql`
  mutation UpdateOffer($input: UpdateOfferInput!) {
    updateOffer(input: $input) {
      offer { ${OFFER_FIELDS} }
    }
  }
`;

export const CANCEL_OFFER = gql`
  mutation CancelOffer($input: CancelOfferInput!) {
    cancelOffer(input: $input) {
      offer { ${OFFER_FIELDS} }
    }
  }
`;
