import { createHmac } from 'node:crypto';
import { TenancyService } from '../../src/auth/tenancy.service.js';
import { ProjectsService } from '../../src/projects/projects.service.js';
import type { TestApp } from './test-app.js';

export const TEST_JWT_SECRET = 'test-secret-with-at-least-32-bytes!!';
/** KILN_SECRETS_KEY of test apps: the key build secrets are sealed with. */
export const TEST_SECRETS_KEY = 'test-sealing-key-with-at-least-32-bytes';
export const PASSWORD = 'correct horse battery staple';

export interface Seeded {
  readonly tenantA: string;
  readonly tenantB: string;
  readonly projectA: string;
  readonly projectB: string;
  readonly users: Record<
    'admin' | 'developer' | 'viewer' | 'outsider' | 'adminB',
    { id: string; email: string }
  >;
}

/** Two tenants, one project each, and a user per role in tenant A (plus B's admin, and an outsider). */
export async function seedTenancy(kiln: TestApp): Promise<Seeded> {
  const tenancy = kiln.app.get(TenancyService);
  const projects = kiln.app.get(ProjectsService);
  const a = await tenancy.createTenant('tenant-a');
  const b = await tenancy.createTenant('tenant-b');
  const users = {} as Seeded['users'];
  for (const name of ['admin', 'developer', 'viewer', 'outsider', 'adminB'] as const) {
    const user = await tenancy.createUser(`${name.toLowerCase()}@example.com`, PASSWORD);
    users[name] = { id: user.id, email: user.email };
  }
  await tenancy.addMember(a.id, users.admin.email, 'admin');
  await tenancy.addMember(a.id, users.developer.email, 'developer');
  await tenancy.addMember(a.id, users.viewer.email, 'viewer');
  await tenancy.addMember(b.id, users.adminB.email, 'admin');
  const projectA = await projects.create(a.id, 'web', 'https://git.example.com/a/web.git');
  const projectB = await projects.create(b.id, 'secret-b');
  return { tenantA: a.id, tenantB: b.id, projectA: projectA.id, projectB: projectB.id, users };
}

export async function login(
  baseUrl: string,
  email: string,
  password = PASSWORD,
): Promise<Response> {
  return fetch(`${baseUrl}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  });
}

export async function tokenFor(baseUrl: string, email: string): Promise<string> {
  const response = await login(baseUrl, email);
  if (response.status !== 200) throw new Error(`login of ${email} gave ${response.status}`);
  return ((await response.json()) as { access_token: string }).access_token;
}

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A hand-made JWT, to forge what a real client or an attacker could send. */
export function craftToken(
  payload: Record<string, unknown>,
  options: { alg?: string; secret?: string; header?: Record<string, unknown> } = {},
): string {
  const alg = options.alg ?? 'HS256';
  const head = b64url({ alg, typ: 'JWT', ...options.header });
  const body = b64url(payload);
  if (alg === 'none') return `${head}.${body}.`;
  const signature = createHmac('sha256', options.secret ?? TEST_JWT_SECRET)
    .update(`${head}.${body}`)
    .digest('base64url');
  return `${head}.${body}.${signature}`;
}

export function validClaims(
  userId: string,
  overrides: Record<string, unknown> = {},
): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  return { sub: userId, iss: 'kiln', aud: 'kiln-api', iat: now, exp: now + 600, ...overrides };
}
