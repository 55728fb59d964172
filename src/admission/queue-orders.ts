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
 * The order of the whole queue, computed once per generation in this process and shared by every
 * request that asks where a waiting build stands (docs/adr/0042-admission-in-postgres.md). The
 * generation says when it changed; an order older than `maxAgeMs` is read again in the
 * background, while it still answers: the generation is not transactional (a change whose
 * transaction was still open when an order was read can carry the order's generation), so age
 * bounds how long such an order is believed.
 */
export class QueueOrders {
  private current: OrderEntry | undefined;
  private reading: Promise<OrderEntry> | undefined;

  constructor(
    private readonly read: () => Promise<QueueOrder>,
    private readonly maxAgeMs: number,
    private readonly onError: (error: unknown) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** An order of the queue at `generation` (or read after it). */
  async at(generation: string): Promise<OrderEntry> {
    const current = this.current;
    if (current?.order.generation === generation) {
      if (this.now() - current.atMs > this.maxAgeMs && this.reading === undefined) {
        this.readAgain().catch(this.onError);
      }
      return current;
    }
    if (this.reading !== undefined) {
      const entry = await this.reading;
      if (BigInt(entry.order.generation) >= BigInt(generation)) return entry;
    }
    return this.readAgain();
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
