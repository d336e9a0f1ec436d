import type { Prisma } from "../../generated/prisma/client.js";
import { postJournal } from "./ledger.js";

/**
 * The cash side of a pay-per-request charge (docs/decisions.md "Pay per request"). The
 * charge itself is its clear, whose buyer line is on the payer's `payment_receivable` (−C): what the
 * authorization owes. One of these journals takes the receivable back to zero, once (unique
 * idempotency keys, and the payment's status moves in the same transaction):
 *
 * - `request_payment:<id>`: C moved on chain — external −C, payment_receivable +C;
 * - `payment_loss:<id>`: C can never move (the settle was refused after the answer was delivered, or
 *   the authorization expired unused) — platform_loss −C, payment_receivable +C. The supplier keeps
 *   its share and the fee stays booked: the platform bears the loss, explicitly.
 */
type Tx = Prisma.TransactionClient;

export async function bookRequestPayment(
  tx: Tx,
  input: { paymentId: string; accountId: string; amountMicroUsdc: bigint },
): Promise<void> {
  if (input.amountMicroUsdc <= 0n) return;
  await postJournal(tx, {
    kind: "request_payment",
    idempotencyKey: `request_payment:${input.paymentId}`,
    requestPaymentId: input.paymentId,
    postings: [
      { book: "external", accountId: null, kind: "request_payment", amountMicroUsdc: -input.amountMicroUsdc },
      {
        book: "payment_receivable",
        accountId: input.accountId,
        kind: "request_payment",
        amountMicroUsdc: input.amountMicroUsdc,
      },
    ],
  });
}

export async function bookPaymentLoss(
  tx: Tx,
  input: { paymentId: string; accountId: string; amountMicroUsdc: bigint },
): Promise<void> {
  if (input.amountMicroUsdc <= 0n) return;
  await postJournal(tx, {
    kind: "payment_loss",
    idempotencyKey: `payment_loss:${input.paymentId}`,
    requestPaymentId: input.paymentId,
    postings: [
      { book: "platform_loss", accountId: null, kind: "payment_loss", amountMicroUsdc: -input.amountMicroUsdc },
      {
        book: "payment_receivable",
        accountId: input.accountId,
        kind: "payment_loss",
        amountMicroUsdc: input.amountMicroUsdc,
      },
    ],
  });
}
