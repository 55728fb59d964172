import { useEffect, useRef, useState } from 'preact/hooks';
import { api, tenantHeader, unwrap } from '../../api/client.js';
import type { components } from '../../api/schema.gen.js';
import { ErrorNotice } from '../../components/error-notice.js';
import { shortCommit, when } from '../../format.js';
import { can } from '../../permissions.js';
import { usePoll } from '../../poll.js';
import { link } from '../../router.js';
import { CheckboxField, SelectField, TextField, domId } from '../new-build/fields.js';
import type { Problems } from './forms.js';
import { Confirm, Done, NotAllowed, useOutcome } from './parts.js';
import { onFields } from './projects.js';
import {
  CONCURRENCY,
  EVENTS,
  OUTCOME_BADGE,
  PROVIDERS,
  TRIGGER_FIELDS,
  type TriggerConcurrency,
  type TriggerEvent,
  type TriggerProvider,
  triggerCreate,
  triggerForm,
} from './trigger-form.js';

type Trigger = components['schemas']['TriggerResponse'];
type WithSecret = components['schemas']['TriggerWithSecretResponse'];
type Delivery = components['schemas']['DeliveryResponse'];

const options = (labels: Readonly<Record<string, string>>) =>
  Object.entries(labels).map(([value, label]) => ({ value, label }));

/** /projects/<id>/triggers: a project's build triggers and their deliveries (`trigger:manage`). */
export function ProjectTriggers({ projectId }: { projectId: string }) {
  if (!can('trigger:manage')) {
    return <NotAllowed title="Triggers" what="manage the projects' build triggers" />;
  }
  return <TriggersPage projectId={projectId} />;
}

function TriggersPage({ projectId }: { projectId: string }) {
  const [version, setVersion] = useState(0);
  const [notice, setNotice] = useState('');
  // A secret lives in this component's state only: never in storage, gone with the page.
  const [secret, setSecret] = useState<WithSecret | undefined>();
  const [selected, setSelected] = useState<string | undefined>();
  const params = { params: { path: { id: projectId }, header: tenantHeader() } };
  const project = usePoll(
    projectId,
    () => unwrap(api.GET('/api/v1/projects/{id}', params)),
    () => false,
  );
  const list = usePoll(
    `${projectId}:${version}`,
    () => unwrap(api.GET('/api/v1/projects/{id}/triggers', params)),
    () => false,
  );
  const changed = (done: string) => {
    setNotice(done);
    setVersion((v) => v + 1);
  };
  const showSecret = (trigger: WithSecret, done: string) => {
    setSecret(trigger);
    changed(done);
  };
  const chosen = list.data?.triggers.find((trigger) => trigger.id === selected);
  const name = project.data?.name;

  return (
    <main id="main" class="admin">
      <p>
        <a href="/projects" onClick={link('/projects')}>
          ← Projects
        </a>
      </p>
      <h1>Triggers{name === undefined ? '' : ` of ${name}`}</h1>
      {project.error !== undefined && <ErrorNotice error={project.error} />}
      <p>
        A trigger builds the project when its repository changes: the git host sends a webhook,
        signed with the trigger's secret, to the trigger's webhook URL. See "Build on push" in
        kiln's documentation for what to paste where.
      </p>
      {secret !== undefined ? (
        <NewSecret trigger={secret} onDone={() => setSecret(undefined)} />
      ) : (
        <CreateTrigger
          projectId={projectId}
          onCreated={(created) => showSecret(created, `Trigger ${created.name} created.`)}
        />
      )}
      <h2>Triggers of this project</h2>
      {list.error !== undefined && <ErrorNotice error={list.error} />}
      <Done text={notice} />
      {list.data?.triggers.length === 0 && <p>No trigger yet.</p>}
      {list.data !== undefined && list.data.triggers.length > 0 && (
        <div class="table-wrap">
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Provider</th>
                <th scope="col">Events</th>
                <th scope="col">Branches</th>
                <th scope="col">Concurrency</th>
                <th scope="col">Polling</th>
                <th scope="col">Enabled</th>
                <th scope="col">Webhook URL</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.data.triggers.map((trigger) => (
                <TriggerRow
                  key={trigger.id}
                  trigger={trigger}
                  selected={trigger.id === selected}
                  onSelect={() => setSelected(trigger.id === selected ? undefined : trigger.id)}
                  onRotated={(rotated) =>
                    showSecret(rotated, `Trigger ${rotated.name} has a new secret.`)
                  }
                  onDeleted={() => {
                    if (trigger.id === selected) setSelected(undefined);
                    changed(`Trigger ${trigger.name} deleted.`);
                  }}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
      {chosen !== undefined && <Deliveries trigger={chosen} />}
    </main>
  );
}

function CreateTrigger({
  projectId,
  onCreated,
}: {
  projectId: string;
  onCreated: (trigger: WithSecret) => void;
}) {
  const [form, setForm] = useState(triggerForm());
  const [problems, setProblems] = useState<Problems>({});
  const outcome = useOutcome();

  async function submit(event: Event) {
    event.preventDefault();
    const request = triggerCreate(form);
    if ('problems' in request) {
      setProblems(request.problems);
      return;
    }
    setProblems({});
    const call = async () => {
      const created = await unwrap(
        api.POST('/api/v1/projects/{id}/triggers', {
          params: { path: { id: projectId }, header: tenantHeader() },
          body: request.body,
        }),
      );
      setForm(triggerForm());
      onCreated(created);
    };
    await outcome.run(call, '', onFields(TRIGGER_FIELDS, setProblems));
  }

  const toggle = (event: TriggerEvent, on: boolean) =>
    setForm((current) => ({
      ...current,
      events: (Object.keys(EVENTS) as TriggerEvent[]).filter((e) =>
        e === event ? on : current.events.includes(e),
      ),
    }));
  return (
    <form class="panel" onSubmit={(event) => void submit(event)}>
      <h2>Create a trigger</h2>
      <TextField
        field="trigger-name"
        label="Name"
        hint="Unique in the project, e.g. main-pushes."
        value={form.name}
        error={problems['name']}
        onValue={(name) => setForm({ ...form, name })}
      />
      <SelectField
        field="trigger-provider"
        label="Provider"
        hint="The git host that sends the webhooks."
        value={form.provider}
        error={problems['provider']}
        options={options(PROVIDERS)}
        onValue={(provider) => setForm({ ...form, provider: provider as TriggerProvider })}
      />
      <fieldset
        class="field"
        id="trigger-events"
        aria-describedby="trigger-events-hint trigger-events-error"
      >
        <legend>Events</legend>
        <p id="trigger-events-hint" class="hint muted">
          What builds. A pull request builds its head commit.
        </p>
        {(Object.keys(EVENTS) as TriggerEvent[]).map((event) => (
          <CheckboxField
            key={event}
            field={`trigger-event-${event}`}
            label={EVENTS[event]}
            checked={form.events.includes(event)}
            onValue={(on) => toggle(event, on)}
          />
        ))}
        <p id="trigger-events-error" class="field-error" aria-live="polite">
          {problems['events'] ?? ''}
        </p>
      </fieldset>
      <TextField
        field="trigger-branches"
        label="Branches"
        hint="Glob patterns of branch names, separated by spaces or commas: main release/*. Empty: every branch. A pull request is matched by its target branch."
        value={form.branches}
        error={problems['branches']}
        onValue={(branches) => setForm({ ...form, branches })}
      />
      <SelectField
        field="trigger-concurrency"
        label="Concurrency"
        hint="How the builds of one branch run together."
        value={form.concurrency}
        error={problems['concurrency']}
        options={options(CONCURRENCY)}
        onValue={(concurrency) =>
          setForm({ ...form, concurrency: concurrency as TriggerConcurrency })
        }
      />
      <button type="submit" disabled={outcome.busy}>
        Create trigger
      </button>
      {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
    </form>
  );
}

/** Where each git host takes the URL and the secret (docs/build-on-push.md has the rest). */
const WHERE_TO_PASTE: Readonly<Record<TriggerProvider, string>> = {
  github:
    'In the GitHub repository: Settings → Webhooks → Add webhook. Payload URL: the webhook URL; content type: application/json; Secret: the secret.',
  gitlab:
    'In the GitLab project: Settings → Webhooks → Add new webhook. URL: the webhook URL; Secret token: the secret.',
  gitea:
    'In the Gitea repository: Settings → Webhooks → Add webhook → Gitea. Target URL: the webhook URL; content type: application/json; Secret: the secret.',
  forgejo:
    'In the Forgejo repository: Settings → Webhooks → Add webhook → Forgejo. Target URL: the webhook URL; content type: application/json; Secret: the secret.',
};

/**
 * A trigger just created, or whose secret was rotated, with its secret shown this once: kiln
 * keeps it sealed. Focus moves here so the warning is read first; Done forgets it.
 */
function NewSecret({ trigger, onDone }: { trigger: WithSecret; onDone: () => void }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [trigger]);
  return (
    <section class="panel new-secret" aria-labelledby="new-secret-heading">
      <h2 id="new-secret-heading" ref={heading} tabIndex={-1}>
        The webhook of {trigger.name}
      </h2>
      <p class="warning" role="alert">
        Copy the secret now: it will not be shown again. kiln keeps it sealed; if it is lost, rotate
        it and paste the new one.
      </p>
      <p>{WHERE_TO_PASTE[trigger.provider]}</p>
      <CopyField field="new-trigger-url" label="Webhook URL" value={trigger.webhook_url} />
      <CopyField field="new-trigger-secret" label="Secret" value={trigger.secret} />
      <button type="button" class="secondary" onClick={onDone}>
        Done, I have copied it
      </button>
    </section>
  );
}

/** A read-only value with a Copy button; where the clipboard refuses, the value is selected. */
function CopyField({ field, label, value }: { field: string; label: string; value: string }) {
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState('');
  async function copy() {
    try {
      await navigator.clipboard.writeText(value);
      setCopied(`${label} copied to the clipboard.`);
    } catch {
      input.current?.select();
      setCopied(`The clipboard is not available here: the ${label} is selected, copy it by hand.`);
    }
  }
  const id = domId(field);
  return (
    <>
      <label for={id}>{label}</label>
      <div class="copy-row">
        <input
          id={id}
          ref={input}
          readOnly
          spellcheck={false}
          autocomplete="off"
          value={value}
          onFocus={(event) => event.currentTarget.select()}
        />
        <button type="button" aria-label={`Copy the ${label}`} onClick={() => void copy()}>
          Copy
        </button>
      </div>
      <Done text={copied} />
    </>
  );
}

function TriggerRow({
  trigger,
  selected,
  onSelect,
  onRotated,
  onDeleted,
}: {
  trigger: Trigger;
  selected: boolean;
  onSelect: () => void;
  onRotated: (rotated: WithSecret) => void;
  onDeleted: () => void;
}) {
  const outcome = useOutcome();
  const path = { params: { path: { id: trigger.id }, header: tenantHeader() } };
  const rotate = () =>
    outcome.run(
      async () => onRotated(await unwrap(api.POST('/api/v1/triggers/{id}/secret', path))),
      '',
    );
  const remove = async () => {
    const call = () => unwrap(api.DELETE('/api/v1/triggers/{id}', path));
    if (await outcome.run(call, '')) onDeleted();
  };
  return (
    <tr>
      <th scope="row">{trigger.name}</th>
      <td>{PROVIDERS[trigger.provider]}</td>
      <td>{trigger.events.join(', ')}</td>
      <td class="wrap">
        <code>{trigger.branches.join(' ')}</code>
      </td>
      <td>{trigger.concurrency}</td>
      <td class="wrap">
        {trigger.poll_interval_seconds === null
          ? 'off'
          : `every ${trigger.poll_interval_seconds} s`}
        {trigger.poll_error !== null && (
          <p class="error">The last poll failed: {trigger.poll_error}</p>
        )}
      </td>
      <td>{trigger.enabled ? 'yes' : 'no'}</td>
      <td class="wrap">
        <WebhookUrl trigger={trigger} />
      </td>
      <td class="row-actions">
        <button type="button" class="secondary" aria-pressed={selected} onClick={onSelect}>
          Deliveries
        </button>
        <Confirm
          action="Rotate secret"
          question={`Give ${trigger.name} a new secret? Deliveries signed with the old one are refused from then on: paste the new one into the git host.`}
          confirm={`Rotate the secret of ${trigger.name}`}
          onConfirm={() => void rotate()}
        />
        <Confirm
          action="Delete"
          question={`Delete trigger ${trigger.name} and its deliveries? The builds it made stay.`}
          confirm={`Delete ${trigger.name}`}
          onConfirm={() => void remove()}
        />
        {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
      </td>
    </tr>
  );
}

/** The webhook URL in a list row, with a Copy button (no secret here: it is never listed). */
function WebhookUrl({ trigger }: { trigger: Trigger }) {
  const code = useRef<HTMLElement>(null);
  const [copied, setCopied] = useState('');
  async function copy() {
    try {
      await navigator.clipboard.writeText(trigger.webhook_url);
      setCopied('Copied.');
    } catch {
      if (code.current !== null) window.getSelection()?.selectAllChildren(code.current);
      setCopied('Selected: copy it by hand.');
    }
  }
  return (
    <>
      <code ref={code}>{trigger.webhook_url}</code>{' '}
      <button
        type="button"
        class="secondary"
        aria-label={`Copy the webhook URL of ${trigger.name}`}
        onClick={() => void copy()}
      >
        Copy
      </button>
      <Done text={copied} />
    </>
  );
}

/**
 * The selected trigger's newest deliveries. While shown they are read again every few seconds
 * (the poll's rate, a visible tab only): an admin setting up a webhook watches for the host's
 * first delivery here.
 */
function Deliveries({ trigger }: { trigger: Trigger }) {
  const polled = usePoll(
    trigger.id,
    () =>
      unwrap(
        api.GET('/api/v1/triggers/{id}/deliveries', {
          params: { path: { id: trigger.id }, header: tenantHeader() },
        }),
      ),
    () => true,
  );
  const deliveries = polled.data?.deliveries;
  // Shown under the list, maybe out of sight: focus goes there, as it does to a new secret.
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [trigger.id]);
  return (
    <section aria-labelledby="deliveries-heading">
      <h2 id="deliveries-heading" ref={heading} tabIndex={-1}>
        Recent deliveries of {trigger.name}
      </h2>
      <p class="muted">
        The newest 100 webhook deliveries and polled changes, newest first, and what came of each.
      </p>
      {polled.error !== undefined && <ErrorNotice error={polled.error} />}
      {deliveries?.length === 0 && (
        <p>No delivery yet: the git host has sent nothing, or sent it elsewhere.</p>
      )}
      {deliveries !== undefined && deliveries.length > 0 && (
        <div class="table-wrap">
          <table class="list" aria-labelledby="deliveries-heading">
            <thead>
              <tr>
                <th scope="col">Received</th>
                <th scope="col">Event</th>
                <th scope="col">Ref</th>
                <th scope="col">Commit</th>
                <th scope="col">Pusher</th>
                <th scope="col">Outcome</th>
                <th scope="col">Detail</th>
                <th scope="col">Build</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.map((delivery) => (
                <DeliveryRow key={delivery.id} delivery={delivery} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function DeliveryRow({ delivery }: { delivery: Delivery }) {
  const build = delivery.build_id;
  return (
    <tr>
      <td>{when(delivery.received_at)}</td>
      <td>{delivery.event}</td>
      <td>
        <code>{delivery.ref ?? ''}</code>
      </td>
      <td>
        <code>{shortCommit(delivery.commit)}</code>
      </td>
      <td>{delivery.pusher ?? ''}</td>
      <td>
        <span class={`badge badge-${OUTCOME_BADGE[delivery.outcome]}`}>{delivery.outcome}</span>
      </td>
      <td class="wrap">{delivery.detail ?? ''}</td>
      <td>
        {build !== null && (
          <a href={`/builds/${build}`} onClick={link(`/builds/${build}`)}>
            Build {build.slice(0, 8)}
          </a>
        )}
      </td>
    </tr>
  );
}
