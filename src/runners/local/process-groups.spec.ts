import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { membersOf } from '../../../test/support/process-tree.js';
import { GROUP_RECORDS, ProcessGroups } from './process-groups.js';

describe(ProcessGroups.name, () => {
  const root = mkdtempSync('/dev/shm/kiln-groups-');
  const started: ChildProcess[] = [];
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(root, 'build-'));
  });

  afterEach(() => {
    for (const child of started.splice(0)) {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // its group is gone
      }
    }
  });

  afterAll(() => rm(root, { recursive: true, force: true }));

  /** `sh -c script` in a process group of its own, as ChildRun starts a build's children. */
  function group(script: string): ChildProcess {
    const child = spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' });
    started.push(child);
    return child;
  }

  const exited = (child: ChildProcess) =>
    new Promise<void>((done) => {
      if (child.exitCode !== null || child.signalCode !== null) done();
      else child.once('exit', () => done());
    });

  /** What a kiln process that was SIGKILLed after recording `pids` leaves behind. */
  async function recordedByKilledKiln(...pids: number[]): Promise<void> {
    const kiln = group('sleep 60');
    const groups = new ProcessGroups(kiln.pid);
    for (const pid of pids) groups.record(dir, pid);
    kiln.kill('SIGKILL');
    await exited(kiln);
  }

  const running = (child: ChildProcess) => membersOf(new Set([child.pid!])).length > 0;
  const records = () =>
    existsSync(join(dir, GROUP_RECORDS)) ? readdirSync(join(dir, GROUP_RECORDS)) : [];

  function rewriteRecord(pid: number, change: (record: any) => void): void {
    const file = join(dir, GROUP_RECORDS, `${pid}.json`);
    const record = JSON.parse(readFileSync(file, 'utf8'));
    change(record);
    writeFileSync(file, JSON.stringify(record));
  }

  it('stops every process of a group recorded by a kiln process that is gone, and forgets it', async () => {
    const builder = group('sleep 60 & sleep 60');
    await recordedByKilledKiln(builder.pid!);

    const stopped = await new ProcessGroups().stopOrphans([dir], 5_000);

    expect(running(builder)).toBe(false);
    expect(stopped).toEqual(new Map([[dir, 1]]));
    expect(records()).toEqual([]);
  });

  it('SIGKILLs a group that ignores SIGTERM once the grace is over', async () => {
    const stubborn = group('trap "" TERM; sleep 60');
    await recordedByKilledKiln(stubborn.pid!);

    await new ProcessGroups().stopOrphans([dir], 300);

    expect(running(stubborn)).toBe(false);
    await exited(stubborn);
    expect(stubborn.signalCode).toBe('SIGKILL');
    expect(records()).toEqual([]);
  });

  it('leaves alone a group whose kiln process still runs', async () => {
    const kiln = group('sleep 60');
    const builder = group('sleep 60');
    new ProcessGroups(kiln.pid).record(dir, builder.pid!);

    const stopped = await new ProcessGroups().stopOrphans([dir], 1_000);

    expect(running(builder)).toBe(true);
    expect(stopped.size).toBe(0);
    expect(records()).toEqual([`${builder.pid}.json`]);
  });

  it('never signals a process that got a recorded pid after the recorded group ended', async () => {
    const unrelated = group('sleep 60');
    await recordedByKilledKiln(unrelated.pid!);
    // The recorded leader started a tick before the process that holds its pid now.
    rewriteRecord(unrelated.pid!, (record) => (record.group.startTime -= 1));

    const stopped = await new ProcessGroups().stopOrphans([dir], 1_000);

    expect(running(unrelated)).toBe(true);
    expect(stopped.size).toBe(0);
    expect(records()).toEqual([]);
  });

  it('never signals a group recorded before the machine booted', async () => {
    const unrelated = group('sleep 60');
    await recordedByKilledKiln(unrelated.pid!);
    rewriteRecord(unrelated.pid!, (record) => (record.bootId = 'another-boot'));

    await new ProcessGroups().stopOrphans([dir], 1_000);

    expect(running(unrelated)).toBe(true);
    expect(records()).toEqual([]);
  });

  it('keeps the record while a process outlives the leader of its group, and stops it after a restart', async () => {
    const leader = group('sleep 60 & echo started');
    const groups = new ProcessGroups();
    groups.record(dir, leader.pid!);
    await exited(leader);

    await groups.release(dir, leader.pid!);
    expect(records()).toEqual([`${leader.pid}.json`]);
    rewriteRecord(leader.pid!, (record) => (record.owner.pid = 999_999_999)); // its kiln is gone

    await new ProcessGroups().stopOrphans([dir], 5_000);

    expect(running(leader)).toBe(false);
    expect(records()).toEqual([]);
  });

  it('forgets the record of a group whose processes have all ended', async () => {
    const step = group('exit 0');
    const groups = new ProcessGroups();
    groups.record(dir, step.pid!);
    await exited(step);

    await groups.release(dir, step.pid!);

    expect(records()).toEqual([]);
    expect(existsSync(join(dir, GROUP_RECORDS))).toBe(false);
  });
});
