import type { IncomingHttpHeaders } from 'node:http';
import type { GitEvent } from '../git-event.js';
import {
  authorOf,
  changedFiles,
  cloneUrl,
  type Fields,
  gitEvent,
  header,
  hmacSha256,
  object,
  objects,
  optionalInteger,
  optionalObject,
  optionalSha,
  optionalString,
  pullRequestEvent,
  PayloadError,
  refTarget,
  root,
  sameBytes,
  sha,
  string,
  ZERO_SHA,
} from './payload.js';
import type { WebhookProvider } from './provider.js';

const HEX_SIGNATURE = /^[0-9a-f]{64}$/i;

/**
 * Gitea and Forgejo webhooks, one payload format: the signature header is the hex HMAC-SHA256 of
 * the body. Forgejo sends its X-Forgejo-* headers and Gitea's X-Gitea-* ones beside them, so a
 * Forgejo trigger reads its own name first and Gitea's after.
 */
export function giteaProvider(name: 'gitea' | 'forgejo'): WebhookProvider {
  const first = (headers: IncomingHttpHeaders, suffix: string): string | null =>
    name === 'forgejo'
      ? (header(headers, `x-forgejo-${suffix}`) ?? header(headers, `x-gitea-${suffix}`))
      : header(headers, `x-gitea-${suffix}`);

  return {
    name,

    verify(headers, rawBody, secret) {
      const signature = first(headers, 'signature');
      if (signature === null || secret === '' || !HEX_SIGNATURE.test(signature)) {
        return Promise.resolve(false);
      }
      return Promise.resolve(sameBytes(Buffer.from(signature, 'hex'), hmacSha256(secret, rawBody)));
    },

    deliveryId: (headers) => first(headers, 'delivery'),

    eventName: (headers) => first(headers, 'event'),

    parse(eventName, payload) {
      switch (eventName) {
        case 'push':
          return push(payload);
        case 'pull_request':
          return pullRequestEvent(payload, login);
        // A new tag or branch also comes as a push of its ref; the push is what kiln reads.
        default:
          return null;
      }
    },
  };
}

export const gitea = giteaProvider('gitea');
export const forgejo = giteaProvider('forgejo');

/** A Gitea user's name: `login`, with `username` (its older alias) where login is missing. */
function login(user: Fields): string {
  const name = optionalString(user, 'login') ?? optionalString(user, 'username');
  if (name === null || name === '') throw new PayloadError(`${user.path}.login`, 'is required');
  return name;
}

function push(payload: unknown): GitEvent | null {
  const fields = root(payload);
  const target = refTarget(fields, 'ref');
  if (target === null) return null;
  sha(fields, 'before');
  const after = sha(fields, 'after');
  const deleted = after === ZERO_SHA;
  const head = optionalObject(fields, 'head_commit');
  // Gitea lists only the last few commits of a push (its FeedMaxCommitNum); total_commits counts all.
  const files = changedFiles(objects(fields, 'commits'), optionalInteger(fields, 'total_commits'));
  return gitEvent(target.kind === 'tag' ? 'tag' : 'push', {
    ref: string(fields, 'ref'),
    branch: target.kind === 'branch' ? target.name : null,
    tag: target.kind === 'tag' ? target.name : null,
    // For an annotated tag `after` is the tag object; head_commit is the commit it points at.
    commit: deleted ? null : ((head === null ? null : optionalSha(head, 'id')) ?? after),
    deleted,
    pusher: login(object(fields, 'pusher')),
    author: deleted ? null : authorOf(head),
    changedFiles: deleted ? null : files,
    repositoryUrl: cloneUrl(fields),
  });
}
