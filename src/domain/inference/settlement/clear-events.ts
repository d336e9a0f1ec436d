import type { ClearRecordedEvent, EventBus } from "../../../adapters/pubsub.js";

/**
 * Publishes a clear's events once the tick ends, so the clears one commit settled share them: the
 * public feed gets one message with all of them (`clearsRecorded`), and `balanceChanged` /
 * `earningsChanged`, which only say "read again", go once per account.
 */
export class ClearEvents {
  private clears: ClearRecordedEvent[] = [];
  private readonly accounts = new Map<
    string,
    { topic: "balanceChanged" | "earningsChanged"; accountId: string; at: Date }
  >();

  constructor(private readonly bus: EventBus) {}

  cleared(clear: ClearRecordedEvent, buyerId: string, supplierId: string, at: Date): void {
    if (this.clears.length === 0) queueMicrotask(() => this.flush());
    this.clears.push(clear);
    this.accounts.set(`balanceChanged:${buyerId}`, { topic: "balanceChanged", accountId: buyerId, at });
    this.accounts.set(`earningsChanged:${supplierId}`, { topic: "earningsChanged", accountId: supplierId, at });
  }

  private flush(): void {
    const clears = this.clears;
    const accounts = [...this.accounts.values()];
    this.clears = [];
    this.accounts.clear();
    this.bus.publish("clearsRecorded", clears);
    for (const e of accounts) {
      this.bus.publish(e.topic, e.accountId, { accountId: e.accountId, kind: "clear", at: e.at.toISOString() });
    }
  }
}
