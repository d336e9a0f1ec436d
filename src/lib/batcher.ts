/**
 * Natural batching (group commit). Work submitted while a batch is running waits and leaves with
 * the next batch, so a lone request never waits (a batch of one goes out at once) and, under load,
 * one round trip and one commit carry many requests. Used by the router for holds and settlements:
 * their hot rows (the buyer's account, the cheapest offer) are then locked once per batch rather
 * than once per request.
 *
 * A batch that fails as a whole is retried one item at a time, so every item gets its own answer
 * (one bad item never fails the others). `runBatch` must therefore be all-or-nothing (one
 * transaction), and must return exactly one result per item, in order.
 */
export interface BatcherOptions {
  /** most items per batch */
  maxBatch: number;
  /** batches running at once */
  maxInFlight: number;
}

interface Pending<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

export class Batcher<I, O> {
  private queue: Pending<I, O>[] = [];
  private inFlight = 0;
  private scheduled = false;
  /** batches run so far and items they carried (observability, tests) */
  readonly stats = { batches: 0, items: 0, fallbacks: 0, largest: 0 };

  constructor(
    private readonly runBatch: (items: I[]) => Promise<O[]>,
    private readonly runOne: (item: I) => Promise<O>,
    private readonly opts: BatcherOptions = { maxBatch: 64, maxInFlight: 1 },
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Everything submitted in this tick leaves together: flush on the microtask queue. */
  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.opts.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.inFlight < this.opts.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.opts.maxBatch);
      this.inFlight++;
      void this.execute(batch).finally(() => {
        this.inFlight--;
        this.schedule();
      });
    }
  }

  private async execute(batch: Pending<I, O>[]): Promise<void> {
    this.stats.batches++;
    this.stats.items += batch.length;
    if (batch.length > this.stats.largest) this.stats.largest = batch.length;
    if (batch.length === 1) {
      await this.one(batch[0] as Pending<I, O>);
      return;
    }
    let out: O[];
    try {
      out = await this.runBatch(batch.map((p) => p.item));
      if (out.length !== batch.length) throw new Error(`batch returned ${out.length} results for ${batch.length}`);
    } catch {
      // the batch rolled back as a whole: give every item its own chance and its own answer
      this.stats.fallbacks++;
      await Promise.all(batch.map((p) => this.one(p)));
      return;
    }
    for (const [i, p] of batch.entries()) p.resolve(out[i] as O);
  }

  private async one(p: Pending<I, O>): Promise<void> {
    try {
      p.resolve(await this.runOne(p.item));
    } catch (e) {
      p.reject(e);
    }
  }
}
