import { createInterface } from 'node:readline/promises';
import { Writable } from 'node:stream';
import { UsageError } from './exit-codes.js';

/** Everything on standard input, as text. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The lines of standard input, without their line ends (`--password-stdin`). */
export async function stdinLines(): Promise<string[]> {
  return (await readStdin()).split(/\r?\n/);
}

export function interactive(): boolean {
  return process.stdin.isTTY && process.stderr.isTTY;
}

/** Asks on the terminal (standard error) and reads one line; what is typed is echoed. */
export async function ask(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  rl.on('SIGINT', interrupted);
  try {
    return await rl.question(question);
  } finally {
    rl.close();
  }
}

/** Asks for a secret on the terminal: what is typed is not echoed. */
export async function askHidden(question: string, why: string): Promise<string> {
  if (!interactive()) {
    throw new UsageError(`no terminal to ask for ${why}: pass it with --password-stdin`);
  }
  let muted = false;
  const output = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (!muted) process.stderr.write(chunk);
      done();
    },
  });
  const rl = createInterface({ input: process.stdin, output, terminal: true });
  rl.on('SIGINT', interrupted);
  try {
    process.stderr.write(question);
    muted = true;
    return await rl.question('');
  } finally {
    muted = false;
    process.stderr.write('\n');
    rl.close();
  }
}

/** Ctrl-C at a question: leave, as a shell command does (128 + SIGINT). */
function interrupted(): never {
  process.stderr.write('\n');
  process.exit(130);
}
