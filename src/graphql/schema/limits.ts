// The bounds a client must respect, read from the one place the server defines each (public).
import { MAX_IMAGE_VARIANTS } from "../../contract/inference.js";
import { MAX_CEILING_CENTS, MAX_OFFER_PRICE_CENTS, MIN_CEILING_CENTS, MIN_OFFER_PRICE_CENTS } from "../../lib/money.js";
import { builder } from "../builder.js";

interface Limits {
  ceilingCentsMin: number;
  ceilingCentsMax: number;
  offerPriceCentsMin: number;
  offerPriceCentsMax: number;
  imageVariantsMax: number;
}

const LIMITS: Limits = {
  ceilingCentsMin: MIN_CEILING_CENTS,
  ceilingCentsMax: MAX_CEILING_CENTS,
  offerPriceCentsMin: MIN_OFFER_PRICE_CENTS,
  offerPriceCentsMax: MAX_OFFER_PRICE_CENTS,
  imageVariantsMax: MAX_IMAGE_VARIANTS,
};

const LimitsRef = builder.objectRef<Limits>("Limits").implement({
  description: 'SPEC "Limits": the bounds the service enforces, so a client need not hard-code them.',
  fields: (t) => ({
    ceilingCentsMin: t.exposeInt("ceilingCentsMin", { description: "A buyer's lowest ceiling, cents per $1 of face." }),
    ceilingCentsMax: t.exposeInt("ceilingCentsMax", {
      description: "A buyer's highest ceiling, cents per $1 of face.",
    }),
    offerPriceCentsMin: t.exposeInt("offerPriceCentsMin", { description: "An offer's lowest price, cents per $1." }),
    offerPriceCentsMax: t.exposeInt("offerPriceCentsMax", { description: "An offer's highest price, cents per $1." }),
    imageVariantsMax: t.exposeInt("imageVariantsMax", {
      description: "The most images one generation asks for (`variants`/`n`, from 1).",
    }),
  }),
});

builder.queryField("limits", (t) =>
  t.field({
    type: LimitsRef,
    description: "Public: the price and request bounds the service enforces.",
    resolve: () => LIMITS,
  }),
);
