import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { InvalidRequestError } from '../../common/errors.js';
import type { GitEvent, GitEventKind } from '../git-event.js';

/**
 * A webhook payload that does not have the shape its provider documents: a field missing or of
 * the wrong type. The webhook route answers 400 (InvalidRequest) with the field in `details`.
 */
export class PayloadError extends InvalidRequestError {
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`The payload's ${field} ${problem}`, { [field]: problem });
  }
}

/**
 * An object of the payload and where it sits in it, for error messages. The readers below look
 * only at the fields they are asked for, one level at a time: nothing here walks a payload
 * recursively, however deep it nests.
 */
export interface Fields {
  readonly path: string;
  readonly value: Readonly<Record<string, unknown>>;
}

const SHA = /^[0-9a-f]{40}$/i;
export const ZERO_SHA = '0'.repeat(40);

function at(parent: Fields | null, key: string): string {
  return parent === null || parent.path === '' ? key : `${parent.path}.${key}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The payload itself, which must be a JSON object. */
export function root(payload: unknown): Fields {
  if (!isObject(payload)) throw new PayloadError('body', 'must be a JSON object');
  return { path: '', value: payload };
}

export function optionalObject(parent: Fields, key: string): Fields | null {
  const value = parent.value[key];
  if (value === undefined || value === null) return null;
  if (!isObject(value)) throw new PayloadError(at(parent, key), 'must be an object');
  return { path: at(parent, key), value };
}

export function object(parent: Fields, key: string): Fields {
  const fields = optionalObject(parent, key);
  if (fields === null) throw new PayloadError(at(parent, key), 'is required');
  return fields;
}

export function optionalString(parent: Fields, key: string): string | null {
  const value = parent.value[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw new PayloadError(at(parent, key), 'must be a string');
  return value;
}

export function string(parent: Fields, key: string): string {
  const value = optionalString(parent, key);
  if (value === null || value === '') throw new PayloadError(at(parent, key), 'is required');
  return value;
}

export function optionalInteger(parent: Fields, key: string): number | null {
  const value = parent.value[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new PayloadError(at(parent, key), 'must be a whole number');
  }
  return value;
}

export function integer(parent: Fields, key: string): number {
  const value = optionalInteger(parent, key);
  if (value === null) throw new PayloadError(at(parent, key), 'is required');
  return value;
}

export function optionalBoolean(parent: Fields, key: string): boolean | null {
  const value = parent.value[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'boolean') throw new PayloadError(at(parent, key), 'must be true or false');
  return value;
}

/** A commit sha: 40 hex digits, returned in lower case. */
export function optionalSha(parent: Fields, key: string): string | null {
  const value = parent.value[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !SHA.test(value)) {
    throw new PayloadError(at(parent, key), 'must be a commit sha of 40 hex digits');
  }
  return value.toLowerCase();
}

export function sha(parent: Fields, key: string): string {
  const value = optionalSha(parent, key);
  if (value === null) throw new PayloadError(at(parent, key), 'is required');
  return value;
}

/** An array of objects, each with its own path (`commits[3]`). */
export function objects(parent: Fields, key: string): Fields[] {
  const value = parent.value[key];
  if (value === undefined || value === null) throw new PayloadError(at(parent, key), 'is required');
  if (!Array.isArray(value)) throw new PayloadError(at(parent, key), 'must be an array');
  return value.map((item: unknown, index) => {
    const path = `${at(parent, key)}[${index}]`;
    if (!isObject(item)) throw new PayloadError(path, 'must be an object');
    return { path, value: item };
  });
}

/** An array of strings; null when the field is absent or null. */
export function optionalStrings(parent: Fields, key: string): string[] | null {
  const value = parent.value[key];
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) throw new PayloadError(at(parent, key), 'must be an array');
  return value.map((item: unknown, index) => {
    if (typeof item !== 'string') {
      throw new PayloadError(`${at(parent, key)}[${index}]`, 'must be a string');
    }
    return item;
  });
}

/** `{ name, email }` of a commit's author; null when the payload leaves either out. */
export function authorOf(commit: Fields | null): GitEvent['author'] {
  const author = commit === null ? null : optionalObject(commit, 'author');
  if (author === null) return null;
  const name = optionalString(author, 'name');
  const email = optionalString(author, 'email');
  return name === null || email === null ? null : { name, email };
}

/** What a full ref names. */
export type RefTarget = { readonly kind: 'branch' | 'tag'; readonly name: string };

/**
 * The branch or tag a full ref names. A ref outside refs/heads/ and refs/tags/ (refs/notes/…,
 * refs/pull/…) is a well-formed push of something kiln never builds: null, and the provider
 * ignores the event, rather than refusing it and making the provider count a failed delivery.
 * A ref that is not a full ref at all does not fit the payload's documented shape.
 */
export function refTarget(parent: Fields, key: string): RefTarget | null {
  const ref = string(parent, key);
  if (!ref.startsWith('refs/')) {
    throw new PayloadError(at(parent, key), 'must be a full ref (refs/heads/… or refs/tags/…)');
  }
  for (const [prefix, kind] of [
    ['refs/heads/', 'branch'],
    ['refs/tags/', 'tag'],
  ] as const) {
    if (ref.startsWith(prefix)) {
      const name = ref.slice(prefix.length);
      if (name === '') throw new PayloadError(at(parent, key), `names no ${kind}`);
      return { kind, name };
    }
  }
  return null;
}

/**
 * The union of the files the commits list as added, modified or removed, in the order first seen.
 * Null (unknown) when there is no commit, when a commit does not list its files, or when the
 * payload says it left commits out (`total` larger than the commits listed).
 */
export function changedFiles(commits: readonly Fields[], total: number | null): string[] | null {
  if (commits.length === 0 || (total !== null && total > commits.length)) return null;
  const files = new Set<string>();
  for (const commit of commits) {
    const lists = ['added', 'modified', 'removed'].map((key) => optionalStrings(commit, key));
    for (const list of lists) {
      if (list === null) return null;
      for (const file of list) files.add(file);
    }
  }
  return [...files];
}

/** A GitEvent of `kind` with every field not given empty. */
export function gitEvent(kind: GitEventKind, fields: Partial<Omit<GitEvent, 'kind'>>): GitEvent {
  return {
    kind,
    ref: null,
    branch: null,
    tag: null,
    commit: null,
    deleted: false,
    pusher: null,
    author: null,
    changedFiles: null,
    pullRequest: null,
    repositoryUrl: null,
    ...fields,
  };
}

/**
 * One request header (Node lower-cases their names), or null when absent or empty. A header sent
 * more than once arrives as an array for a few names only; such a value is treated as absent, so
 * a signature is never picked from several.
 */
export function header(headers: IncomingHttpHeaders, name: string): string | null {
  const value = headers[name.toLowerCase()];
  return typeof value === 'string' && value !== '' ? value : null;
}

export function hmacSha256(key: string | Buffer, ...parts: readonly Buffer[]): Buffer {
  const hmac = createHmac('sha256', key);
  for (const part of parts) hmac.update(part);
  return hmac.digest();
}

/** Constant-time equality of two byte strings; false (not an exception) when lengths differ. */
export function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The repository's clone URL of a GitHub-shaped payload (GitHub, Gitea, Forgejo), if it names one. */
export function cloneUrl(fields: Fields): string | null {
  const repository = optionalObject(fields, 'repository');
  return repository === null ? null : optionalString(repository, 'clone_url');
}

/**
 * A `pull_request` event of a GitHub-shaped payload (Gitea and Forgejo copy GitHub's): its head
 * commit on its head branch, matched by its base branch. `senderName` reads who sent it, which
 * the hosts name differently.
 */
export function pullRequestEvent(payload: unknown, senderName: (user: Fields) => string): GitEvent {
  const fields = root(payload);
  const number = integer(fields, 'number');
  const pr = object(fields, 'pull_request');
  const head = object(pr, 'head');
  return gitEvent('pull_request', {
    ref: `refs/pull/${number}/head`,
    branch: string(head, 'ref'),
    commit: sha(head, 'sha'),
    pusher: senderName(object(fields, 'sender')),
    pullRequest: {
      number,
      action: string(fields, 'action'),
      targetBranch: string(object(pr, 'base'), 'ref'),
    },
    repositoryUrl: cloneUrl(fields),
  });
}
