import { useState } from 'preact/hooks';
import { api, tenantHeader, unwrap } from '../../api/client.js';
import type { paths } from '../../api/schema.gen.js';
import { ErrorNotice } from '../../components/error-notice.js';
import { when } from '../../format.js';
import { can } from '../../permissions.js';
import { type Polled, usePoll } from '../../poll.js';
import { TextField } from '../new-build/fields.js';
import { parseSettings, settingsProblem } from './forms.js';
import { Confirm, NotAllowed, OutcomeLines, useOutcome } from './parts.js';

type ManagerType =
  paths['/api/v1/settings/secret-managers/{type}']['put']['parameters']['path']['type'];
type RegistryType =
  paths['/api/v1/settings/registries/{type}']['put']['parameters']['path']['type'];

interface Stored {
  readonly type: string;
  readonly settings: Record<string, unknown>;
  readonly updated_at: string;
}

/** One kind of settings: its types, each with a name and an example (the placeholder), and its routes. */
interface Kind<T extends string> {
  readonly types: Readonly<Record<T, { readonly name: string; readonly example: string }>>;
  put(type: T, settings: Record<string, unknown>): Promise<unknown>;
  remove(type: T): Promise<unknown>;
}

const header = () => ({ header: tenantHeader() });

/** Examples from docs/secret-managers-and-registries.md. */
const SECRET_MANAGERS: Kind<ManagerType> = {
  types: {
    vault: {
      name: 'HashiCorp Vault',
      example:
        '{ "address": "https://vault.example.com:8200", "auth": { "method": "kubernetes", "role": "kiln" } }',
    },
    aws_secretsmanager: { name: 'AWS Secrets Manager', example: '{ "region": "eu-west-1" }' },
    azure_keyvault: {
      name: 'Azure Key Vault',
      example: '{ "vaultUrl": "https://acme-builds.vault.azure.net" }',
    },
  },
  put: (type, body) =>
    unwrap(
      api.PUT('/api/v1/settings/secret-managers/{type}', {
        params: { ...header(), path: { type } },
        body,
      }),
    ),
  remove: (type) =>
    unwrap(
      api.DELETE('/api/v1/settings/secret-managers/{type}', {
        params: { ...header(), path: { type } },
      }),
    ),
};

const REGISTRIES: Kind<RegistryType> = {
  types: {
    harbor: {
      name: 'Harbor',
      example:
        '{ "address": "harbor.example.com", "username": "robot$team+ci", "password": "vault:kv/data/registry/harbor#secret" }',
    },
    quay: {
      name: 'Quay',
      example:
        '{ "address": "quay.io", "username": "acme+ci", "password": "aws:registry/quay#token" }',
    },
    artifactory: {
      name: 'Artifactory',
      example:
        '{ "address": "acme.jfrog.io", "username": "ci", "password": "azure:artifactory-token" }',
    },
    s3: {
      name: 'S3',
      example:
        '{ "bucket": "acme-images", "prefix": "builds", "region": "eu-west-1", "accessKeyId": "vault:kv/data/ci/s3#id", "secretAccessKey": "vault:kv/data/ci/s3#secret" }',
    },
  },
  put: (type, body) =>
    unwrap(
      api.PUT('/api/v1/settings/registries/{type}', {
        params: { ...header(), path: { type } },
        body,
      }),
    ),
  remove: (type) =>
    unwrap(
      api.DELETE('/api/v1/settings/registries/{type}', { params: { ...header(), path: { type } } }),
    ),
};

/** /settings: the tenant's secret managers and registries, and its place in admission (read only). */
export function Settings() {
  if (!can('settings:manage')) return <NotAllowed title="Settings" what="manage its settings" />;
  return <SettingsPage />;
}

function SettingsPage() {
  const [version, setVersion] = useState(0);
  const reload = () => setVersion((v) => v + 1);
  const managers = usePoll(
    `m${version}`,
    async () =>
      (await unwrap(api.GET('/api/v1/settings/secret-managers', { params: header() })))
        .secret_managers,
    () => false,
  );
  const registries = usePoll(
    `r${version}`,
    async () =>
      (await unwrap(api.GET('/api/v1/settings/registries', { params: header() }))).registries,
    () => false,
  );
  return (
    <main id="main" class="admin">
      <h1>Settings</h1>
      <p>
        Where the tenant's secrets and registries are. Settings hold addresses, file paths and
        secret references (<code>vault:…</code>, <code>aws:…</code>, <code>azure:…</code>), never a
        credential: see docs/secret-managers-and-registries.md for each type's fields.
      </p>
      <KindSection
        title="Secret managers"
        id="secret-managers"
        kind={SECRET_MANAGERS}
        stored={managers}
        onChange={reload}
      />
      <KindSection
        title="Registries"
        id="registries"
        kind={REGISTRIES}
        stored={registries}
        onChange={reload}
      />
      <Admission />
    </main>
  );
}

function KindSection<T extends string>({
  title,
  id,
  kind,
  stored,
  onChange,
}: {
  title: string;
  id: string;
  kind: Kind<T>;
  stored: Polled<readonly Stored[]>;
  onChange: () => void;
}) {
  const types = Object.keys(kind.types) as T[];
  return (
    <section aria-labelledby={`${id}-heading`}>
      <h2 id={`${id}-heading`}>{title}</h2>
      {stored.error !== undefined && <ErrorNotice error={stored.error} />}
      {stored.data !== undefined &&
        types.map((type) => (
          <TypeSettings
            key={type}
            type={type}
            kind={kind}
            stored={stored.data!.find((s) => s.type === type)}
            onChange={onChange}
          />
        ))}
    </section>
  );
}

/**
 * One type's settings: set or not, a JSON text area (the stored settings, or empty with an
 * example), Save and Remove. A 400's details are shown under the text area.
 */
function TypeSettings<T extends string>({
  type,
  kind,
  stored,
  onChange,
}: {
  type: T;
  kind: Kind<T>;
  stored: Stored | undefined;
  onChange: () => void;
}) {
  const { name, example } = kind.types[type];
  const [text, setText] = useState(() =>
    stored === undefined ? '' : JSON.stringify(stored.settings, null, 2),
  );
  const [problem, setProblem] = useState<string | undefined>();
  const outcome = useOutcome();

  async function save(event: Event) {
    event.preventDefault();
    const parsed = parseSettings(text);
    if ('problem' in parsed) {
      setProblem(parsed.problem);
      return;
    }
    setProblem(undefined);
    const saved = await outcome.run(
      () => kind.put(type, parsed.settings),
      `${name} settings saved.`,
      (error) => {
        const onField = error.status === 400 ? settingsProblem(error.details) : undefined;
        setProblem(onField);
        return onField !== undefined;
      },
    );
    if (saved) onChange();
  }
  async function remove() {
    if (await outcome.run(() => kind.remove(type), `${name} settings removed.`)) {
      setText('');
      onChange();
    }
  }

  return (
    <form class="panel" aria-labelledby={`settings-${type}`} onSubmit={(event) => void save(event)}>
      <h3 id={`settings-${type}`}>
        {name} <code>{type}</code>
      </h3>
      <p class="muted">
        {stored === undefined ? 'Not set.' : `Set; last changed ${when(stored.updated_at)}.`}
      </p>
      <TextField
        field={`settings-${type}-json`}
        label={`${name} settings (JSON)`}
        hint={`For example: ${example}`}
        rows={6}
        value={text}
        error={problem}
        onValue={(value) => {
          setText(value);
          setProblem(undefined);
        }}
      />
      <div class="form-actions">
        <button type="submit" disabled={outcome.busy || text.trim() === ''}>
          Save {name}
        </button>
        {stored !== undefined && (
          <Confirm
            action="Remove"
            question={`Remove the ${name} settings? Builds that need them fail to start from then on.`}
            confirm={`Remove ${name}`}
            onConfirm={() => void remove()}
          />
        )}
      </div>
      <OutcomeLines outcome={outcome} />
    </form>
  );
}

/** The tenant's place in admission: read here, set by installation administrators only. */
function Admission() {
  const admission = usePoll(
    'admission',
    () => unwrap(api.GET('/api/v1/settings/admission', { params: header() })),
    () => false,
  );
  return (
    <section aria-labelledby="admission-heading">
      <h2 id="admission-heading">Admission</h2>
      <p class="notice">
        Read only: the installation's administrators set a tenant's share of build slots, so that no
        tenant chooses its own (docs/admission.md).
      </p>
      {admission.error !== undefined && <ErrorNotice error={admission.error} />}
      {admission.data !== undefined && (
        <dl class="facts">
          <dt>Weight</dt>
          <dd>{admission.data.weight} (its share of build slots against other tenants')</dd>
          <dt>Running builds at most</dt>
          <dd>{admission.data.max_running ?? "the installation's default"}</dd>
        </dl>
      )}
    </section>
  );
}
