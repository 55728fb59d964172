import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../src/common/logger.js';

/** A real pino logger whose JSON lines are kept in memory, so tests can read what kiln logged. */
export class LogCapture {
  readonly lines: Array<Record<string, unknown>> = [];
  readonly raw: string[] = [];
  readonly logger: Logger;

  constructor(level: 'trace' | 'debug' | 'info' | 'warn' = 'debug') {
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        for (const line of chunk.toString('utf8').split('\n')) {
          if (line === '') continue;
          this.raw.push(line);
          this.lines.push(JSON.parse(line) as Record<string, unknown>);
        }
        done();
      },
    });
    this.logger = createLogger(level, sink);
  }

  find(predicate: (line: Record<string, unknown>) => boolean): Record<string, unknown> | undefined {
    return this.lines.find(predicate);
  }
}
