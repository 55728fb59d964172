import type { EnvReader } from './reader.js';

/** GitHub's largest webhook payload: what a delivery may weigh unless configured otherwise. */
const GITHUB_MAX_PAYLOAD_BYTES = 25 * 1024 * 1024;

/** Builds from git pushes (docs/build-on-push.md, docs/adr/0053-triggers.md). */
export function readTriggers(read: EnvReader, port: number) {
  return {
    triggers: {
      /**
       * Where people reach kiln's console: commit statuses link to `<url>/builds/<id>`, and the
       * trigger's webhook URL is shown as `<url>/api/v1/hooks/<id>`.
       */
      publicUrl: read.httpUrl('KILN_PUBLIC_URL') ?? `http://localhost:${port}`,
      /** The largest webhook body read; a larger one is refused with 413 unread. */
      webhookMaxBodyBytes: read.integer(
        'KILN_WEBHOOK_MAX_BODY_BYTES',
        GITHUB_MAX_PAYLOAD_BYTES,
        1024,
        100 * 1024 * 1024,
      ),
      /** Deliveries one trigger may receive per rate-limit window (KILN_RATE_LIMIT_WINDOW_SECONDS); more are answered 429. 0: no limit. */
      webhookRateLimit: read.integer('KILN_WEBHOOK_RATE_LIMIT', 60, 0, 100_000),
      /** How often a replica looks for polls, commit statuses and serial builds that are due. */
      workIntervalMs: read.integer('KILN_TRIGGER_WORK_INTERVAL_MS', 5_000, 100, 300_000),
      /** How long one `git ls-remote` may take. */
      pollTimeoutMs: read.integer('KILN_POLL_TIMEOUT_SECONDS', 60, 1, 3600) * 1000,
    },
  };
}

export type TriggerSettings = ReturnType<typeof readTriggers>['triggers'];
