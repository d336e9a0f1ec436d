import { randomUUID } from "node:crypto";
import type { EscrowUsageBoard } from "../../../adapters/redis/escrow-usage.js";
import { logger } from "../../../lib/logger.js";
import { idleOf } from "../../accounts/balances.js";
import type { EscrowStore } from "../settlement/stores.js";
import type { HolderLease } from "./holder-lease.js";

/** How long a reader waits for the other holders' answers (one that has not answered counts its slice as held). */
export const USAGE_WAIT_MS = 250;
/** How often the reader looks at the answers meanwhile. */
const USAGE_POLL_MS = 2;

/**
 * What requests in flight use of a buyer's escrow slices, per holder (docs/decisions.md "what is
 * held, what is available, with escrow slices lingering"). Postgres knows what each process holds (`buyer_escrows`) but not how much of it its
 * requests in flight use: a slice admits in memory and may linger idle. Each process knows that of
 * its own slice (`Slice.used`), so a reader counts its own at once and asks the other holders of the
 * buyer's slices (`routingChanged` `escrow_usage`; they answer on an `EscrowUsageBoard`). Nothing is
 * written on a request's path: the cost is the reader's, and only when another process holds a slice.
 */
export class EscrowUsage {
  constructor(
    private readonly escrow: EscrowStore,
    private readonly lease: HolderLease,
    private readonly board: EscrowUsageBoard | undefined,
    /** publishes the question to every router process */
    private readonly ask: (accountId: string, query: string) => void,
  ) {}

  /** Another process asks: this process answers for its live holder (0 when it holds no slice of the buyer). */
  answer(accountId: string, query: string): void {
    const holder = this.lease.peek();
    if (!holder || !this.board) return;
    const used = holder.buyers.get(accountId)?.used ?? 0n;
    this.board.answer(query, holder.id, used).catch((e) => logger.warn({ err: e }, "escrow usage not answered"));
  }

  /**
   * What requests in flight use of each of `holders`' slices of the buyer's balance. This process's
   * own holder is answered from memory; the others are asked and waited for up to USAGE_WAIT_MS. A
   * holder that did not answer (a process that died or stalled, a lost message) is absent.
   */
  async inUse(accountId: string, holders: readonly string[]): Promise<Map<string, bigint>> {
    const out = new Map<string, bigint>();
    const own = this.lease.peek();
    if (own && holders.includes(own.id)) out.set(own.id, own.buyers.get(accountId)?.used ?? 0n);
    const others = holders.filter((h) => h !== own?.id);
    if (others.length === 0 || !this.board) return out;
    const query = randomUUID();
    this.ask(accountId, query);
    const deadline = performance.now() + USAGE_WAIT_MS;
    try {
      for (;;) {
        await new Promise((res) => setTimeout(res, USAGE_POLL_MS));
        const answers = await this.board.read(query);
        if (others.every((h) => answers.has(h)) || performance.now() >= deadline) {
          for (const h of others) {
            const used = answers.get(h);
            if (used !== undefined) out.set(h, used);
          }
          return out;
        }
      }
    } catch (e) {
      logger.warn({ err: e }, "escrow usage not read; other holders' slices count as held");
      return out;
    } finally {
      this.board.drop(query).catch(() => undefined);
    }
  }

  /**
   * What the other holders' slices of the buyer's balance hold that no request in flight there uses
   * (what escrow pressure would bring back). A holder that does not answer counts as using all of it.
   */
  async idleElsewhere(accountId: string): Promise<bigint> {
    const own = this.lease.peek()?.id ?? null;
    const slices = await this.escrow.buyerSlices(accountId, own);
    if (slices.length === 0) return 0n;
    const inUse = await this.inUse(
      accountId,
      slices.map((s) => s.holder),
    );
    return idleOf(slices, inUse);
  }
}
