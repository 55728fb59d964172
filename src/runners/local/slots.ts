/** At most `size` holders at once; the others wait in arrival order. */
export class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {}

  get inUse(): number {
    return this.used;
  }

  /** True when acquire() would not wait. */
  get free(): boolean {
    return this.used < this.size;
  }

  acquire(): Promise<void> {
    if (this.used < this.size) {
      this.used++;
      return Promise.resolve();
    }
    return new Promise((done) => this.waiting.push(done));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next !== undefined) next();
    else this.used--;
  }
}
