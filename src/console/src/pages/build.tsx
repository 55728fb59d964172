import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, tenantHeader, unwrap } from '../api/client.js';
import { ErrorNotice } from '../components/error-notice.js';
import { StatusBadge } from '../components/status-badge.js';
import { buildDuration, duration, shortCommit, when } from '../format.js';
import { expireSession } from '../expiry.js';
import { type Connection, type LogLine, followLive, readPages } from '../logs/log-source.js';
import { LogView } from '../logs/log-view.js';
import { can } from '../permissions.js';
import { usePoll } from '../poll.js';
import { queueLine } from '../queue.js';
import { link, navigate } from '../router.js';

const ACTIVE = new Set(['queued', 'in_progress']);

/** kiln's failure reasons (Build.failure_reason) as a user reads them. */
const REASONS: Readonly<Record<string, string>> = {
  BuildFailed: 'A build step failed',
  TimedOut: 'The build ran past its time limit',
  OutOfMemory: 'The build ran out of memory',
  PodEvicted: "The build's pod was evicted",
  PodDeleted: "The build's pod was deleted",
  InvalidSpec: 'The build settings are invalid',
  InternalError: 'kiln failed internally',
  ImagePullFailed: 'The builder image could not be pulled',
  PolicyViolation: "The image's scan findings break the scan policy",
  SecretUnavailable: 'A secret could not be read',
  RegistryUnauthorized: "The registry refused the build's credentials",
  QueueTimeout: 'The build waited too long to run',
  PodRefused: "The cluster refused the build's pod",
  Unschedulable: "No node could run the build's pod",
  ProvenanceFailed:
    "The build's provenance could not be signed or attached, and the tenant requires it",
};

type Build = Awaited<ReturnType<typeof fetchBuild>>['build'];

async function fetchBuild(id: string) {
  const params = { params: { path: { id }, header: tenantHeader() } };
  const [build, status] = await Promise.all([
    unwrap(api.GET('/api/v1/builds/{id}', params)),
    unwrap(api.GET('/api/v1/builds/{id}/status', params)),
  ]);
  return { build, status };
}

/** The answer, or undefined when the build has none (404): SBOM and scan are optional. */
async function optional<T>(call: Promise<T>): Promise<T | undefined> {
  try {
    return await call;
  } catch (failure) {
    if (failure instanceof ApiError && failure.status === 404) return undefined;
    throw failure;
  }
}

/**
 * One build: status, progress (step n of m, ETA), failure, SBOM and scan summaries, the actions
 * the role and the state allow, and the log (live over the WebSocket while the build may still
 * print, else the HTTP pages).
 */
export function BuildPage({ id }: { id: string }) {
  const [refresh, setRefresh] = useState(0);
  const polled = usePoll(
    `${id}:${refresh}`,
    () => fetchBuild(id),
    ({ build }) => ACTIVE.has(build.status),
  );
  const build = polled.data?.build;
  const status = polled.data?.status;

  return (
    <main id="main">
      <p>
        <a href="/" onClick={link('/')}>
          ← Builds
        </a>
      </p>
      {polled.error !== undefined && <ErrorNotice error={polled.error} />}
      {build !== undefined && status !== undefined && (
        <>
          <Summary build={build} status={status} />
          <Actions build={build} onChange={() => setRefresh((n) => n + 1)} />
          <Artifacts id={id} done={!ACTIVE.has(build.status)} />
          <Log id={id} build={build} onEnded={() => setRefresh((n) => n + 1)} />
        </>
      )}
    </main>
  );
}

function Summary({
  build,
  status,
}: {
  build: Build;
  status: Awaited<ReturnType<typeof fetchBuild>>['status'];
}) {
  const progress = status.progress;
  const eta = status.estimated_completion;
  const queue = status.queue ?? build.queue;
  const projectName = useProjectName(build.project_id);
  return (
    <section aria-labelledby="build-heading">
      <h1 id="build-heading">
        {projectName ?? 'Build'} #{build.build_number} <StatusBadge status={build.status} />
      </h1>
      <dl class="facts">
        <dt>Branch</dt>
        <dd>{build.git_branch ?? '—'}</dd>
        <dt>Commit</dt>
        <dd>
          <code>{shortCommit(build.git_commit) || '—'}</code>
        </dd>
        <dt>Author</dt>
        <dd>
          {build.git_author_name ?? '—'}
          {build.git_author_email ? ` <${build.git_author_email}>` : ''}
        </dd>
        <dt>Created</dt>
        <dd>{when(build.created_at)}</dd>
        <dt>Started</dt>
        <dd>{when(build.started_at) || '—'}</dd>
        <dt>Completed</dt>
        <dd>{when(build.completed_at) || '—'}</dd>
        <dt>Duration</dt>
        <dd>{buildDuration(build) ?? '—'}</dd>
        {build.image_digest && (
          <>
            <dt>Image</dt>
            <dd>
              <code>{(build.images ?? []).join(', ')}</code> <code>{build.image_digest}</code>
            </dd>
          </>
        )}
        {build.provenance && (
          <>
            <dt>Provenance</dt>
            <dd>
              {/* docs/provenance.md: attached, stored-only, or why it failed. */}
              <code>{build.provenance}</code>
            </dd>
          </>
        )}
      </dl>
      {queue && (
        <div class="queue">
          <h2>Waiting to run</h2>
          <p>
            <strong>{queueLine(queue)}</strong>
          </p>
          <p>
            {queue.message} (<code>{queue.reason}</code>)
          </p>
        </div>
      )}
      {progress && (
        <div class="progress">
          <label for="build-progress">
            Step {progress.current_step} of {progress.total_steps}
            {eta && build.status === 'in_progress' ? ` · ${timeLeft(Date.parse(eta))}` : ''}
          </label>
          <progress id="build-progress" max={100} value={progress.percentage}>
            {Math.round(progress.percentage)}%
          </progress>
        </div>
      )}
      {(build.failure_reason || build.error_message || status.error) && (
        <div class="failure" role="alert">
          <h2>Why it failed</h2>
          {build.failure_reason && (
            <p>
              <strong>{REASONS[build.failure_reason] ?? build.failure_reason}</strong> (
              <code>{build.failure_reason}</code>)
            </p>
          )}
          {(build.error_message ?? status.error) && <p>{build.error_message ?? status.error}</p>}
        </div>
      )}
    </section>
  );
}

/** The project's name, once GET /projects answered (the build names only its id). */
function useProjectName(projectId: string): string | undefined {
  const [name, setName] = useState<string>();
  useEffect(() => {
    let current = true;
    unwrap(api.GET('/api/v1/projects', { params: { header: tenantHeader() } })).then(
      (answer) => {
        if (current) setName(answer.projects.find((p) => p.id === projectId)?.name);
      },
      () => undefined, // the heading keeps "Build"; the page's own requests report failures
    );
    return () => {
      current = false;
    };
  }, [projectId]);
  return name;
}

/** The ETA as the user reads it: the project's median run time says when it usually ends. */
function timeLeft(etaMs: number): string {
  const left = etaMs - Date.now();
  return left > 0 ? `about ${duration(left)} left` : 'past its usual run time';
}

type Pending = 'cancel' | 'delete' | undefined;

/** Start, cancel (with a reason), retry and delete: each shown only when role and state allow it. */
function Actions({ build, onChange }: { build: Build; onChange: () => void }) {
  const [pending, setPending] = useState<Pending>();
  const [reason, setReason] = useState('');
  const [done, setDone] = useState('');
  const [error, setError] = useState<ApiError | undefined>();
  const params = { params: { path: { id: build.id }, header: tenantHeader() } };

  async function act(what: string, call: () => Promise<unknown>, after?: () => void) {
    setError(undefined);
    setDone('');
    try {
      await call();
      setPending(undefined);
      setDone(what);
      (after ?? onChange)();
    } catch (failure) {
      if (!(failure instanceof ApiError)) throw failure;
      setError(failure);
    }
  }

  const canStart = build.status === 'queued' && can('build:create');
  const canCancel = build.status === 'in_progress' && can('build:cancel');
  const canRetry = build.status === 'failed' && can('build:create');
  const canDelete = build.status !== 'in_progress' && can('build:delete');
  if (!canStart && !canCancel && !canRetry && !canDelete && done === '') return null;

  return (
    <section class="actions" aria-label="Actions">
      {canStart && (
        <button
          type="button"
          onClick={() =>
            void act('Build started.', () => unwrap(api.POST('/api/v1/builds/{id}/start', params)))
          }
        >
          Start
        </button>
      )}
      {canCancel && pending !== 'cancel' && (
        <button type="button" class="danger" onClick={() => setPending('cancel')}>
          Cancel…
        </button>
      )}
      {canRetry && (
        <button
          type="button"
          onClick={() =>
            void act(
              'Retry queued.',
              async () => {
                const retry = await unwrap(api.POST('/api/v1/builds/{id}/retry', params));
                navigate(`/builds/${retry.id}`);
              },
              () => undefined,
            )
          }
        >
          Retry
        </button>
      )}
      {canDelete && pending !== 'delete' && (
        <button type="button" class="danger" onClick={() => setPending('delete')}>
          Delete…
        </button>
      )}
      {pending === 'cancel' && (
        <CancelForm
          buildNumber={build.build_number}
          reason={reason}
          onReason={setReason}
          onCancel={() =>
            void act('Build cancelled.', () =>
              unwrap(
                api.POST('/api/v1/builds/{id}/cancel', {
                  ...params,
                  body: reason.trim() === '' ? {} : { reason: reason.trim() },
                }),
              ),
            )
          }
          onKeep={() => setPending(undefined)}
        />
      )}
      {pending === 'delete' && (
        <DeleteConfirm
          buildNumber={build.build_number}
          onDelete={() =>
            void act(
              'Build deleted.',
              () => unwrap(api.DELETE('/api/v1/builds/{id}', params)),
              () => navigate('/?deleted=1'),
            )
          }
          onKeep={() => setPending(undefined)}
        />
      )}
      <p role="status" class="done">
        {done}
      </p>
      {error !== undefined && <ErrorNotice error={error} />}
    </section>
  );
}

/** Cancel's confirmation: a reason (optional; Actions holds it), then cancel or keep it running. */
function CancelForm({
  buildNumber,
  reason,
  onReason,
  onCancel,
  onKeep,
}: {
  buildNumber: number;
  reason: string;
  onReason: (reason: string) => void;
  onCancel: () => void;
  onKeep: () => void;
}) {
  return (
    <form
      class="confirm"
      onSubmit={(event) => {
        event.preventDefault();
        onCancel();
      }}
    >
      <label for="cancel-reason">Reason (optional)</label>
      <input
        id="cancel-reason"
        value={reason}
        maxLength={1000}
        onInput={(event) => onReason(event.currentTarget.value)}
      />
      <button type="submit" class="danger">
        Cancel build #{buildNumber}
      </button>
      <button type="button" class="secondary" onClick={onKeep}>
        Keep it running
      </button>
    </form>
  );
}

/** Delete's confirmation: delete or keep. */
function DeleteConfirm({
  buildNumber,
  onDelete,
  onKeep,
}: {
  buildNumber: number;
  onDelete: () => void;
  onKeep: () => void;
}) {
  return (
    <div class="confirm" role="group" aria-label="Confirm delete">
      <p>Delete build #{buildNumber} and its log? This cannot be undone.</p>
      <button type="button" class="danger" onClick={onDelete}>
        Delete build #{buildNumber}
      </button>
      <button type="button" class="secondary" onClick={onKeep}>
        Keep it
      </button>
    </div>
  );
}

/** SBOM and scan summaries, once the build is over and when its steps uploaded them. */
function Artifacts({ id, done }: { id: string; done: boolean }) {
  const [sbom, setSbom] = useState<{
    tool: string;
    format: string;
    packages?: number;
    truncated: boolean;
  }>();
  const [scan, setScan] = useState<{ tool: string; summary: Record<string, number> }>();
  useEffect(() => {
    if (!done) return;
    const params = { params: { path: { id }, header: tenantHeader() } };
    void optional(unwrap(api.GET('/api/v1/builds/{id}/sbom', params))).then((answer) => {
      if (answer === undefined) return;
      const document = answer.document as { packages?: unknown[]; components?: unknown[] } | null;
      const packages = document?.packages?.length ?? document?.components?.length;
      setSbom({
        tool: answer.tool,
        format: answer.format,
        truncated: answer.truncated,
        ...(packages !== undefined && { packages }),
      });
    });
    void optional(unwrap(api.GET('/api/v1/builds/{id}/scan', params))).then((answer) => {
      if (answer !== undefined) setScan({ tool: answer.tool, summary: answer.summary });
    });
  }, [id, done]);
  if (sbom === undefined && scan === undefined) return null;
  return (
    <section aria-labelledby="artifacts-heading" class="artifacts">
      <h2 id="artifacts-heading">SBOM and scan</h2>
      {sbom && (
        <p>
          SBOM by {sbom.tool} ({sbom.format})
          {sbom.packages !== undefined ? `: ${sbom.packages} packages` : ''}
          {sbom.truncated ? ' · truncated (larger than the server keeps)' : ''}
        </p>
      )}
      {scan && (
        <p>
          Scan by {scan.tool}:{' '}
          {['critical', 'high', 'medium', 'low', 'negligible', 'unknown']
            .map((severity) => `${scan.summary[severity] ?? 0} ${severity}`)
            .join(', ')}
        </p>
      )}
    </section>
  );
}

/**
 * The log: live over the WebSocket while the build is queued or running (it replays from the
 * first line, then follows), else read in pages. Lines live in one array appended in place; the
 * view is told by `version`.
 */
function Log({ id, build, onEnded }: { id: string; build: Build; onEnded: () => void }) {
  const lines = useRef<LogLine[]>([]);
  const [version, setVersion] = useState(0);
  const [connection, setConnection] = useState<Connection>({ state: 'connecting' });
  const live = ACTIVE.has(build.status);
  const [mode] = useState<'live' | 'pages'>(live ? 'live' : 'pages');

  useEffect(() => {
    lines.current = [];
    const sink = {
      lines(batch: readonly LogLine[]) {
        for (const line of batch) {
          if (line.seq === lines.current.length) lines.current.push(line);
        }
        setVersion((v) => v + 1);
      },
      connection(next: Connection) {
        setConnection(next);
        if (next.state === 'ended' && mode === 'live') onEnded();
      },
      expired: expireSession,
    };
    return mode === 'live' ? followLive(id, 0, sink) : readPages(id, sink);
  }, [id, mode]);

  return (
    <LogView
      lines={lines.current}
      version={version}
      connection={connection}
      fileName={`build-${build.build_number}-${id.slice(0, 8)}.log`}
    />
  );
}
