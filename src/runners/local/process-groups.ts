import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { readdir, readFile, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

/** Where, under a build's directory, the groups of its children are recorded (one file each). */
export const GROUP_RECORDS = 'process-groups';
const POLL_MS = 100;
/** How long a group is watched after its SIGKILL (a process in uninterruptible sleep ends later). */
const KILL_WAIT_MS = 2_000;

/** A process told apart from a later one that gets its pid: start time in clock ticks after boot. */
interface Identity {
  readonly pid: number;
  readonly startTime: number;
}

/** What a record holds: the group (its leader), the kiln process that started it, and where. */
interface GroupRecord {
  readonly group: Identity;
  readonly owner: Identity;
  readonly bootId: string;
  readonly pidNamespace: string;
}

interface Proc extends Identity {
  readonly pgid: number;
  readonly zombie: boolean;
}

interface Orphan {
  readonly dir: string;
  readonly file: string;
  readonly group: Identity;
}

/**
 * The process groups of a build's children, recorded under the build's directory while they
 * run, so that a kiln process started after one that was SIGKILLed can stop what it left behind
 * (docs/adr/0033-local-child-processes.md). Linux only: it reads /proc.
 *
 * A recorded group is only signalled while it is provably the same group: same boot and pid
 * namespace, and either its leader still runs with the recorded start time, or the leader is
 * gone and processes of the group remain (the kernel reuses no pid still naming a group).
 */
export class ProcessGroups {
  private self: { owner: Identity; bootId: string; pidNamespace: string } | undefined;

  constructor(private readonly ownerPid: number = process.pid) {}

  /**
   * Records the group led by `pid`, a child just spawned in a group of its own. Synchronous, so
   * that nothing can reap the child first: a pid read after that may name another process.
   */
  record(dir: string, pid: number): void {
    const group = identityOf(pid);
    if (group === undefined) throw new Error(`process ${pid} is not in /proc`);
    const records = join(dir, GROUP_RECORDS);
    mkdirSync(records, { recursive: true });
    const { owner, bootId, pidNamespace } = this.host();
    const record: GroupRecord = { group, owner, bootId, pidNamespace };
    // Cut short by a crash, a record does not parse and is dropped: as if kiln died before it.
    writeFileSync(join(records, `${pid}.json`), JSON.stringify(record));
  }

  /** Forgets the group led by `pid` once no process of it runs; keeps the record while one does. */
  async release(dir: string, pid: number): Promise<void> {
    const records = join(dir, GROUP_RECORDS);
    const file = join(records, `${pid}.json`);
    const record = await readRecord(file);
    if (record !== undefined && standing(record.group, processTable())) return;
    await rm(file, { force: true });
    await rmdir(records).catch(() => undefined); // only when it is empty
  }

  /**
   * Stops the groups recorded under `dirs` by kiln processes that no longer run: SIGTERM, then
   * SIGKILL to what is left after `graceMs`. Records of groups that are gone, or that were
   * recorded on another boot or in another pid namespace, are removed; a group recorded by a
   * kiln process that still runs is left alone. Resolves with how many groups were signalled in
   * each directory (only directories where some were).
   */
  async stopOrphans(dirs: readonly string[], graceMs: number): Promise<Map<string, number>> {
    const { bootId, pidNamespace } = this.host();
    const table = processTable();
    const orphans: Orphan[] = [];
    const forget: string[] = [];
    for (const dir of dirs) {
      for (const [file, record] of await readRecords(join(dir, GROUP_RECORDS))) {
        if (record === undefined || record.bootId !== bootId) {
          forget.push(file);
        } else if (record.pidNamespace !== pidNamespace) {
          forget.push(file); // not ours to see or signal
        } else if (running(record.owner, table)) {
          continue; // a live kiln process owns it
        } else if (standing(record.group, table)) {
          orphans.push({ dir, file, group: record.group });
        } else {
          forget.push(file);
        }
      }
    }
    for (const orphan of orphans) signalGroup(orphan.group.pid, 'SIGTERM');
    let left = await whileStanding(orphans, Date.now() + graceMs);
    for (const orphan of left) signalGroup(orphan.group.pid, 'SIGKILL');
    left = await whileStanding(left, Date.now() + KILL_WAIT_MS);
    const gone = orphans.filter((orphan) => !left.includes(orphan));
    await Promise.all(
      [...forget, ...gone.map((orphan) => orphan.file)].map((file) => rm(file, { force: true })),
    );
    // Only the emptied ones go: rmdir refuses a directory that still holds a record.
    await Promise.all(dirs.map((dir) => rmdir(join(dir, GROUP_RECORDS)).catch(() => undefined)));
    const signalled = new Map<string, number>();
    for (const { dir } of orphans) signalled.set(dir, (signalled.get(dir) ?? 0) + 1);
    return signalled;
  }

  private host(): { owner: Identity; bootId: string; pidNamespace: string } {
    if (this.self === undefined) {
      const owner = identityOf(this.ownerPid);
      if (owner === undefined) throw new Error(`process ${this.ownerPid} is not in /proc`);
      this.self = {
        owner,
        bootId: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
        pidNamespace: readlinkSync('/proc/self/ns/pid'),
      };
    }
    return this.self;
  }
}

/** The groups among `orphans` that still stand at `deadline`, or as soon as none does. */
async function whileStanding(orphans: Orphan[], deadline: number): Promise<Orphan[]> {
  let left = orphans;
  while (left.length > 0 && Date.now() < deadline) {
    await delay(POLL_MS);
    const table = processTable();
    left = left.filter((orphan) => standing(orphan.group, table));
  }
  return left;
}

/**
 * Whether the group `leader` led still has a running process. A process holding the leader's pid
 * with another start time means the group ended (its pid was free to reuse); without the leader,
 * the group's members are the processes in it started after it.
 */
function standing(leader: Identity, table: readonly Proc[]): boolean {
  const holder = table.find((proc) => proc.pid === leader.pid);
  if (holder !== undefined && holder.startTime !== leader.startTime) return false;
  return table.some(
    (proc) => proc.pgid === leader.pid && !proc.zombie && proc.startTime >= leader.startTime,
  );
}

function running(which: Identity, table: readonly Proc[]): boolean {
  return table.some(
    (proc) => proc.pid === which.pid && proc.startTime === which.startTime && !proc.zombie,
  );
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // the group ended meanwhile
  }
}

/** Every process in /proc, zombies included (a zombie leader still holds its pid). */
function processTable(): Proc[] {
  const table: Proc[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const proc = procOf(Number(entry));
    if (proc !== undefined) table.push(proc);
  }
  return table;
}

function identityOf(pid: number): Identity | undefined {
  const proc = procOf(pid);
  return proc === undefined ? undefined : { pid, startTime: proc.startTime };
}

/** proc(5): after the command in parentheses come state (3), ppid, pgrp (5) … starttime (22). */
function procOf(pid: number): Proc | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // it ended
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    pid,
    zombie: fields[0] === 'Z',
    pgid: Number(fields[2]),
    startTime: Number(fields[19]),
  };
}

async function readRecords(records: string): Promise<Array<[string, GroupRecord | undefined]>> {
  const names = await readdir(records).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return [];
    throw error;
  });
  const files = names.filter((name) => name.endsWith('.json')).map((name) => join(records, name));
  return Promise.all(
    files.map(async (file): Promise<[string, GroupRecord | undefined]> => [
      file,
      await readRecord(file),
    ]),
  );
}

/** A record, or undefined when there is none or it is not one (nothing is signalled for it). */
async function readRecord(file: string): Promise<GroupRecord | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const value = JSON.parse(text) as Partial<GroupRecord>;
    const { group, owner, bootId, pidNamespace } = value;
    // Never a pid of 1 or less for a group: kill(-1) signals every process, kill(0) kiln's own group.
    if (!isIdentity(group) || group.pid <= 1 || !isIdentity(owner)) return undefined;
    if (typeof bootId !== 'string' || typeof pidNamespace !== 'string') return undefined;
    return { group, owner, bootId, pidNamespace };
  } catch {
    return undefined;
  }
}

function isIdentity(value: unknown): value is Identity {
  if (typeof value !== 'object' || value === null) return false;
  const { pid, startTime } = value as Record<string, unknown>;
  return Number.isSafeInteger(pid) && (pid as number) > 0 && Number.isSafeInteger(startTime);
}
