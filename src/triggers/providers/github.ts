import type { GitEvent } from '../git-event.js';
import {
  authorOf,
  changedFiles,
  cloneUrl,
  gitEvent,
  header,
  object,
  objects,
  optionalBoolean,
  optionalInteger,
  optionalObject,
  optionalSha,
  pullRequestEvent,
  refTarget,
  root,
  sha,
  string,
  ZERO_SHA,
} from './payload.js';
import type { WebhookProvider } from './provider.js';

/** GitHub lists at most this many commits in a push payload; a push of more lists only these. */
const MAX_LISTED_COMMITS = 2048;

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * GitHub webhooks: `X-Hub-Signature-256` (HMAC-SHA256 of the body, `sha256=<hex>`) checked by
 * @octokit/webhooks-methods. The library signs a string, so the body is decoded strictly: a body
 * that is not valid UTF-8 (never one GitHub sends) is refused rather than decoded with
 * replacement characters, so the bytes verified are exactly the bytes received.
 */
export const github: WebhookProvider = {
  name: 'github',

  async verify(headers, rawBody, secret) {
    const signature = header(headers, 'x-hub-signature-256');
    if (signature === null || secret === '' || rawBody.length === 0) return false;
    try {
      // Loaded when a delivery first needs it: the package is ESM only, and what loads the API's
      // modules without verifying anything (the OpenAPI generation under CommonJS) never does.
      const { verify } = await import('@octokit/webhooks-methods');
      return await verify(secret, strictUtf8.decode(rawBody), signature);
    } catch {
      return false;
    }
  },

  deliveryId: (headers) => header(headers, 'x-github-delivery'),

  eventName: (headers) => header(headers, 'x-github-event'),

  parse(eventName, payload) {
    switch (eventName) {
      case 'push':
        return push(payload);
      case 'pull_request':
        return pullRequestEvent(payload, (sender) => string(sender, 'login'));
      case 'ping':
        return gitEvent('ping', { repositoryUrl: cloneUrl(root(payload)) });
      // 'create' and 'delete' also come as a push of the ref; the push is what kiln reads.
      default:
        return null;
    }
  },
};

function push(payload: unknown): GitEvent | null {
  const fields = root(payload);
  const target = refTarget(fields, 'ref');
  if (target === null) return null;
  sha(fields, 'before');
  const after = sha(fields, 'after');
  const deleted = optionalBoolean(fields, 'deleted') === true || after === ZERO_SHA;
  const commits = objects(fields, 'commits');
  const head = optionalObject(fields, 'head_commit');
  const listed = commits.length >= MAX_LISTED_COMMITS ? null : commits;
  // `size` (all the commits pushed) is in the Events API's push; a webhook's push may leave it out.
  const size = optionalInteger(fields, 'size');
  return gitEvent(target.kind === 'tag' ? 'tag' : 'push', {
    ref: string(fields, 'ref'),
    branch: target.kind === 'branch' ? target.name : null,
    tag: target.kind === 'tag' ? target.name : null,
    // For an annotated tag `after` is the tag object; head_commit is the commit it points at.
    commit: deleted ? null : ((head === null ? null : optionalSha(head, 'id')) ?? after),
    deleted,
    pusher: string(object(fields, 'pusher'), 'name'),
    author: deleted ? null : authorOf(head),
    changedFiles: deleted || listed === null ? null : changedFiles(listed, size),
    repositoryUrl: cloneUrl(root(payload)),
  });
}
