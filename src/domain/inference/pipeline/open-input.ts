import type { MaxPrice } from "../../../contract/request-controls.js";
import type {
  BurnPricer,
  InferenceSession,
  KeyRules,
  Modality,
  RequestPayment,
  RoutableModel,
  RouteKind,
} from "./session.js";

/** What a modality opens a request with. */
export type OpenInput = {
  accountId: string;
  apiKeyId: string;
  /** the transport's request id (see `Caller.requestId`); a fresh uuid when absent */
  requestId?: string;
  route: RouteKind;
  /** the modality the route serves (a model of another modality is refused) */
  modality: Modality;
  /** the model as the buyer sent it (bare or `svc/`) */
  model: string;
  /**
   * the catalog row of `model`, when the modality already resolved it for this route (`pipeline.model`:
   * live, of its modality) to check the request against it: admission does not resolve it again
   */
  resolvedModel?: RoutableModel;
  stream: boolean;
  /** the calling key's rules (models, ceiling, budget); absent: none */
  key?: KeyRules;
  /** the request's own ceiling (`svc.maxPriceCentsPerDollar`): it only lowers the effective one */
  maxPriceCents?: number;
  /** the request's `provider.max_price`, mapped for the resolved model to a ceiling that only lowers the effective one */
  maxPrice?: MaxPrice | null;
  /**
   * paid per request: the authorization funds it, planned at PAY_PER_REQUEST_CEILING_CENTS
   * (the request's own ceilings lower it) against its maximum; no buyer slice, no balance
   */
  payment?: RequestPayment;
} & (
  | {
      /** the modality's price rules for this request, given the resolved model */
      price: (model: RoutableModel) => BurnPricer;
    }
  | {
      /**
       * price rules that must be asked of the upstream (a video job's quote, on a borrowed key):
       * asked once the request is open — its gate slots taken, its support reference made — so
       * that a refusal (503 `pool_empty`, `key_wait_timeout`, …) ends the request, recorded under
       * that reference like any other refusal (SPEC "Errors" rule 2)
       */
      askPrice: (session: InferenceSession) => Promise<BurnPricer>;
    }
);
