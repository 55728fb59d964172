import { useEffect, useState } from 'preact/hooks';
import { api, tenantHeader, unwrap } from '../../api/client.js';
import type { components } from '../../api/schema.gen.js';
import { session } from '../../api/session.js';
import { ErrorNotice } from '../../components/error-notice.js';
import { when } from '../../format.js';
import { can } from '../../permissions.js';
import { usePoll } from '../../poll.js';
import { SelectField, TextField } from '../new-build/fields.js';
import { refreshMembership } from '../tenants.js';
import { placeDetails, type Problems } from './forms.js';
import { Confirm, Done, NotAllowed, useOutcome } from './parts.js';

type Member = components['schemas']['MemberDto'];
type Role = Member['role'];

/** The roles, with what each may do (docs/security.md), in the order the forms offer them. */
const ROLES: Readonly<Record<Role, string>> = {
  developer: 'developer: builds and their own API tokens',
  viewer: 'viewer: reads builds',
  admin: 'admin: everything in the tenant, members, projects and settings included',
};
const ROLE_OPTIONS = (Object.entries(ROLES) as Array<[Role, string]>).map(([value, label]) => ({
  value,
  label,
}));
const isRole = (value: string): value is Role => value in ROLES;

/** /members: the tenant's members and their roles (`member:manage`). */
export function Members() {
  if (!can('member:manage')) return <NotAllowed title="Members" what="manage its members" />;
  return <MembersPage />;
}

function MembersPage() {
  const [version, setVersion] = useState(0);
  const list = usePoll(
    String(version),
    () => unwrap(api.GET('/api/v1/members', { params: { header: tenantHeader() } })),
    () => false,
  );
  const [notice, setNotice] = useState('');
  const reload = () => setVersion((v) => v + 1);
  return (
    <main id="main" class="admin">
      <h1>Members</h1>
      <AddMember onAdded={reload} />
      <h2>Members of {session()?.tenantName}</h2>
      {list.error !== undefined && <ErrorNotice error={list.error} />}
      <Done text={notice} />
      {list.data !== undefined && (
        <div class="table-wrap">
          <table class="list">
            <thead>
              <tr>
                <th scope="col">E-mail</th>
                <th scope="col">Role</th>
                <th scope="col">Member since</th>
                <th scope="col">Remove</th>
              </tr>
            </thead>
            <tbody>
              {list.data.members.map((member) => (
                <MemberRow
                  key={member.user_id}
                  member={member}
                  onChange={(done) => {
                    setNotice(done);
                    reload();
                  }}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </main>
  );
}

/** Adds an existing user by e-mail with a role (POST /members gives a member a new role too). */
function AddMember({ onAdded }: { onAdded: () => void }) {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('developer');
  const [problems, setProblems] = useState<Problems>({});
  const outcome = useOutcome();

  async function submit(event: Event) {
    event.preventDefault();
    setProblems({});
    const added = await outcome.run(
      () =>
        unwrap(
          api.POST('/api/v1/members', {
            params: { header: tenantHeader() },
            body: { email: email.trim(), role },
          }),
        ),
      `${email.trim()} is a member, as ${role}.`,
      (error) => {
        const { placed, rest } = placeDetails(error.details, ['email', 'role']);
        setProblems(placed);
        return error.status === 400 && rest.length === 0 && Object.keys(placed).length > 0;
      },
    );
    if (!added) return;
    setEmail('');
    onAdded();
    if (email.trim().toLowerCase() === session()?.email.toLowerCase()) await refreshMembership();
  }

  return (
    <form class="panel" onSubmit={(event) => void submit(event)}>
      <h2>Add a member</h2>
      <TextField
        field="member-email"
        label="E-mail"
        hint="A user of this installation (installation administrators create users)."
        value={email}
        error={problems['email']}
        onValue={setEmail}
      />
      <SelectField
        field="member-role"
        label="Role"
        value={role}
        error={problems['role']}
        options={ROLE_OPTIONS}
        onValue={(value) => isRole(value) && setRole(value)}
      />
      <button type="submit" disabled={outcome.busy || email.trim() === ''}>
        Add member
      </button>
      <Done text={outcome.done} />
      {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
    </form>
  );
}

/**
 * One member: its role, changed with the select and Change role; Remove asks first. What it did
 * goes to the page's status line (a removed row is gone); what the API refused stays in the row.
 */
function MemberRow({ member, onChange }: { member: Member; onChange: (done: string) => void }) {
  const [role, setRole] = useState<Role>(member.role);
  useEffect(() => setRole(member.role), [member.role]);
  const outcome = useOutcome();
  const self = member.email.toLowerCase() === session()?.email.toLowerCase();

  async function act(call: () => Promise<unknown>, message: string): Promise<boolean> {
    if (!(await outcome.run(call, message))) return false;
    onChange(message);
    if (self) await refreshMembership();
    return true;
  }
  // A refused change (the tenant's last admin) shows the role the member still has.
  async function changeRole() {
    const body = { email: member.email, role };
    const call = () =>
      unwrap(api.POST('/api/v1/members', { params: { header: tenantHeader() }, body }));
    if (!(await act(call, `${member.email} is now ${role}.`))) setRole(member.role);
  }
  const remove = () =>
    act(
      () =>
        unwrap(
          api.DELETE('/api/v1/members/{userId}', {
            params: { path: { userId: member.user_id }, header: tenantHeader() },
          }),
        ),
      `${member.email} was removed.`,
    );

  return (
    <tr>
      <td>
        {member.email}
        {self && <span class="muted"> (you)</span>}
        {member.disabled && (
          <>
            {' '}
            <span class="badge badge-cancelled">disabled</span>
          </>
        )}
      </td>
      <td>
        <form
          class="inline"
          onSubmit={(event) => {
            event.preventDefault();
            void changeRole();
          }}
        >
          <select
            aria-label={`Role of ${member.email}`}
            value={role}
            onChange={(event) =>
              isRole(event.currentTarget.value) && setRole(event.currentTarget.value)
            }
          >
            {Object.keys(ROLES).map((value) => (
              <option key={value} value={value}>
                {value}
              </option>
            ))}
          </select>
          <button type="submit" class="secondary" disabled={outcome.busy || role === member.role}>
            Change role
          </button>
        </form>
        {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
      </td>
      <td>{when(member.member_since)}</td>
      <td>
        <Confirm
          action="Remove"
          question={
            self
              ? 'Remove yourself from this tenant? You will no longer see it.'
              : `Remove ${member.email} from this tenant? Their API tokens here stop working.`
          }
          confirm={`Remove ${member.email}`}
          onConfirm={() => void remove()}
        />
      </td>
    </tr>
  );
}
