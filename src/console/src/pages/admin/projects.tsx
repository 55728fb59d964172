import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, tenantHeader, unwrap } from '../../api/client.js';
import type { components } from '../../api/schema.gen.js';
import { ErrorNotice } from '../../components/error-notice.js';
import { when } from '../../format.js';
import { can } from '../../permissions.js';
import { usePoll } from '../../poll.js';
import { link } from '../../router.js';
import { TextField } from '../new-build/fields.js';
import {
  type ProjectForm,
  type Problems,
  placeDetails,
  projectChange,
  projectCreate,
  projectForm,
} from './forms.js';
import { Confirm, Done, NotAllowed, OutcomeLines, useOutcome } from './parts.js';

type Project = components['schemas']['ProjectResponse'];
const PROJECT_FIELDS = ['name', 'git_repository_url', 'default_registry'] as const;

/** A 400 with details on the form's fields: they go there; anything else is the form's notice. */
export function onFields(fields: readonly string[], show: (problems: Problems) => void) {
  return (error: ApiError): boolean => {
    const { placed, rest } = placeDetails(error.details, fields);
    show(placed);
    return error.status === 400 && rest.length === 0 && Object.keys(placed).length > 0;
  };
}

/** /projects: the tenant's projects (`project:manage`), and their git credentials (`settings:manage`). */
export function Projects() {
  if (!can('project:manage')) return <NotAllowed title="Projects" what="manage its projects" />;
  return <ProjectsPage />;
}

function ProjectsPage() {
  const [version, setVersion] = useState(0);
  const [notice, setNotice] = useState('');
  const list = usePoll(
    String(version),
    () => unwrap(api.GET('/api/v1/projects', { params: { header: tenantHeader() } })),
    () => false,
  );
  const changed = (done: string) => {
    setNotice(done);
    setVersion((v) => v + 1);
  };
  return (
    <main id="main" class="admin">
      <h1>Projects</h1>
      <CreateProject onCreated={changed} />
      <h2>Projects of this tenant</h2>
      {list.error !== undefined && <ErrorNotice error={list.error} />}
      <Done text={notice} />
      {list.data?.projects.length === 0 && <p>No project yet.</p>}
      {list.data !== undefined && list.data.projects.length > 0 && (
        <div class="table-wrap">
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Repository</th>
                <th scope="col">Default registry</th>
                <th scope="col">Created</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.data.projects.map((project) => (
                <ProjectRow key={project.id} project={project} onChange={changed} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </main>
  );
}

/** Name, repository and default registry, with the server's messages beside them. */
function ProjectFields({
  prefix,
  form,
  problems,
  onForm,
}: {
  prefix: string;
  form: ProjectForm;
  problems: Problems;
  onForm: (form: ProjectForm) => void;
}) {
  return (
    <>
      <TextField
        field={`${prefix}-name`}
        label="Name"
        value={form.name}
        error={problems['name']}
        onValue={(name) => onForm({ ...form, name })}
      />
      <TextField
        field={`${prefix}-repository`}
        label="Git repository URL"
        hint="https://, ssh://, git:// or user@host:path, without credentials (set them as git credentials)."
        value={form.git_repository_url}
        error={problems['git_repository_url']}
        onValue={(git_repository_url) => onForm({ ...form, git_repository_url })}
      />
      <TextField
        field={`${prefix}-registry`}
        label="Default registry"
        hint="host[:port][/path]: where builds that name no repository push their images."
        value={form.default_registry}
        error={problems['default_registry']}
        onValue={(default_registry) => onForm({ ...form, default_registry })}
      />
    </>
  );
}

function CreateProject({ onCreated }: { onCreated: (done: string) => void }) {
  const [form, setForm] = useState(projectForm());
  const [problems, setProblems] = useState<Problems>({});
  const outcome = useOutcome();

  async function submit(event: Event) {
    event.preventDefault();
    setProblems({});
    const body = projectCreate(form);
    const created = await outcome.run(
      () => unwrap(api.POST('/api/v1/projects', { params: { header: tenantHeader() }, body })),
      `Project ${body.name} created.`,
      onFields(PROJECT_FIELDS, setProblems),
    );
    if (!created) return;
    setForm(projectForm());
    onCreated(`Project ${body.name} created.`);
  }

  return (
    <form class="panel" onSubmit={(event) => void submit(event)}>
      <h2>Create a project</h2>
      <ProjectFields prefix="new-project" form={form} problems={problems} onForm={setForm} />
      <button type="submit" disabled={outcome.busy || form.name.trim() === ''}>
        Create project
      </button>
      {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
    </form>
  );
}

type Open = 'edit' | 'credentials' | undefined;

const triggersPath = (id: string) => `/projects/${id}/triggers`;

/** One project, with Edit and Git credentials opening a form under it, and Delete asking first. */
function ProjectRow({ project, onChange }: { project: Project; onChange: (done: string) => void }) {
  const [open, setOpen] = useState<Open>();
  const outcome = useOutcome();
  const toggle = (what: Open) => setOpen((current) => (current === what ? undefined : what));
  const remove = async () => {
    const call = () =>
      unwrap(
        api.DELETE('/api/v1/projects/{id}', {
          params: { path: { id: project.id }, header: tenantHeader() },
        }),
      );
    if (await outcome.run(call, '')) onChange(`Project ${project.name} deleted.`);
  };

  return (
    <>
      <tr>
        <th scope="row">{project.name}</th>
        <td>
          <code>{project.git_repository_url ?? '—'}</code>
        </td>
        <td>
          <code>{project.default_registry ?? '—'}</code>
        </td>
        <td>{when(project.created_at)}</td>
        <td class="row-actions">
          <button
            type="button"
            class="secondary"
            aria-expanded={open === 'edit'}
            onClick={() => toggle('edit')}
          >
            Edit
          </button>
          {can('settings:manage') && (
            <button
              type="button"
              class="secondary"
              aria-expanded={open === 'credentials'}
              onClick={() => toggle('credentials')}
            >
              Git credentials
            </button>
          )}
          {can('trigger:manage') && (
            <a
              class="button secondary"
              href={triggersPath(project.id)}
              onClick={link(triggersPath(project.id))}
              aria-label={`Triggers of ${project.name}`}
            >
              Triggers
            </a>
          )}
          <Confirm
            action="Delete"
            question={`Delete project ${project.name}? A project with builds cannot be deleted: delete its builds first.`}
            confirm={`Delete ${project.name}`}
            onConfirm={() => void remove()}
          />
          {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
        </td>
      </tr>
      {open !== undefined && (
        <tr class="row-panel">
          <td colSpan={5}>
            {open === 'edit' ? (
              <EditProject
                project={project}
                onSaved={(done) => {
                  setOpen(undefined);
                  onChange(done);
                }}
              />
            ) : (
              <GitCredentials project={project} />
            )}
          </td>
        </tr>
      )}
    </>
  );
}

function EditProject({ project, onSaved }: { project: Project; onSaved: (done: string) => void }) {
  const [form, setForm] = useState(projectForm(project));
  const [problems, setProblems] = useState<Problems>({});
  const outcome = useOutcome();
  const body = projectChange(project, form);
  const unchanged = Object.keys(body).length === 0;

  async function submit(event: Event) {
    event.preventDefault();
    setProblems({});
    const call = () =>
      unwrap(
        api.PATCH('/api/v1/projects/{id}', {
          params: { path: { id: project.id }, header: tenantHeader() },
          body,
        }),
      );
    const name = body.name ?? project.name;
    if (await outcome.run(call, '', onFields(PROJECT_FIELDS, setProblems))) {
      onSaved(`Project ${name} saved.`);
    }
  }

  return (
    <form onSubmit={(event) => void submit(event)} aria-label={`Edit ${project.name}`}>
      <h3>Edit {project.name}</h3>
      <p class="muted">
        An emptied repository or registry is removed. Builds already created keep what they were
        created with.
      </p>
      <ProjectFields
        prefix={`edit-${project.id}`}
        form={form}
        problems={problems}
        onForm={setForm}
      />
      <button type="submit" disabled={outcome.busy || unchanged}>
        Save {project.name}
      </button>
      {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
    </form>
  );
}

const CREDENTIAL_FIELDS = ['username', 'password'] as const;

/**
 * What builds of the project clone with: a user name and a secret reference to the password,
 * resolved from the tenant's secret manager when each build starts. kiln holds references only,
 * so what is shown here is never a secret.
 */
function GitCredentials({ project }: { project: Project }) {
  const [stored, setStored] = useState<boolean | undefined>();
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [problems, setProblems] = useState<Problems>({});
  const [readError, setReadError] = useState<ApiError | undefined>();
  const outcome = useOutcome();
  const path = { params: { path: { id: project.id }, header: tenantHeader() } };

  useEffect(() => {
    unwrap(api.GET('/api/v1/projects/{id}/git-credentials', path)).then(
      (answer) => {
        setStored(true);
        setUsername(answer.username);
        setPassword(answer.password);
      },
      (failure: unknown) => {
        if (!(failure instanceof ApiError)) throw failure;
        if (failure.status === 404) setStored(false);
        else setReadError(failure);
      },
    );
  }, [project.id]);

  async function save(event: Event) {
    event.preventDefault();
    setProblems({});
    const body = { username: username.trim(), password: password.trim() };
    const call = () => unwrap(api.PUT('/api/v1/projects/{id}/git-credentials', { ...path, body }));
    if (await outcome.run(call, 'Git credentials saved.', onFields(CREDENTIAL_FIELDS, setProblems)))
      setStored(true);
  }
  async function clear() {
    const call = () => unwrap(api.DELETE('/api/v1/projects/{id}/git-credentials', path));
    if (await outcome.run(call, 'Git credentials cleared: builds clone without them.')) {
      setStored(false);
      setUsername('');
      setPassword('');
    }
  }

  const id = `creds-${project.id}`;
  return (
    <form onSubmit={(event) => void save(event)} aria-label={`Git credentials of ${project.name}`}>
      <h3>Git credentials of {project.name}</h3>
      <p class="muted">
        {stored === undefined
          ? 'Reading…'
          : stored
            ? 'Builds clone the repository with these.'
            : 'None: builds clone the repository without credentials.'}
      </p>
      <TextField
        field={`${id}-username`}
        label="User name"
        hint="Plain, or a secret reference."
        value={username}
        error={problems['username']}
        onValue={setUsername}
      />
      <TextField
        field={`${id}-password`}
        label="Password (secret reference)"
        hint="A reference to the password or token in the tenant's secret manager, e.g. vault:kv/data/ci/git#token (never the password itself)."
        value={password}
        error={problems['password']}
        onValue={setPassword}
      />
      <div class="form-actions">
        <button
          type="submit"
          disabled={outcome.busy || username.trim() === '' || password.trim() === ''}
        >
          Save credentials
        </button>
        {stored === true && (
          <Confirm
            action="Clear"
            question={`Clear the git credentials of ${project.name}? Builds will clone without them.`}
            confirm="Clear credentials"
            onConfirm={() => void clear()}
          />
        )}
      </div>
      {readError !== undefined && <ErrorNotice error={readError} />}
      <OutcomeLines outcome={outcome} />
    </form>
  );
}
