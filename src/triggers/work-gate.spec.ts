import { WorkGate } from './work-gate.js';

/** A piece of work that runs until the test lets it end. */
function held(log: string[], name: string) {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => (end = resolve));
  return {
    work: async () => {
      log.push(`start ${name}`);
      await ended;
      log.push(`end ${name}`);
      return name;
    },
    end: () => end(),
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe(WorkGate.name, () => {
  it('runs work of one key one at a time, in the order it came', async () => {
    const gate = new WorkGate(4);
    const log: string[] = [];
    const [a, b] = [held(log, 'a'), held(log, 'b')];
    const done = [gate.run('k', a.work), gate.run('k', b.work)];
    await settle();
    expect(log).toEqual(['start a']);

    a.end();
    await settle();
    b.end();

    expect(await Promise.all(done)).toEqual(['a', 'b']);
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b']);
  });

  it('runs at most `width` keys at once, and the next when one ends', async () => {
    const gate = new WorkGate(2);
    const log: string[] = [];
    const pieces = ['a', 'b', 'c'].map((name) => held(log, name));
    const done = pieces.map((piece, i) => gate.run(`key-${i}`, piece.work));
    await settle();
    expect(log).toEqual(['start a', 'start b']);

    pieces[1]!.end();
    await settle();
    await settle();
    expect(log).toEqual(['start a', 'start b', 'end b', 'start c']);
    pieces[0]!.end();
    pieces[2]!.end();
    await Promise.all(done);
  });

  it('goes on with the next piece of a key after one failed', async () => {
    const gate = new WorkGate(1);
    const failed = gate.run('k', () => Promise.reject(new Error('no')));
    const next = gate.run('k', () => Promise.resolve('next'));

    await expect(failed).rejects.toThrow('no');
    await expect(next).resolves.toBe('next');
  });
});
