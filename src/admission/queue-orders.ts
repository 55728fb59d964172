import type { QueueOrder } from './admission.repository.js';

/** What an estimate reads of the running builds and the latest runs, and when it was read. */
export interface Outlook {
  /** How long each running build had run (ms, longest first) at `atMs`. */
  readonly runningMs: readonly number[];
  readonly medianRunMs: number | undefined;
  readonly atMs: number;
}

/** One order of the queue, and the outlooks read while it held. */
export interface OrderEntry {
  readonly order: QueueOrder;
  readonly atMs: number;
  readonly outlooks: Map<string, Promise<Outlook>>;
}

/**
 * The order of the whole queue, read once per generation in this process and shared by every
 * request that asks where a waiting build stands (docs/adr/0042-admission-in-postgres.md).
 *
 * - The same generation: the order holds. Read more than `trustMs` ago, it is read again behind
 *   the answer: the generation is not transactional (a change whose transaction was still open
 *   when the order was read can carry the order's generation), so age bounds how long an order is
 *   believed.
 * - A newer generation: an order read within `staleMs` still answers (a place may lag the queue
 *   by that much, as a busy queue moves every moment and each move would otherwise hold every
 *   request for one read); one older than half of that is read again behind the answer, so a
 *   queue that moves many times a second is read at most about twice per `staleMs`. An order
 *   older than `staleMs` is read again first.
 */
export class QueueOrders {
  private current: OrderEntry | undefined;
  private reading: Promise<OrderEntry> | undefined;

  constructor(
    private readonly read: () => Promise<QueueOrder>,
    private readonly times: { readonly trustMs: number; readonly staleMs: number },
    private readonly onError: (error: unknown) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** An order of the queue at `generation`, or one read within `staleMs` of a generation before. */
  async at(generation: string): Promise<OrderEntry> {
    const current = this.current;
    if (current !== undefined) {
      const age = this.now() - current.atMs;
      const same = current.order.generation === generation;
      const { trustMs, staleMs } = this.times;
      if (same ? age > trustMs : age >= staleMs / 2 && age <= staleMs) this.readBehind();
      if (same || age <= staleMs) return current;
    }
    return this.fresh(generation);
  }

  /** An order read at `generation` or after it: the one under way if it is, else a new one. */
  async fresh(generation: string): Promise<OrderEntry> {
    const current = this.current;
    if (current !== undefined && BigInt(current.order.generation) >= BigInt(generation)) {
      return current;
    }
    if (this.reading !== undefined) {
      const entry = await this.reading;
      if (BigInt(entry.order.generation) >= BigInt(generation)) return entry;
    }
    return this.readAgain();
  }

  private readBehind(): void {
    if (this.reading === undefined) this.readAgain().catch(this.onError);
  }

  private readAgain(): Promise<OrderEntry> {
    if (this.reading !== undefined) return this.reading;
    const reading = (async () => {
      try {
        const order = await this.read();
        const entry: OrderEntry = { order, atMs: this.now(), outlooks: new Map() };
        const current = this.current;
        // Two reads racing: the later generation stays.
        if (current === undefined || BigInt(order.generation) >= BigInt(current.order.generation)) {
          this.current = entry;
        }
        return entry;
      } finally {
        this.reading = undefined;
      }
    })();
    this.reading = reading;
    return reading;
  }
}
