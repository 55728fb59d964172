/**
 * Runs pieces of work one at a time within this process: a piece starts once the one before it
 * has settled. The background loops (the log purge, retention) use it so that a pass asked for by
 * hand never overlaps the scheduled one, and shutdown waits for the piece in flight.
 */
export class OneAtATime {
  private running: Promise<unknown> | undefined;

  async run<T>(work: () => Promise<T>): Promise<T> {
    while (this.running !== undefined) await this.running.catch(() => undefined);
    const running = work();
    this.running = running;
    try {
      return await running;
    } finally {
      if (this.running === running) this.running = undefined;
    }
  }

  /** Settles once the piece running now (if any) has; its failure is reported by its caller. */
  async settled(): Promise<void> {
    await this.running?.catch(() => undefined);
  }
}
