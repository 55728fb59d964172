import { randomBytes } from 'node:crypto';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';

/**
 * A git host's commit status API on 127.0.0.1, as GitHub, GitLab or Gitea/Forgejo document it,
 * only as much of it as kiln's status posters use:
 * - GitHub "Create a commit status", `POST /repos/{owner}/{repo}/statuses/{sha}`, JSON
 *   `{ state: error|failure|pending|success, target_url, description, context }`, a token in
 *   `Authorization: Bearer` (or `token`), a `User-Agent` required; 201 with the status.
 *   https://docs.github.com/en/rest/commits/statuses#create-a-commit-status
 * - GitLab "Set the pipeline status of a commit", `POST /api/v4/projects/{id}/statuses/{sha}`, the
 *   project's path URL-encoded, JSON or form fields `state: pending|running|success|failed|
 *   canceled`, `name` or `context`, `target_url`, `description`, a `PRIVATE-TOKEN` header; 201. A
 *   pending or running status moves through GitLab's state machine, which refuses a move to the
 *   state it is in with 400 `Cannot transition status via :run from :running`.
 *   https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit
 * - Gitea and Forgejo `repoCreateStatus`, `POST /api/v1/repos/{owner}/{repo}/statuses/{sha}`,
 *   JSON `{ state: pending|success|error|failure|warning, target_url, description, context }`,
 *   `Authorization: token …`; 201 with the CommitStatus.
 *   https://docs.gitea.com/api, https://docs.gitea.com/development/api-usage
 *
 * Simplifications: one token, allowed to post to every repository that exists; any 40- or 64-hex
 * sha is a commit of every repository; GitLab's `ref` is ignored.
 */

export type GitHostKind = 'github' | 'gitlab' | 'gitea' | 'forgejo';

export interface ReceivedRequest {
  readonly method: string;
  /** Path and query as sent, e.g. `/api/v4/projects/group%2Fapp/statuses/…`. */
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The body parsed as JSON or as a form; the raw text when it is neither. */
  readonly body: unknown;
}

/** A status the host accepted, in the provider's words. */
export interface HostedStatus {
  readonly id: number;
  /** `owner/name`, or GitLab's project path or id, decoded. */
  readonly repository: string;
  readonly sha: string;
  readonly state: string;
  readonly context: string;
  readonly targetUrl: string | null;
  readonly description: string | null;
}

export interface FakeGitHostOptions {
  readonly provider: GitHostKind;
  /** The one token the host accepts. */
  readonly token: string;
  /** The repositories that exist; every one when absent. */
  readonly repositories?: readonly string[];
}

interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Record<string, string>;
}

const STATES: Record<GitHostKind, readonly string[]> = {
  github: ['pending', 'success', 'failure', 'error'],
  gitlab: ['pending', 'running', 'success', 'failed', 'canceled'],
  gitea: ['pending', 'success', 'error', 'failure', 'warning'],
  forgejo: ['pending', 'success', 'error', 'failure', 'warning'],
};

const ROUTES: Record<GitHostKind, RegExp> = {
  github: /^\/repos\/([^/]+)\/([^/]+)\/statuses\/([^/]+)$/,
  gitlab: /^\/api\/v4\/projects\/([^/]+)\/statuses\/([^/]+)$/,
  gitea: /^\/api\/v1\/repos\/([^/]+)\/([^/]+)\/statuses\/([^/]+)$/,
  forgejo: /^\/api\/v1\/repos\/([^/]+)\/([^/]+)\/statuses\/([^/]+)$/,
};

const BASE_PATHS: Record<GitHostKind, string> = {
  github: '',
  gitlab: '/api/v4',
  gitea: '/api/v1',
  forgejo: '/api/v1',
};

/** GitLab's state machine event for each state, as its errors name them. */
const GITLAB_EVENTS: Record<string, string> = {
  pending: 'enqueue',
  running: 'run',
  success: 'success',
  failed: 'drop',
  canceled: 'cancel',
};

export class FakeGitHost {
  readonly received: ReceivedRequest[] = [];
  private readonly hosted: HostedStatus[] = [];
  private readonly failures: Array<{ status: number; headers: Record<string, string> }> = [];
  private readonly sockets = new Set<Socket>();
  private hangs = 0;
  private isDown = false;
  private nextId = 1;
  private origin = '';
  private readonly server: Server;

  private constructor(private readonly options: FakeGitHostOptions) {
    this.server = createServer((request, response) => {
      this.handle(request, response).catch((error: unknown) => {
        response.destroy(error instanceof Error ? error : new Error(String(error)));
      });
    });
    this.server.on('connection', (socket: Socket) => {
      if (this.isDown) {
        socket.destroy();
        return;
      }
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  static async start(options: FakeGitHostOptions): Promise<FakeGitHost> {
    const host = new FakeGitHost(options);
    await new Promise<void>((done) => host.server.listen(0, '127.0.0.1', done));
    const { port } = host.server.address() as { port: number };
    host.origin = `http://127.0.0.1:${port}`;
    return host;
  }

  /** The API's base URL, as a trigger's `api_url` names it (GitLab `/api/v4`, Gitea `/api/v1`). */
  get url(): string {
    return this.origin + BASE_PATHS[this.options.provider];
  }

  /** The next `count` requests are answered `status` with the provider's error body. */
  failNext(count: number, status: number, headers: Record<string, string> = {}): void {
    for (let i = 0; i < count; i++) this.failures.push({ status, headers });
  }

  /** The next `count` requests are read and never answered (until close()). */
  hangNext(count: number): void {
    this.hangs += count;
  }

  /** Every connection is closed at once, open ones and new ones, until up(). */
  down(): void {
    this.isDown = true;
    for (const socket of this.sockets) socket.destroy();
  }

  up(): void {
    this.isDown = false;
  }

  /** The statuses accepted for `sha`, oldest first (a GitLab update in place is one more entry). */
  statuses(sha: string): HostedStatus[] {
    return this.hosted.filter((status) => status.sha === sha);
  }

  async close(): Promise<void> {
    const closed = new Promise((done) => this.server.close(done));
    this.server.closeAllConnections();
    await closed;
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const text = await readBody(request);
    this.received.push({
      method: request.method ?? '',
      path: request.url ?? '',
      headers: request.headers,
      body: parseBody(request.headers['content-type'], text),
    });
    if (this.isDown) {
      request.socket.destroy();
      return;
    }
    if (this.hangs > 0) {
      this.hangs--;
      return;
    }
    const failure = this.failures.shift();
    const answer =
      failure === undefined
        ? this.answer(request, text)
        : { ...this.error(failure.status, `injected ${failure.status}`), headers: failure.headers };
    response.writeHead(answer.status, {
      'content-type': 'application/json; charset=utf-8',
      ...answer.headers,
    });
    response.end(JSON.stringify(answer.body));
  }

  private answer(request: IncomingMessage, text: string): Answer {
    const { provider } = this.options;
    const path = (request.url ?? '/').split('?')[0] ?? '/';
    const route = ROUTES[provider].exec(path);
    if (request.method !== 'POST' || route === null) return this.error(404, 'Not Found');
    const denied = this.authenticate(request.headers);
    if (denied !== undefined) return denied;

    const parts = route.slice(1).map((part) => decodeURIComponent(part));
    const sha = parts.pop() ?? '';
    const repository = parts.join('/');
    if (this.options.repositories?.includes(repository) === false) {
      return this.error(404, provider === 'gitlab' ? '404 Project Not Found' : 'Not Found');
    }
    if (!/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(sha)) {
      return provider === 'github'
        ? this.error(422, `No commit found for SHA: ${sha}`)
        : this.error(404, provider === 'gitlab' ? '404 Commit Not Found' : 'Not Found');
    }
    const body = parseBody(request.headers['content-type'], text);
    if (typeof body !== 'object' || body === null) {
      return this.error(400, provider === 'github' ? 'Problems parsing JSON' : 'bad request body');
    }
    return this.post(repository, sha, body as Record<string, unknown>);
  }

  private authenticate(headers: IncomingHttpHeaders): Answer | undefined {
    const { provider, token } = this.options;
    const authorization = headers.authorization;
    const bearerOrToken = authorization === `Bearer ${token}` || authorization === `token ${token}`;
    switch (provider) {
      case 'github':
        if (headers['user-agent'] === undefined) {
          return this.error(
            403,
            'Request forbidden by administrative rules. Please make sure your request has a User-Agent header',
          );
        }
        if (bearerOrToken) return undefined;
        return this.error(
          401,
          authorization === undefined ? 'Requires authentication' : 'Bad credentials',
        );
      case 'gitlab':
        if (headers['private-token'] === token || authorization === `Bearer ${token}`)
          return undefined;
        return this.error(401, '401 Unauthorized');
      case 'gitea':
      case 'forgejo':
        if (bearerOrToken) return undefined;
        return this.error(401, 'token is required');
    }
  }

  private post(repository: string, sha: string, body: Record<string, unknown>): Answer {
    const { provider } = this.options;
    const state = stringOr(body.state, '');
    if (!STATES[provider].includes(state)) {
      return provider === 'gitlab'
        ? { status: 400, body: { error: 'state does not have a valid value' } }
        : this.error(422, `invalid state ${JSON.stringify(state)}`);
    }
    const description = stringOr(body.description, null);
    if (provider === 'github' && description !== null && Array.from(description).length > 140) {
      return this.error(422, 'description is too long (maximum is 140 characters)');
    }
    const context = stringOr(
      provider === 'gitlab' ? (body.name ?? body.context) : body.context,
      'default',
    );
    const status: HostedStatus = {
      id: this.nextId++,
      repository,
      sha,
      state,
      context,
      targetUrl: stringOr(body.target_url, null),
      description,
    };
    if (provider === 'gitlab') {
      const refused = this.gitlabTransition(status);
      if (refused !== undefined) return refused;
    }
    this.hosted.push(status);
    return { status: 201, body: this.representation(status) };
  }

  /** GitLab moves a pending or running status in place, and never to the state it is in. */
  private gitlabTransition(status: HostedStatus): Answer | undefined {
    const current = this.hosted.findLast(
      (s) =>
        s.repository === status.repository && s.sha === status.sha && s.context === status.context,
    );
    if (current === undefined || !['pending', 'running'].includes(current.state)) return undefined;
    const event = GITLAB_EVENTS[status.state] ?? status.state;
    if (
      status.state === current.state ||
      (status.state === 'pending' && current.state === 'running')
    ) {
      return {
        status: 400,
        body: {
          message: `Cannot transition status via :${event} from :${current.state} (Reason(s): Status cannot transition via "${event}")`,
        },
      };
    }
    return undefined;
  }

  private representation(status: HostedStatus): Record<string, unknown> {
    const now = new Date().toISOString();
    const creator = { id: 1, login: 'kiln-bot', username: 'kiln-bot' };
    switch (this.options.provider) {
      case 'github':
        return {
          url: `${this.url}/repos/${status.repository}/statuses/${status.sha}`,
          avatar_url: null,
          id: status.id,
          node_id: Buffer.from(`Status${status.id}`).toString('base64'),
          state: status.state,
          description: status.description,
          target_url: status.targetUrl,
          context: status.context,
          created_at: now,
          updated_at: now,
          creator,
        };
      case 'gitlab':
        return {
          id: status.id,
          sha: status.sha,
          ref: 'main',
          status: status.state,
          name: status.context,
          target_url: status.targetUrl,
          description: status.description,
          created_at: now,
          started_at: status.state === 'pending' ? null : now,
          finished_at: ['success', 'failed', 'canceled'].includes(status.state) ? now : null,
          allow_failure: false,
          coverage: null,
          author: creator,
        };
      case 'gitea':
      case 'forgejo':
        return {
          id: status.id,
          status: status.state,
          target_url: status.targetUrl,
          description: status.description,
          url: `${this.url}/repos/${status.repository}/statuses/${status.sha}`,
          context: status.context,
          creator,
          created_at: now,
          updated_at: now,
        };
    }
  }

  /** An error answer in the provider's shape. */
  private error(status: number, message: string): Answer {
    switch (this.options.provider) {
      case 'github':
        return {
          status,
          body: {
            message: status === 422 ? 'Validation Failed' : message,
            ...(status === 422
              ? { errors: [{ resource: 'Status', code: 'custom', message }] }
              : {}),
            documentation_url:
              'https://docs.github.com/rest/commits/statuses#create-a-commit-status',
            status: String(status),
          },
        };
      case 'gitlab':
        return { status, body: { message } };
      case 'gitea':
      case 'forgejo':
        return { status, body: { message, url: `${this.origin}/api/swagger` } };
    }
  }
}

/** A token shaped as each provider's own (only for telling them apart in a failing test). */
export function fakeToken(provider: GitHostKind): string {
  const random = randomBytes(18).toString('hex');
  return provider === 'github'
    ? `ghp_${random}`
    : provider === 'gitlab'
      ? `glpat-${random}`
      : random;
}

function stringOr<T extends string | null>(value: unknown, fallback: T): string | T {
  return typeof value === 'string' ? value : fallback;
}

function parseBody(contentType: string | undefined, text: string): unknown {
  if (contentType?.startsWith('application/x-www-form-urlencoded') === true) {
    return Object.fromEntries(new URLSearchParams(text));
  }
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
