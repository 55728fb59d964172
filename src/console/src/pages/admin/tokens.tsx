import { useEffect, useRef, useState } from 'preact/hooks';
import { api, tenantHeader, unwrap } from '../../api/client.js';
import type { components } from '../../api/schema.gen.js';
import { session } from '../../api/session.js';
import { ErrorNotice } from '../../components/error-notice.js';
import { when } from '../../format.js';
import { can } from '../../permissions.js';
import { usePoll } from '../../poll.js';
import { CheckboxField, TextField } from '../new-build/fields.js';
import {
  type Problems,
  TOKEN_PERMISSIONS,
  type TokenPermission,
  grantable,
  placeDetails,
  tokenRequest,
} from './forms.js';
import { Confirm, Done, NotAllowed, useOutcome } from './parts.js';

type Token = components['schemas']['ApiTokenDto'];
type Created = components['schemas']['CreatedApiTokenDto'];
const TOKEN_FIELDS = ['name', 'permissions', 'expires_in_days'] as const;

/** /tokens: the user's own API tokens in this tenant (`token:manage`, every role). */
export function Tokens() {
  if (!can('token:manage')) return <NotAllowed title="API tokens" what="manage API tokens" />;
  return <TokensPage />;
}

function TokensPage() {
  const [version, setVersion] = useState(0);
  const [notice, setNotice] = useState('');
  // The new token lives in this component's state only: never in storage, gone with the page.
  const [created, setCreated] = useState<Created | undefined>();
  const list = usePoll(
    String(version),
    () => unwrap(api.GET('/api/v1/tokens', { params: { header: tenantHeader() } })),
    () => false,
  );
  const changed = (done: string) => {
    setNotice(done);
    setVersion((v) => v + 1);
  };
  return (
    <main id="main" class="admin">
      <h1>API tokens</h1>
      <p>
        Tokens for machines and CI: each acts for you in {session()?.tenantName} only, with the
        permissions you give it (and never more than your role has at the time), until it expires or
        you revoke it. Send it as <code>Authorization: Bearer kiln_…</code>.
      </p>
      {created !== undefined ? (
        <NewToken
          created={created}
          onDone={() => {
            setCreated(undefined);
            changed(''); // its first use may have come meanwhile: "last used" shows it
          }}
        />
      ) : (
        <CreateToken
          onCreated={(token) => {
            setCreated(token);
            changed('');
          }}
        />
      )}
      <h2>Your tokens in this tenant</h2>
      {list.error !== undefined && <ErrorNotice error={list.error} />}
      <Done text={notice} />
      {list.data?.tokens.length === 0 && <p>No token yet.</p>}
      {list.data !== undefined && list.data.tokens.length > 0 && (
        <TokenTable tokens={list.data.tokens} onRevoked={changed} />
      )}
    </main>
  );
}

function CreateToken({ onCreated }: { onCreated: (token: Created) => void }) {
  const offered = grantable(session()?.permissions ?? []);
  const [name, setName] = useState('');
  const [chosen, setChosen] = useState<readonly TokenPermission[]>(offered);
  const [days, setDays] = useState('30');
  const [problems, setProblems] = useState<Problems>({});
  const outcome = useOutcome();

  async function submit(event: Event) {
    event.preventDefault();
    const request = tokenRequest({ name, permissions: chosen, days });
    if ('problems' in request) {
      setProblems(request.problems);
      return;
    }
    setProblems({});
    await outcome.run(
      async () =>
        onCreated(
          await unwrap(
            api.POST('/api/v1/tokens', { params: { header: tenantHeader() }, body: request.body }),
          ),
        ),
      '',
      (error) => {
        const { placed, rest } = placeDetails(error.details, TOKEN_FIELDS);
        setProblems(placed);
        return error.status === 400 && rest.length === 0 && Object.keys(placed).length > 0;
      },
    );
  }

  const toggle = (permission: TokenPermission, on: boolean) =>
    setChosen((current) => offered.filter((p) => (p === permission ? on : current.includes(p))));
  return (
    <form class="panel" onSubmit={(event) => void submit(event)}>
      <h2>Create a token</h2>
      <TextField
        field="token-name"
        label="Name"
        hint="What it is for, e.g. the CI pipeline that uses it."
        value={name}
        error={problems['name']}
        onValue={setName}
      />
      <fieldset
        class="field"
        id="token-permissions"
        aria-describedby="token-permissions-hint token-permissions-error"
      >
        <legend>Permissions</legend>
        <p id="token-permissions-hint" class="hint muted">
          At most your role's in this tenant. A token can never manage tokens.
        </p>
        {offered.map((permission) => (
          <CheckboxField
            key={permission}
            field={`token-permission-${permission.replace(':', '-')}`}
            label={`${permission}: ${TOKEN_PERMISSIONS[permission]}`}
            checked={chosen.includes(permission)}
            onValue={(on) => toggle(permission, on)}
          />
        ))}
        <p id="token-permissions-error" class="field-error" aria-live="polite">
          {problems['permissions'] ?? ''}
        </p>
      </fieldset>
      <TextField
        field="token-days"
        label="Expires in (days)"
        hint="Empty: the installation's default (30 days, or its maximum when lower)."
        value={days}
        error={problems['expires_in_days']}
        onValue={setDays}
      />
      <button type="submit" disabled={outcome.busy}>
        Create token
      </button>
      {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
    </form>
  );
}

/**
 * The token just created, shown this once: kiln keeps only its SHA-256. Focus moves here so the
 * warning is read first; Copy puts it on the clipboard, Done forgets it.
 */
function NewToken({ created, onDone }: { created: Created; onDone: () => void }) {
  const heading = useRef<HTMLHeadingElement>(null);
  const field = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState('');
  useEffect(() => heading.current?.focus(), []);

  async function copy() {
    try {
      await navigator.clipboard.writeText(created.token);
      setCopied('Copied to the clipboard.');
    } catch {
      // The clipboard refused (no permission, not a secure context): select it for Ctrl+C.
      field.current?.select();
      setCopied('The clipboard is not available here: the token is selected, copy it by hand.');
    }
  }

  return (
    <section class="panel new-token" aria-labelledby="new-token-heading">
      <h2 id="new-token-heading" ref={heading} tabIndex={-1}>
        Token {created.name} created
      </h2>
      <p class="warning" role="alert">
        Copy it now: it will not be shown again. kiln keeps only a hash of it; if it is lost, revoke
        it and create another.
      </p>
      <label for="new-token">Your new token</label>
      <div class="copy-row">
        <input
          id="new-token"
          ref={field}
          readOnly
          spellcheck={false}
          autocomplete="off"
          value={created.token}
          onFocus={(event) => event.currentTarget.select()}
        />
        <button type="button" onClick={() => void copy()}>
          Copy
        </button>
      </div>
      <Done text={copied} />
      <p class="muted">
        Permissions: {created.permissions.join(', ')}. Expires {when(created.expires_at)}.
      </p>
      <button type="button" class="secondary" onClick={onDone}>
        Done, I have copied it
      </button>
    </section>
  );
}

function TokenTable({
  tokens,
  onRevoked,
}: {
  tokens: readonly Token[];
  onRevoked: (done: string) => void;
}) {
  const now = Date.now();
  return (
    <div class="table-wrap">
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Permissions</th>
            <th scope="col">Created</th>
            <th scope="col">Last used</th>
            <th scope="col">Expires</th>
            <th scope="col">Revoke</th>
          </tr>
        </thead>
        <tbody>
          {tokens.map((token) => (
            <TokenRow key={token.id} token={token} now={now} onRevoked={onRevoked} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function TokenRow({
  token,
  now,
  onRevoked,
}: {
  token: Token;
  now: number;
  onRevoked: (done: string) => void;
}) {
  const outcome = useOutcome();
  const expired = Date.parse(token.expires_at) <= now;
  const revoke = async () => {
    const call = () =>
      unwrap(
        api.DELETE('/api/v1/tokens/{id}', {
          params: { path: { id: token.id }, header: tenantHeader() },
        }),
      );
    if (await outcome.run(call, '')) onRevoked(`Token ${token.name} revoked.`);
  };
  return (
    <tr>
      <th scope="row">{token.name}</th>
      <td class="wrap">{token.permissions.join(', ')}</td>
      <td>{when(token.created_at)}</td>
      <td>{token.last_used_at === null ? 'never' : when(token.last_used_at)}</td>
      <td>
        {when(token.expires_at)}
        {expired && (
          <>
            {' '}
            <span class="badge badge-failed">expired</span>
          </>
        )}
      </td>
      <td>
        <Confirm
          action="Revoke"
          question={`Revoke ${token.name}? Anything using it is refused from then on.`}
          confirm={`Revoke ${token.name}`}
          onConfirm={() => void revoke()}
        />
        {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
      </td>
    </tr>
  );
}
