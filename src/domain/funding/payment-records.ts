import type { Hex } from "viem";
import type { ChainGateway } from "../../adapters/chain/usdc-gateway.js";
import type { Db } from "../../adapters/db.js";
import type { Config } from "../../config.js";
import type { FundingBody } from "../../contract/funding.js";
import { Prisma } from "../../generated/prisma/client.js";
import { DomainError } from "../../lib/errors.js";
import type { FundingRequest } from "./funding-request.js";
import { type DecodedPayment, recordedTypedData, signedByPayerKey } from "./x402.js";

/**
 * The payments table as funding uses it (docs/decisions.md "Payments"): one row per authorization, unique by
 * (payer, nonce) as EIP-3009 defines nonces; the write-ahead claim; and the check that a replayed
 * payment is the recorded authorization signed by its payer before anything is answered from it.
 */

export type PaymentRow = Prisma.PaymentGetPayload<{ include: { account: true } }>;

export class PaymentRecords {
  constructor(private readonly deps: { db: Db; config: Config; chain: Pick<ChainGateway, "verifyTypedData"> }) {}

  /** The payment of one authorization: EIP-3009 nonces are the authorizer's, so (payer, nonce). */
  find(payer: string, nonce: string): Promise<PaymentRow | null> {
    return this.deps.db.payment.findUnique({
      where: { payerAddress_authorizationNonce: { payerAddress: payer, authorizationNonce: nonce } },
      include: { account: true },
    });
  }

  /**
   * Is the presented payment the recorded authorization (payer, payTo, value, validAfter,
   * validBefore, nonce, all equal) signed by its payer? An EOA's signature is recovered here; any
   * other is asked of the chain (a contract wallet, ERC-1271/6492). A chain that cannot answer is
   * 503: the payment may be genuine.
   * @throws service_unavailable (503) when a contract wallet's signature cannot be checked now
   */
  async isRecordedAuthorization(d: DecodedPayment, p: PaymentRow): Promise<boolean> {
    const { usdcName, usdcVersion, id: chainId } = this.deps.config.chain;
    const typed = recordedTypedData(d, p, { name: usdcName, version: usdcVersion, chainId });
    if (!typed) return false;
    if (await signedByPayerKey(d, typed)) return true;
    const checked = await this.deps.chain.verifyTypedData({
      address: typed.message.from,
      signature: d.evm.signature as Hex,
      typedData: typed,
    });
    if (!checked.ok) {
      throw new DomainError("service_unavailable", "The payment's signature cannot be checked right now; retry.", {
        retryAfterSeconds: 5,
      });
    }
    return checked.value;
  }

  async claimIntent(
    req: FundingRequest,
    d: DecodedPayment,
    body: FundingBody,
  ): Promise<{ claimed: true; paymentId: string } | { claimed: false }> {
    const data = {
      kind: req.kind,
      status: "settling" as const,
      accountId: req.caller?.accountId ?? null,
      payerAddress: d.payer,
      payToAddress: d.payTo,
      assetAddress: this.deps.config.chain.usdcAddress.toLowerCase(),
      amountMicroUsdc: d.valueMicroUsdc,
      authorizationNonce: d.nonce,
      validAfter: d.validAfter,
      validBefore: d.validBefore,
      requestMeta:
        req.kind === "signup"
          ? { keyName: body.keyName, maxPriceCentsPerDollar: body.maxPriceCentsPerDollar }
          : Prisma.JsonNull,
    };
    try {
      const p = await this.deps.db.payment.create({ data });
      return { claimed: true, paymentId: p.id };
    } catch (e) {
      if (!(e instanceof Prisma.PrismaClientKnownRequestError && e.code === "P2002")) throw e;
    }
    // a failed earlier attempt may be retried with the same authorization
    const retried = await this.deps.db.payment.updateMany({
      where: { payerAddress: d.payer, authorizationNonce: d.nonce, status: "failed" },
      data: { ...data, failureReason: null },
    });
    if (retried.count === 1) {
      const p = await this.deps.db.payment.findUniqueOrThrow({
        where: { payerAddress_authorizationNonce: { payerAddress: d.payer, authorizationNonce: d.nonce } },
      });
      return { claimed: true, paymentId: p.id };
    }
    return { claimed: false };
  }
}
