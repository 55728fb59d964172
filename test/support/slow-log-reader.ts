import { LogStreamClient } from './log-stream-client.js';

/**
 * A log stream subscriber on a slow link: once open, it stops reading its socket for `pausedMs`,
 * reads for `readingMs`, and so on, so kiln's send buffer for it keeps filling up.
 */
export class SlowLogReader {
  readonly client: LogStreamClient;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    url: string,
    headers: Record<string, string>,
    private readonly pausedMs = 2000,
    private readonly readingMs = 20,
  ) {
    this.client = new LogStreamClient(url, { headers });
  }

  async start(): Promise<void> {
    await this.client.opened;
    this.pause();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.client.terminate();
  }

  private pause(): void {
    if (this.stopped) return;
    this.client.pauseReading();
    this.timer = setTimeout(() => this.read(), this.pausedMs);
  }

  private read(): void {
    if (this.stopped) return;
    this.client.resumeReading();
    this.timer = setTimeout(() => this.pause(), this.readingMs);
  }
}
