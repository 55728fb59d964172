import { parseTimestamped, StreamSession } from './stream-session.js';

describe(parseTimestamped.name, () => {
  it.each([
    ['2026-11-23T03:00:00.123456789Z hello', Date.UTC(2026, 10, 23, 3, 0, 0, 123), 'hello'],
    ['2026-11-23T03:00:00.999999999Z ', Date.UTC(2026, 10, 23, 3, 0, 0, 999), ''],
    [
      '2024-02-29T23:59:59.000000001Z  two spaces',
      Date.UTC(2024, 1, 29, 23, 59, 59, 0),
      ' two spaces',
    ],
    // Forms a real kubelet also writes (RFC 3339 with trailing zeros trimmed, an offset).
    ['2026-11-23T03:00:00.5Z half', Date.UTC(2026, 10, 23, 3, 0, 0, 500), 'half'],
    ['2026-11-23T03:00:00Z whole', Date.UTC(2026, 10, 23, 3, 0, 0, 0), 'whole'],
    ['2026-11-23T05:00:00.250+02:00 east', Date.UTC(2026, 10, 23, 3, 0, 0, 250), 'east'],
    ['2026-11-23T03:00:00.123456789Z', Date.UTC(2026, 10, 23, 3, 0, 0, 123), ''],
  ])('reads %j', (raw, tsMs, text) => {
    expect(parseTimestamped(raw)).toEqual({ tsMs, text });
  });

  it.each([
    'no timestamp here',
    '2026-13-23T03:00:00.123456789Z bad month',
    '2026-11-23T03:00:00.12345678xZ bad digit',
    '2026-11-23 03:00:00.123456789Z no T',
    '',
  ])('refuses %j', (raw) => {
    expect(parseTimestamped(raw)).toBeUndefined();
  });
});

describe(StreamSession.name, () => {
  it('splits chunks into lines, holding a cut line until its end arrives', () => {
    const session = new StreamSession(undefined);
    expect(session.take('2026-11-23T03:00:00.100000000Z a\n2026-11-23T03:00:0')).toEqual([
      { tsMs: Date.UTC(2026, 10, 23, 3, 0, 0, 100), text: 'a' },
    ]);
    expect(session.take('1.200000000Z b\r\n')).toEqual([
      { tsMs: Date.UTC(2026, 10, 23, 3, 0, 1, 200), text: 'b' },
    ]);
  });
});
