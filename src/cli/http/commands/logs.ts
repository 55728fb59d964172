import { type Command, Option } from 'commander';
import { unwrap } from '../api/client.js';
import { followLog, type LogLine } from '../log-follower.js';
import { LogPrinter } from '../log-printer.js';
import type { Session } from '../session.js';
import { wholeNumber } from './common.js';

interface LogsOptions {
  follow?: boolean;
  sinceLine: number;
  timestamps?: boolean;
  output: 'text' | 'json';
}

/** `kiln logs <build>`: pages over HTTP; `-f` follows over the WebSocket, resuming after drops. */
export function registerLogs(program: Command, session: Session) {
  program
    .command('logs <build>')
    .description("A build's log; -f follows it live until the build ends")
    .option('-f, --follow', 'follow the log live (WebSocket) until the build ends')
    .option('--since-line <n>', 'start at this line (0 is the first)', wholeNumber, 0)
    .option('--timestamps', 'prefix each line with its time')
    .addOption(
      new Option('-o, --output <format>', 'text, or json: one LogEntry (with its seq) a line')
        .choices(['text', 'json'])
        .default('text'),
    )
    .action(async (buildId: string, options: LogsOptions) => {
      const printer = new LogPrinter({ timestamps: options.timestamps === true, progress: false });
      const print = (line: LogLine) =>
        options.output === 'json'
          ? process.stdout.write(`${JSON.stringify(line)}\n`)
          : printer.line(line);
      if (options.follow === true) {
        await followLog({
          url: session.url,
          token: session.token,
          tenantId: await session.tenantId(),
          buildId,
          from: options.sinceLine,
          onLine: print,
        });
        return;
      }
      await pageLog(session, buildId, options.sinceLine, print);
    });
}

/** Every stored line from `from` on, a page of 1000 at a time. */
export async function pageLog(
  session: Session,
  buildId: string,
  from: number,
  print: (line: LogLine) => void,
): Promise<number> {
  const header = await session.tenantHeader();
  let offset = from;
  for (;;) {
    const page = await unwrap(
      session.client().GET('/api/v1/builds/{id}/logs', {
        params: { path: { id: buildId }, query: { offset, limit: 1000 }, header },
      }),
    );
    page.logs.forEach((entry, i) => print({ ...entry, seq: offset + i }));
    offset += page.logs.length;
    if (page.logs.length === 0 || offset >= page.total_lines) return offset;
  }
}
