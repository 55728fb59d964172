import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { LogLineInput } from '../src/logs/log-sink.js';
import { ChildRun } from '../src/runners/local/child-process.js';

describe(ChildRun.name, () => {
  const dir = mkdtempSync('/dev/shm/kiln-child-');
  const spool = join(dir, 'output.spool');

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** Runs `sh -c script` with a slow line store, as LogSink is under load. */
  function run(script: string, maxOutputBytes = 1024 * 1024) {
    const lines: LogLineInput[] = [];
    const child = new ChildRun('sh', ['-c', script], {
      env: { PATH: '/usr/bin:/bin' },
      spool,
      maxOutputBytes,
      container: 'step',
      onLines: async (batch) => {
        await new Promise((done) => setTimeout(done, 20));
        lines.push(...batch);
      },
    });
    return { child, lines, texts: () => lines.map((line) => line.text) };
  }

  it('keeps stdout and stderr lines in the order they were written', async () => {
    const { child, texts } = run(
      'i=1; while [ $i -le 2000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done',
    );

    const exit = await child.exited;

    expect(exit).toMatchObject({ code: 0, incomplete: undefined, outputLimitReached: false });
    const expected = Array.from({ length: 2000 }, (_, i) => [`out ${i + 1}`, `err ${i + 1}`]);
    expect(texts()).toEqual(expected.flat());
  });

  it('leaves no spool file behind, while the child runs or after', async () => {
    const { child } = run('echo started; sleep 0.3');
    await new Promise((done) => setTimeout(done, 100));

    expect(existsSync(spool)).toBe(false);
    await child.exited;
    expect(existsSync(spool)).toBe(false);
  });

  it('says so after the last line when a signal cut that line short', async () => {
    const { child, lines } = run('echo whole; printf partial; exec sleep 30');
    await new Promise((done) => setTimeout(done, 200));

    await child.stop(1_000);
    const exit = await child.exited;

    expect(exit.signal).toBe('SIGTERM');
    expect(exit.incomplete).toBe(
      'sh was stopped by SIGTERM in the middle of a line; its last line is cut short',
    );
    expect(lines.map(({ text, container }) => ({ text, container }))).toEqual([
      { text: 'whole', container: 'step' },
      { text: 'partial', container: 'step' },
      { text: `WARN: [kiln] ${exit.incomplete}`, container: 'kiln' },
    ]);
  });

  it('stops a child whose output passes the limit, keeps what came before, and says so', async () => {
    const { child, texts } = run('while :; do echo 0123456789abcdef; done', 65_536);

    const exit = await child.exited;

    expect(exit.outputLimitReached).toBe(true);
    expect(exit.signal).toBe('SIGTERM');
    // 65,536 bytes are 3,855 lines of 17 bytes and the first byte of the next.
    expect(texts()).toEqual([
      ...Array<string>(3855).fill('0123456789abcdef'),
      '0',
      'WARN: [kiln] sh printed more than 65536 bytes; it was stopped and the rest of its output is not stored',
    ]);
  });

  it('hands over the first line of a quiet child at once, and the lines after it in the next batch', async () => {
    const go = join(dir, 'go');
    const batches: string[][] = [];
    let firstBatch: () => void = () => undefined;
    const handed = new Promise<void>((done) => (firstBatch = done));
    // An interval no test outlives: a line handed over before the child ends went at once.
    const child = new ChildRun(
      'sh',
      ['-c', `echo first; while [ ! -e ${go} ]; do sleep 0.01; done; echo second; echo third`],
      {
        env: { PATH: '/usr/bin:/bin' },
        spool,
        maxOutputBytes: 1024 * 1024,
        container: 'step',
        flushEveryMs: 3_600_000,
        onLines: (batch) => {
          batches.push(batch.map((line) => line.text));
          firstBatch();
          return Promise.resolve();
        },
      },
    );

    await handed;
    expect(batches).toEqual([['first']]);
    writeFileSync(go, '');
    await child.exited;

    expect(batches).toEqual([['first'], ['second', 'third']]);
    await rm(go, { force: true });
  });
});
