import { createHash, createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Webhook deliveries as GitHub, GitLab, Gitea and Forgejo send them: the headers each one sets and
 * the payloads in the shape each one documents (the fixtures of src/triggers/fixtures/). The
 * signatures are computed here with node:crypto, apart from kiln's verification code.
 */

export type GitProvider = 'github' | 'gitlab' | 'gitea' | 'forgejo';

export interface Delivery {
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

export interface DeliveryOptions {
  readonly deliveryId?: string;
  /**
   * GitLab: which of its two secrets the webhook has. 'token' (the default) sends the secret in
   * X-Gitlab-Token; 'signing-token' signs as GitLab 19.0 does (webhook-signature, Standard
   * Webhooks; the secret should then be `whsec_<base64 of 32 bytes>`); 'both' does both.
   */
  readonly gitlabAuth?: 'token' | 'signing-token' | 'both';
  /** GitLab: the webhook-timestamp to sign (seconds); now by default. */
  readonly timestamp?: number;
}

/** Headers as a Node server receives them: names in lower case (IncomingHttpHeaders). */
export function receivedHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]),
  );
}

const FIXTURES = join(__dirname, '..', '..', 'src', 'triggers', 'fixtures');

/** A fixture payload of src/triggers/fixtures/, parsed afresh (callers may change it). */
export function fixture(name: string): Record<string, any> {
  return JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8'));
}

/** The event header value a provider sends for a kind of event. */
export function webhookEvent(provider: GitProvider, kind: 'push' | 'tag' | 'pull_request'): string {
  if (provider === 'gitlab') {
    return { push: 'Push Hook', tag: 'Tag Push Hook', pull_request: 'Merge Request Hook' }[kind];
  }
  return kind === 'tag' ? 'push' : kind;
}

/** A webhook delivery of `payload`, signed with `secret` and headed as `provider` heads it. */
export function signedDelivery(
  provider: GitProvider,
  secret: string,
  event: string,
  payload: object,
  opts: DeliveryOptions = {},
): Delivery {
  const id = opts.deliveryId ?? randomUUID();
  switch (provider) {
    case 'github': {
      const body = Buffer.from(JSON.stringify(payload));
      return {
        body,
        headers: {
          'Content-Type': 'application/json',
          'User-Agent': 'GitHub-Hookshot/8f3e1c2',
          'X-GitHub-Event': event,
          'X-GitHub-Delivery': id,
          'X-GitHub-Hook-ID': '482915637',
          'X-GitHub-Hook-Installation-Target-ID': '1296269',
          'X-GitHub-Hook-Installation-Target-Type': 'repository',
          'X-Hub-Signature': `sha1=${createHmac('sha1', secret).update(body).digest('hex')}`,
          'X-Hub-Signature-256': `sha256=${hexHmac(secret, body)}`,
        },
      };
    }
    case 'gitlab':
      return gitlabDelivery(secret, event, payload, id, opts);
    case 'gitea':
    case 'forgejo':
      return giteaDelivery(provider, secret, event, payload, id);
  }
}

function hexHmac(secret: string, body: Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

function gitlabDelivery(
  secret: string,
  event: string,
  payload: object,
  id: string,
  opts: DeliveryOptions,
): Delivery {
  const body = Buffer.from(JSON.stringify(payload));
  const auth = opts.gitlabAuth ?? 'token';
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': 'GitLab/19.0.0',
    'X-Gitlab-Event': event,
    'X-Gitlab-Instance': 'https://gitlab.example.com',
    'X-Gitlab-Webhook-UUID': '02affd2d-2cba-4033-917d-ec22d5dc4b38',
    'X-Gitlab-Event-UUID': opts.deliveryId ?? randomUUID(),
    'Idempotency-Key': id,
  };
  if (auth !== 'signing-token') headers['X-Gitlab-Token'] = secret;
  if (auth !== 'token') {
    const timestamp = String(opts.timestamp ?? Math.floor(Date.now() / 1000));
    const key = secret.startsWith('whsec_')
      ? Buffer.from(secret.slice('whsec_'.length), 'base64')
      : Buffer.from(secret);
    const signature = createHmac('sha256', key)
      .update(`${id}.${timestamp}.`)
      .update(body)
      .digest('base64');
    headers['webhook-id'] = id;
    headers['webhook-timestamp'] = timestamp;
    headers['webhook-signature'] = `v1,${signature}`;
  }
  return { body, headers };
}

function giteaDelivery(
  provider: 'gitea' | 'forgejo',
  secret: string,
  event: string,
  payload: object,
  id: string,
): Delivery {
  // Gitea indents its JSON payloads (json.MarshalIndent); the signature covers those bytes.
  const body = Buffer.from(JSON.stringify(payload, null, 2));
  const sha256 = hexHmac(secret, body);
  const sha1 = createHmac('sha1', secret).update(body).digest('hex');
  const action = (payload as { action?: unknown }).action;
  const eventType =
    event === 'pull_request' && action === 'synchronized' ? 'pull_request_sync' : event;
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  const prefixes = provider === 'forgejo' ? ['Forgejo', 'Gitea', 'Gogs'] : ['Gitea', 'Gogs'];
  for (const prefix of prefixes) {
    headers[`X-${prefix}-Delivery`] = id;
    headers[`X-${prefix}-Event`] = event;
    headers[`X-${prefix}-Event-Type`] = eventType;
    headers[`X-${prefix}-Signature`] = sha256;
  }
  headers['X-Hub-Signature'] = `sha1=${sha1}`;
  headers['X-Hub-Signature-256'] = `sha256=${sha256}`;
  headers['X-GitHub-Delivery'] = id;
  headers['X-GitHub-Event'] = event;
  headers['X-GitHub-Event-Type'] = eventType;
  return { body, headers };
}

export interface PushOptions {
  /** refs/heads/… or refs/tags/… */
  readonly ref: string;
  /** The sha before the push; a made-up one by default, 40 zeros for a new ref. */
  readonly before?: string;
  /** The sha after the push; 40 zeros deletes the ref. */
  readonly after: string;
  readonly pusher: string;
  readonly author: { readonly name: string; readonly email: string };
  /**
   * One commit per entry, the last one `after`, listing these files. Left out: one commit listing
   * no file for a branch, none for a tag (as providers send a new tag). Null: no commit at all.
   */
  readonly files?: readonly FileLists[] | null;
  readonly repositoryUrl?: string;
}

export interface FileLists {
  readonly added?: readonly string[];
  readonly modified?: readonly string[];
  readonly removed?: readonly string[];
}

const ZERO_SHA = '0'.repeat(40);

function madeUpSha(seed: string): string {
  return createHash('sha1').update(seed).digest('hex');
}

/** A push payload in `provider`'s documented shape (from the fixtures), with these values. */
export function pushPayload(provider: GitProvider, opts: PushOptions): Record<string, any> {
  const deleted = opts.after === ZERO_SHA;
  const isTag = opts.ref.startsWith('refs/tags/');
  const before = opts.before ?? madeUpSha(`before ${opts.ref} ${opts.after}`);
  const lists = deleted || opts.files === null ? [] : (opts.files ?? (isTag ? [] : [{}]));
  const ids = lists.map((_, i) =>
    i === lists.length - 1 ? opts.after : madeUpSha(`${opts.after} ${i}`),
  );
  switch (provider) {
    case 'github':
      return githubPush(opts, before, deleted, lists, ids);
    case 'gitlab':
      return gitlabPush(opts, before, deleted, lists, ids, isTag);
    case 'gitea':
    case 'forgejo':
      return giteaPush(opts, before, deleted, lists, ids);
  }
}

function githubCommit(
  base: Record<string, any>,
  id: string,
  opts: PushOptions,
  files: FileLists,
): Record<string, any> {
  return {
    ...base,
    id,
    url: base.url.replace(base.id, id),
    author: { ...opts.author, username: opts.pusher },
    committer: { ...opts.author, username: opts.pusher },
    added: [...(files.added ?? [])],
    removed: [...(files.removed ?? [])],
    modified: [...(files.modified ?? [])],
  };
}

function githubPush(
  opts: PushOptions,
  before: string,
  deleted: boolean,
  lists: readonly FileLists[],
  ids: readonly string[],
): Record<string, any> {
  const payload = fixture('github-push');
  const base = payload.head_commit;
  const commits = lists.map((files, i) => githubCommit(base, ids[i]!, opts, files));
  return {
    ...payload,
    ref: opts.ref,
    before,
    after: opts.after,
    created: before === ZERO_SHA,
    deleted,
    base_ref: null,
    repository: withUrl(payload.repository, 'clone_url', opts.repositoryUrl),
    pusher: { name: opts.pusher, email: `${opts.pusher}@users.noreply.github.com` },
    sender: { ...payload.sender, login: opts.pusher },
    commits,
    head_commit: deleted ? null : (commits.at(-1) ?? githubCommit(base, opts.after, opts, {})),
  };
}

function gitlabPush(
  opts: PushOptions,
  before: string,
  deleted: boolean,
  lists: readonly FileLists[],
  ids: readonly string[],
  isTag: boolean,
): Record<string, any> {
  const payload = fixture(isTag ? 'gitlab-tag-push' : 'gitlab-push');
  const base = fixture('gitlab-push').commits[0];
  const commits = lists.map((files, i) => ({
    ...base,
    id: ids[i],
    url: base.url.replace(base.id, ids[i]),
    author: { ...opts.author },
    added: [...(files.added ?? [])],
    modified: [...(files.modified ?? [])],
    removed: [...(files.removed ?? [])],
  }));
  return {
    ...payload,
    ref: opts.ref,
    before,
    after: opts.after,
    checkout_sha: deleted ? null : opts.after,
    user_username: opts.pusher,
    user_name: opts.pusher,
    project: withUrl(payload.project, 'git_http_url', opts.repositoryUrl),
    repository: withUrl(payload.repository, 'git_http_url', opts.repositoryUrl),
    commits,
    total_commits_count: commits.length,
  };
}

function giteaPush(
  opts: PushOptions,
  before: string,
  deleted: boolean,
  lists: readonly FileLists[],
  ids: readonly string[],
): Record<string, any> {
  const payload = fixture('gitea-push');
  const base = payload.head_commit;
  const person = { ...opts.author, username: opts.pusher };
  const commit = (id: string, files: FileLists) => ({
    ...base,
    id,
    url: base.url.replace(base.id, id),
    author: person,
    committer: person,
    added: [...(files.added ?? [])],
    removed: [...(files.removed ?? [])],
    modified: [...(files.modified ?? [])],
  });
  const commits = lists.map((files, i) => commit(ids[i]!, files));
  const pusher = { ...payload.pusher, login: opts.pusher, username: opts.pusher };
  return {
    ...payload,
    ref: opts.ref,
    before,
    after: opts.after,
    compare_url: `${payload.repository.html_url}/compare/${before}...${opts.after}`,
    commits,
    total_commits: commits.length,
    head_commit: deleted ? null : (commits.at(-1) ?? commit(opts.after, {})),
    repository: withUrl(payload.repository, 'clone_url', opts.repositoryUrl),
    pusher,
    sender: pusher,
  };
}

function withUrl(
  repository: Record<string, any>,
  key: string,
  url: string | undefined,
): Record<string, any> {
  return url === undefined ? repository : { ...repository, [key]: url };
}

export interface PullRequestOptions {
  /** The provider's own word: GitHub opened/synchronize/closed, GitLab open/update/close, Gitea opened/synchronized/closed. */
  readonly action: string;
  readonly number: number;
  readonly headRef: string;
  readonly headSha: string;
  readonly baseRef: string;
  readonly sender: string;
}

/**
 * A pull request (GitLab: merge request) payload in `provider`'s documented shape. A GitLab
 * `update` carries `oldrev`, as GitLab sends it when the update brought new commits.
 */
export function pullRequestPayload(
  provider: GitProvider,
  opts: PullRequestOptions,
): Record<string, any> {
  switch (provider) {
    case 'github': {
      const payload = fixture('github-pull-request-opened');
      const pr = payload.pull_request;
      return {
        ...payload,
        action: opts.action,
        number: opts.number,
        pull_request: {
          ...pr,
          number: opts.number,
          state: opts.action === 'closed' ? 'closed' : 'open',
          user: { ...pr.user, login: opts.sender },
          head: {
            ...pr.head,
            ref: opts.headRef,
            sha: opts.headSha,
            label: `octo-org:${opts.headRef}`,
          },
          base: { ...pr.base, ref: opts.baseRef, label: `octo-org:${opts.baseRef}` },
        },
        sender: { ...payload.sender, login: opts.sender },
      };
    }
    case 'gitlab': {
      const payload = fixture('gitlab-merge-request-open');
      const attributes = payload.object_attributes;
      return {
        ...payload,
        user: { ...payload.user, username: opts.sender },
        object_attributes: {
          ...attributes,
          iid: opts.number,
          source_branch: opts.headRef,
          target_branch: opts.baseRef,
          action: opts.action,
          state: opts.action === 'close' ? 'closed' : 'opened',
          ...(opts.action === 'update' ? { oldrev: attributes.last_commit.id } : {}),
          last_commit: { ...attributes.last_commit, id: opts.headSha },
        },
      };
    }
    case 'gitea':
    case 'forgejo': {
      const payload = fixture('gitea-pull-request-opened');
      const pr = payload.pull_request;
      const sender = { ...payload.sender, login: opts.sender, username: opts.sender };
      return {
        ...payload,
        action: opts.action,
        number: opts.number,
        pull_request: {
          ...pr,
          number: opts.number,
          user: sender,
          state: opts.action === 'closed' ? 'closed' : 'open',
          head: { ...pr.head, ref: opts.headRef, label: opts.headRef, sha: opts.headSha },
          base: { ...pr.base, ref: opts.baseRef, label: opts.baseRef },
        },
        sender,
      };
    }
  }
}

/** The payload of GitHub's `ping`, sent when a webhook is created. */
export function pingPayload(): Record<string, any> {
  return fixture('github-ping');
}
