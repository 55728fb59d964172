import { readdirSync, readFileSync } from 'node:fs';

/** One process as /proc shows it. `startTime` (clock ticks after boot) tells a reused pid apart. */
export interface ProcessEntry {
  readonly pid: number;
  readonly ppid: number;
  readonly pgid: number;
  readonly state: string;
  readonly startTime: string;
  readonly command: string;
}

function entryOf(pid: number): ProcessEntry | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
    return {
      pid,
      state: fields[0]!,
      ppid: Number(fields[1]),
      pgid: Number(fields[2]),
      startTime: fields[19]!,
      command,
    };
  } catch {
    return undefined; // it ended while we looked
  }
}

/** Every process that has not ended: zombies (ended, not yet reaped by their parent) left out. */
export function processTable(): ProcessEntry[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map((entry) => entryOf(Number(entry)))
    .filter((entry): entry is ProcessEntry => entry !== undefined && entry.state !== 'Z');
}

/** The children of `pid`, their children, and so on. */
export function descendantsOf(pid: number): ProcessEntry[] {
  const table = processTable();
  const found: ProcessEntry[] = [];
  const parents = new Set([pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const entry of table) {
      if (parents.has(entry.ppid) && !parents.has(entry.pid)) {
        parents.add(entry.pid);
        found.push(entry);
        grew = true;
      }
    }
  }
  return found;
}

/** Which of these processes still run: the same pid with the same start time, not a zombie. */
export function stillRunning(processes: readonly ProcessEntry[]): ProcessEntry[] {
  return processes.filter((old) => {
    const now = entryOf(old.pid);
    return now !== undefined && now.state !== 'Z' && now.startTime === old.startTime;
  });
}

/** Processes that have not ended in any of these process groups. */
export function membersOf(groups: ReadonlySet<number>): ProcessEntry[] {
  return processTable().filter((entry) => groups.has(entry.pgid));
}
