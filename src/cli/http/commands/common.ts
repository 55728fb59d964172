import { InvalidArgumentError } from 'commander';
import { unwrap } from '../api/client.js';
import { UsageError } from '../exit-codes.js';
import { isUuid, type Session } from '../session.js';

export interface PageOptions {
  page: number;
  limit: number;
}

/** A whole number from 1, for --page, --limit and the like. */
export function positive(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new InvalidArgumentError('a whole number from 1');
  }
  return Number(value);
}

/** A whole number from 0. */
export function wholeNumber(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('a whole number from 0');
  return Number(value);
}

/** Collects a repeated option into a list. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** `KEY=value` pairs (repeated options) as an object. */
export function keyValues(pairs: readonly string[], flag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new UsageError(`${flag} ${pair}: expected KEY=value`);
    out[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return out;
}

/** A project's id by id or name, in the current tenant. */
export async function projectIdOf(session: Session, ref: string): Promise<string> {
  if (isUuid(ref)) return ref.toLowerCase();
  const { projects } = await unwrap(
    session.client().GET('/api/v1/projects', { params: { header: await session.tenantHeader() } }),
  );
  const found = projects.find((project) => project.name === ref);
  if (found === undefined) {
    throw new UsageError(`the tenant has no project named ${ref}`);
  }
  return found.id;
}
