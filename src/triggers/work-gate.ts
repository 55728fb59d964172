/**
 * Runs work one at a time per key, and at most `width` keys at once: what a replica asks of the
 * database for triggers stays within a few pool connections, however many deliveries arrive at
 * once. Work waiting here holds no connection; it runs in the order it came per key.
 */
export class WorkGate {
  private readonly tails = new Map<string, Promise<unknown>>();
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly width: number) {}

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    const mine = before.catch(() => undefined).then(() => this.slot(work));
    const tail = mine.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return mine;
  }

  private async slot<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= this.width) await new Promise<void>((go) => this.waiting.push(go));
    else this.running++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next === undefined) this.running--;
      else next();
    }
  }
}
