import { unwrap } from './api/client.js';
import { createBuild } from './commands/build-options.js';
import { EXIT, ExitWith } from './exit-codes.js';
import { followLog } from './log-follower.js';
import { LogPrinter } from './log-printer.js';
import type { CreateBody } from './manifest.js';
import { ask, interactive } from './prompt.js';
import type { Session } from './session.js';

/** The exit code of `kiln build run` for the reason the log stream ended with. */
const EXIT_FOR: Record<string, number> = {
  success: EXIT.ok,
  failed: EXIT.buildFailed,
  cancelled: EXIT.buildCancelled,
  deleted: EXIT.buildCancelled,
};

/**
 * `kiln build run`: creates the build, starts it and follows its log until it ends, then exits
 * with its result (0 success, 1 failed, 2 cancelled). Ctrl-C on a terminal asks whether to cancel
 * the build (no: it keeps running, the CLI leaves with 130); without a terminal, SIGINT or SIGTERM
 * cancels it, as a stopped CI job should. A second signal leaves at once.
 */
export async function runBuild(
  session: Session,
  create: CreateBody,
  options: { timestamps: boolean },
): Promise<never> {
  const printer = new LogPrinter({ timestamps: options.timestamps, progress: true });
  const created = await createBuild(session, create);
  const label = `build #${created.build_number} (${created.id})`;
  const header = await session.tenantHeader();
  const params = { path: { id: created.id }, header };
  printer.say(`[kiln] created ${label}`);
  const started = await unwrap(session.client().POST('/api/v1/builds/{id}/start', { params }));
  printer.say(
    started.queue === undefined
      ? `[kiln] started ${label}`
      : `[kiln] started ${label}; waiting for a build slot: ${started.queue.message}`,
  );

  const interrupts = new Interrupts(printer, label, created.id, async () => {
    await unwrap(
      session.client().POST('/api/v1/builds/{id}/cancel', {
        params,
        body: { reason: 'cancelled from the kiln CLI' },
      }),
    );
  });
  let reason: string;
  try {
    reason = await followLog({
      url: session.url,
      token: session.token,
      tenantId: header['X-Tenant-ID'],
      buildId: created.id,
      from: 0,
      onLine: (line) => printer.line(line),
      onReconnect: (from) => printer.say(`[kiln] the log stream dropped; resuming at line ${from}`),
    });
  } finally {
    interrupts.remove();
    printer.done();
  }

  if (reason === 'deleted') {
    printer.say(`[kiln] ${label} was deleted before it ended`);
    throw new ExitWith(EXIT.buildCancelled);
  }
  const build = await unwrap(session.client().GET('/api/v1/builds/{id}', { params }));
  switch (build.status) {
    case 'success':
      printer.say(`[kiln] ${label} succeeded`);
      for (const image of build.images ?? []) printer.say(`[kiln] pushed ${image}`);
      break;
    case 'failed':
      printer.say(
        `[kiln] ${label} failed${build.failure_reason === null || build.failure_reason === undefined ? '' : ` (${build.failure_reason})`}: ${build.error_message ?? 'no message'}`,
      );
      break;
    case 'cancelled':
      printer.say(`[kiln] ${label} was cancelled`);
      break;
    case 'queued':
    case 'in_progress':
      printer.say(`[kiln] the log of ${label} ended with "${reason}" while it is ${build.status}`);
      break;
  }
  throw new ExitWith(EXIT_FOR[build.status] ?? EXIT_FOR[reason] ?? EXIT.software);
}

/** SIGINT and SIGTERM while a build runs: cancel it, or (on a terminal, if so answered) leave it. */
class Interrupts {
  private busy = false;
  private readonly handler = (signal: NodeJS.Signals) => void this.handle(signal);

  constructor(
    private readonly printer: LogPrinter,
    private readonly label: string,
    private readonly buildId: string,
    private readonly cancel: () => Promise<void>,
  ) {
    process.on('SIGINT', this.handler);
    process.on('SIGTERM', this.handler);
  }

  remove(): void {
    process.off('SIGINT', this.handler);
    process.off('SIGTERM', this.handler);
  }

  private async handle(signal: NodeJS.Signals): Promise<void> {
    if (this.busy) process.exit(EXIT.interrupted);
    this.busy = true;
    if (signal === 'SIGINT' && interactive()) {
      this.printer.hold();
      const answer = await ask(`\nCancel ${this.label}? [y/N] `);
      if (!/^y(es)?$/i.test(answer.trim())) {
        this.printer.done();
        process.stderr.write(
          `${this.label} keeps running; follow it with: kiln logs -f ${this.buildId}\n`,
        );
        process.exit(EXIT.interrupted);
      }
      this.printer.release();
    }
    this.printer.say(`[kiln] cancelling ${this.label}`);
    try {
      await this.cancel();
    } catch (error) {
      // Already ended, say: the log stream brings the outcome either way.
      this.printer.say(`[kiln] the cancel was refused: ${(error as Error).message}`);
    }
  }
}
