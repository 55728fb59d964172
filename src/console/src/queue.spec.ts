import { ordinal, queueLine, startsIn } from './queue.js';

const NOW = Date.parse('2026-11-27T18:00:00.000Z');
const inMs = (ms: number) => new Date(NOW + ms).toISOString();
const MIN = 60_000;

describe('ordinal', () => {
  it('gives st, nd and rd to 1, 2 and 3 and th to the rest', () => {
    expect([1, 2, 3, 4, 5, 9, 10].map(ordinal)).toEqual([
      '1st',
      '2nd',
      '3rd',
      '4th',
      '5th',
      '9th',
      '10th',
    ]);
  });

  it('gives th to 11, 12 and 13 of every hundred, and st, nd, rd again after them', () => {
    expect([11, 12, 13, 21, 22, 23, 101, 111, 112, 113, 121].map(ordinal)).toEqual([
      '11th',
      '12th',
      '13th',
      '21st',
      '22nd',
      '23rd',
      '101st',
      '111th',
      '112th',
      '113th',
      '121st',
    ]);
  });
});

describe('startsIn', () => {
  it('rounds to whole minutes', () => {
    expect(startsIn(inMs(4 * MIN), NOW)).toBe('about 4 min');
    expect(startsIn(inMs(4 * MIN + 29_000), NOW)).toBe('about 4 min');
    expect(startsIn(inMs(4 * MIN + 31_000), NOW)).toBe('about 5 min');
  });

  it('says about 1 min at least while the start is still ahead', () => {
    expect(startsIn(inMs(1_000), NOW)).toBe('about 1 min');
    expect(startsIn(inMs(29_000), NOW)).toBe('about 1 min');
  });

  it('says starting soon once the estimate has passed', () => {
    expect(startsIn(inMs(0), NOW)).toBe('starting soon');
    expect(startsIn(inMs(-10 * MIN), NOW)).toBe('starting soon');
  });

  it('counts in hours past 90 minutes', () => {
    expect(startsIn(inMs(90 * MIN), NOW)).toBe('about 90 min');
    expect(startsIn(inMs(91 * MIN), NOW)).toBe('about 2 h');
    expect(startsIn(inMs(150 * MIN + 1), NOW)).toBe('about 3 h');
    expect(startsIn(inMs(26 * 60 * MIN), NOW)).toBe('about 26 h');
  });
});

describe('queueLine', () => {
  const waiting = { reason: 'InstallationLimit', message: 'all 4 build slots are in use' };

  it('gives the place in line and when the build should start', () => {
    expect(queueLine({ ...waiting, position: 3, estimated_start: inMs(4 * MIN) }, NOW)).toBe(
      'waiting: 3rd in line, about 4 min',
    );
    expect(queueLine({ ...waiting, position: 2, estimated_start: inMs(-MIN) }, NOW)).toBe(
      'waiting: 2nd in line, starting soon',
    );
  });

  it('leaves the time out when there is nothing to guess from', () => {
    expect(queueLine({ ...waiting, position: 1, estimated_start: null }, NOW)).toBe(
      'waiting: 1st in line',
    );
    expect(queueLine({ ...waiting, position: 12 }, NOW)).toBe('waiting: 12th in line');
  });

  it('says the cluster holds an admitted build back, and why', () => {
    expect(queueLine({ position: null, reason: 'Unschedulable', message: '0/3 nodes' }, NOW)).toBe(
      'waiting for the cluster: no node can run the pod',
    );
    expect(queueLine({ position: null, reason: 'ClusterQuota', message: 'exceeded quota' })).toBe(
      "waiting for the cluster: the namespace's resource quota is used up",
    );
  });

  it('names a reason it has no words for by its code', () => {
    expect(queueLine({ position: null, reason: 'SomethingNew', message: '…' })).toBe(
      'waiting for the cluster: SomethingNew',
    );
  });
});
