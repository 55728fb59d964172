import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { GitEvent } from '../git-event.js';
import {
  authorOf,
  changedFiles,
  type Fields,
  gitEvent,
  header,
  hmacSha256,
  integer,
  object,
  objects,
  optionalInteger,
  optionalObject,
  optionalSha,
  optionalString,
  PayloadError,
  refTarget,
  root,
  sameBytes,
  sha,
  string,
  ZERO_SHA,
} from './payload.js';
import type { WebhookProvider } from './provider.js';

/** A `webhook-signature` header lists a few signatures at most; more is not a GitLab request. */
const MAX_SIGNATURES = 8;
const SIGNATURE = /^v1,([A-Za-z0-9+/]{43}=)$/;
const STANDARD_WEBHOOKS_KEY_PREFIX = 'whsec_';

/**
 * GitLab webhooks. A GitLab webhook has two optional secrets, and a trigger has one secret for
 * both:
 *
 * - the secret token, sent back as it is in `X-Gitlab-Token`: compared in constant time (both
 *   sides hashed first, so the comparison does not depend on the lengths);
 * - the signing token (GitLab 19.0), which signs the delivery as Standard Webhooks do:
 *   `webhook-signature: v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">`.
 *   GitLab takes a signing token only in the form `whsec_<base64 of 32 bytes>`, and the HMAC key
 *   is those 32 bytes; a trigger secret of that form can be pasted into both fields.
 *
 * A delivery must carry at least one of the two, and each it carries must match. GitLab documents
 * both as optional and independent, so either alone is accepted: the signature proves more than
 * the token, and a token alone is what GitLab before 19.0 sends. The signature's timestamp is not
 * checked against a clock: a replay is refused by its delivery id, as for every provider.
 *
 * The delivery id is `Idempotency-Key`, which GitLab keeps the same across retries of a delivery
 * (it is also `webhook-id`); `X-Gitlab-Event-UUID`, shared by a webhook and those it triggers
 * recursively, stands in for it on GitLab before 17.4.
 */
export const gitlab: WebhookProvider = {
  name: 'gitlab',

  verify(headers, rawBody, secret) {
    return Promise.resolve(verified(headers, rawBody, secret));
  },

  deliveryId: (headers) =>
    header(headers, 'idempotency-key') ?? header(headers, 'x-gitlab-event-uuid'),

  eventName: (headers) => header(headers, 'x-gitlab-event'),

  parse(eventName, payload) {
    switch (eventName) {
      case 'Push Hook':
        return push(payload, 'push');
      case 'Tag Push Hook':
        return push(payload, 'tag_push');
      case 'Merge Request Hook':
        return mergeRequest(payload);
      default:
        return null;
    }
  },
};

function verified(headers: IncomingHttpHeaders, rawBody: Buffer, secret: string): boolean {
  const token = header(headers, 'x-gitlab-token');
  const signatures = header(headers, 'webhook-signature');
  if (secret === '' || (token === null && signatures === null)) return false;
  if (token !== null && !sameBytes(sha256(token), sha256(secret))) return false;
  return signatures === null || signed(headers, rawBody, signatures, secret);
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

function signed(
  headers: IncomingHttpHeaders,
  rawBody: Buffer,
  signatures: string,
  secret: string,
): boolean {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  if (id === null || timestamp === null || !/^\d{1,12}$/.test(timestamp)) return false;
  const key = secret.startsWith(STANDARD_WEBHOOKS_KEY_PREFIX)
    ? Buffer.from(secret.slice(STANDARD_WEBHOOKS_KEY_PREFIX.length), 'base64')
    : Buffer.from(secret, 'utf8');
  const expected = hmacSha256(key, Buffer.from(`${id}.${timestamp}.`, 'utf8'), rawBody);
  const listed = signatures.split(' ').filter((entry) => entry !== '');
  if (listed.length > MAX_SIGNATURES) return false;
  let matched = false;
  for (const entry of listed) {
    const digest = SIGNATURE.exec(entry)?.[1];
    if (digest !== undefined && sameBytes(Buffer.from(digest, 'base64'), expected)) matched = true;
  }
  return matched;
}

function expectKind(fields: Fields, kind: string): void {
  if (string(fields, 'object_kind') !== kind) {
    throw new PayloadError('object_kind', `must be ${kind}`);
  }
}

function projectUrl(fields: Fields): string | null {
  const project = optionalObject(fields, 'project');
  return project === null ? null : optionalString(project, 'git_http_url');
}

function push(payload: unknown, kind: 'push' | 'tag_push'): GitEvent | null {
  const fields = root(payload);
  expectKind(fields, kind);
  const target = refTarget(fields, 'ref');
  if (target === null) return null;
  sha(fields, 'before');
  const after = sha(fields, 'after');
  // The commit to build: `after` is an annotated tag's tag object; checkout_sha is its commit.
  const checkout = optionalSha(fields, 'checkout_sha');
  const deleted = checkout === null || after === ZERO_SHA;
  const commits = objects(fields, 'commits');
  const head = commits.find((commit) => optionalSha(commit, 'id') === checkout) ?? null;
  return gitEvent(target.kind === 'tag' ? 'tag' : 'push', {
    ref: string(fields, 'ref'),
    branch: target.kind === 'branch' ? target.name : null,
    tag: target.kind === 'tag' ? target.name : null,
    commit: deleted ? null : checkout,
    deleted,
    pusher: string(fields, 'user_username'),
    author: deleted ? null : authorOf(head),
    // GitLab lists the last 20 commits of a push; total_commits_count counts them all.
    changedFiles: deleted
      ? null
      : changedFiles(commits, optionalInteger(fields, 'total_commits_count')),
    repositoryUrl: projectUrl(fields),
  });
}

/**
 * GitLab sends `update` for any change to a merge request, its title or labels as much as new
 * commits; `oldrev` is there only when commits were pushed. An update without it is reported as
 * `update-without-commits`, an action that does not build.
 */
function mergeRequest(payload: unknown): GitEvent {
  const fields = root(payload);
  expectKind(fields, 'merge_request');
  const attributes = object(fields, 'object_attributes');
  const iid = integer(attributes, 'iid');
  const action = string(attributes, 'action');
  const lastCommit = object(attributes, 'last_commit');
  const withCommits = optionalSha(attributes, 'oldrev') !== null;
  return gitEvent('pull_request', {
    ref: `refs/merge-requests/${iid}/head`,
    branch: string(attributes, 'source_branch'),
    commit: sha(lastCommit, 'id'),
    pusher: string(object(fields, 'user'), 'username'),
    author: authorOf(lastCommit),
    pullRequest: {
      number: iid,
      action: action === 'update' && !withCommits ? 'update-without-commits' : action,
      targetBranch: string(attributes, 'target_branch'),
    },
    repositoryUrl: projectUrl(fields),
  });
}
