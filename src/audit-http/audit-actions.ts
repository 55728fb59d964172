/** What the audit log records of one state-changing route. */
export interface AuditRoute {
  /** The stable action name (`<record>.<verb>`): one per route, never reused. */
  readonly action: string;
  /** The type of record the route changes, or null when it names none (a login). */
  readonly target: string | null;
  /** The path parameter naming the target; else the answer's `id` (a created record). */
  readonly param?: string;
  /** The answer's field naming a created target, when it is not `id`. */
  readonly createdField?: string;
  /** The target is the caller's own user (a password change). */
  readonly self?: true;
  /** The target is a tenant: the event belongs to it (an installation administrator's change). */
  readonly tenantTarget?: true;
  /**
   * The route acts in no tenant (the caller's own account, the installation's users and
   * tenants): X-Tenant-ID, which its guard ignores, is not recorded either.
   */
  readonly installation?: true;
  /** The caller is a build pod with its upload token, not a user. */
  readonly buildPod?: true;
}

/**
 * Every state-changing route of the API (POST, PUT, PATCH and DELETE under /api/v1, as
 * src/auth/route-inventory.ts lists them) and what its audit event says. test/audit.spec.ts
 * fails for a route missing here, an entry without a route, and an action named twice.
 */
export const AUDIT_ROUTES: Readonly<Record<string, AuditRoute>> = {
  'POST /api/v1/auth/login': { action: 'auth.login', target: null, installation: true },
  'POST /api/v1/auth/password': {
    action: 'account.password.change',
    target: 'user',
    self: true,
    installation: true,
  },
  'POST /api/v1/builds': { action: 'build.create', target: 'build' },
  'DELETE /api/v1/builds/:id': { action: 'build.delete', target: 'build', param: 'id' },
  'PUT /api/v1/builds/:id/keep': { action: 'build.keep', target: 'build', param: 'id' },
  'DELETE /api/v1/builds/:id/keep': { action: 'build.unkeep', target: 'build', param: 'id' },
  'POST /api/v1/builds/:id/start': { action: 'build.start', target: 'build', param: 'id' },
  'POST /api/v1/builds/:id/cancel': { action: 'build.cancel', target: 'build', param: 'id' },
  'POST /api/v1/builds/:id/retry': { action: 'build.retry', target: 'build', param: 'id' },
  'PUT /api/v1/builds/:id/sbom': {
    action: 'build.sbom.upload',
    target: 'build',
    param: 'id',
    buildPod: true,
  },
  'PUT /api/v1/builds/:id/scan': {
    action: 'build.scan.upload',
    target: 'build',
    param: 'id',
    buildPod: true,
  },
  'POST /api/v1/projects': { action: 'project.create', target: 'project' },
  'PATCH /api/v1/projects/:id': { action: 'project.update', target: 'project', param: 'id' },
  'DELETE /api/v1/projects/:id': { action: 'project.delete', target: 'project', param: 'id' },
  'PUT /api/v1/projects/:id/git-credentials': {
    action: 'project.git_credentials.set',
    target: 'project',
    param: 'id',
  },
  'DELETE /api/v1/projects/:id/git-credentials': {
    action: 'project.git_credentials.delete',
    target: 'project',
    param: 'id',
  },
  'POST /api/v1/members': { action: 'member.set', target: 'user', createdField: 'user_id' },
  'DELETE /api/v1/members/:userId': { action: 'member.remove', target: 'user', param: 'userId' },
  'POST /api/v1/tenants': {
    action: 'tenant.create',
    target: 'tenant',
    tenantTarget: true,
    installation: true,
  },
  'PATCH /api/v1/tenants/:id': {
    action: 'tenant.update',
    target: 'tenant',
    param: 'id',
    tenantTarget: true,
    installation: true,
  },
  'DELETE /api/v1/tenants/:id': {
    action: 'tenant.delete',
    target: 'tenant',
    param: 'id',
    tenantTarget: true,
    installation: true,
  },
  'PATCH /api/v1/tenants/:id/admission': {
    action: 'tenant.admission.update',
    target: 'tenant',
    param: 'id',
    tenantTarget: true,
    installation: true,
  },
  'PATCH /api/v1/tenants/:id/retention': {
    action: 'tenant.retention.update',
    target: 'tenant',
    param: 'id',
    tenantTarget: true,
    installation: true,
  },
  'POST /api/v1/users': { action: 'user.create', target: 'user', installation: true },
  'PATCH /api/v1/users/:id': {
    action: 'user.update',
    target: 'user',
    param: 'id',
    installation: true,
  },
  'POST /api/v1/tokens': { action: 'token.create', target: 'api_token' },
  'DELETE /api/v1/tokens/:id': { action: 'token.revoke', target: 'api_token', param: 'id' },
  'PUT /api/v1/settings/secret-managers/:type': {
    action: 'settings.secret_manager.set',
    target: 'secret_manager',
    param: 'type',
  },
  'DELETE /api/v1/settings/secret-managers/:type': {
    action: 'settings.secret_manager.delete',
    target: 'secret_manager',
    param: 'type',
  },
  'PUT /api/v1/settings/registries/:type': {
    action: 'settings.registry.set',
    target: 'registry',
    param: 'type',
  },
  'DELETE /api/v1/settings/registries/:type': {
    action: 'settings.registry.delete',
    target: 'registry',
    param: 'type',
  },
  'PUT /api/v1/settings/provenance': {
    action: 'settings.provenance.set',
    target: 'provenance_settings',
  },
  'POST /api/v1/signing-keys/rotate': {
    action: 'signing_key.rotate',
    target: 'signing_key',
    createdField: 'key_id',
  },
  'POST /api/v1/projects/:id/triggers': { action: 'trigger.create', target: 'trigger' },
  'PATCH /api/v1/triggers/:id': { action: 'trigger.update', target: 'trigger', param: 'id' },
  'DELETE /api/v1/triggers/:id': { action: 'trigger.delete', target: 'trigger', param: 'id' },
  'POST /api/v1/triggers/:id/secret': {
    action: 'trigger.secret.rotate',
    target: 'trigger',
    param: 'id',
  },
  // A git host's delivery: no user and no tenant the caller could prove before its signature was
  // checked; the trigger's own deliveries list says what came of it (docs/adr/0053-triggers.md).
  'POST /api/v1/hooks/:id': {
    action: 'trigger.delivery',
    target: 'trigger',
    param: 'id',
    installation: true,
  },
};

/** The methods that change state: every route with one of them is audited. */
export const AUDITED_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The action of a state-changing route missing from AUDIT_ROUTES (a defect the test catches). */
export const UNLISTED_ACTION = 'unlisted';

export interface MatchedRoute {
  /** `METHOD /template`, as AUDIT_ROUTES and the route inventory name it. */
  readonly route: string;
  readonly audit: AuditRoute;
  readonly params: Readonly<Record<string, string>>;
}

interface Pattern {
  readonly method: string;
  readonly segments: readonly string[];
  readonly route: string;
  readonly audit: AuditRoute;
}

const MAX_PARAM = 200;

/**
 * Finds the audited route a request is for from its method and path alone, so a request refused
 * before Express routed it (the rate limit's 429, a body too large) is recorded like one refused
 * by the guard. A literal segment beats a parameter.
 */
export class AuditRouteMatcher {
  private readonly patterns: Pattern[];

  constructor(routes: Readonly<Record<string, AuditRoute>> = AUDIT_ROUTES) {
    this.patterns = Object.entries(routes)
      .map(([route, audit]) => {
        const [method, template] = route.split(' ') as [string, string];
        return { method, segments: template.split('/').filter(Boolean), route, audit };
      })
      // More literal segments first: /tenants/:id/admission never reads as /tenants/:id.
      .sort(
        (a, b) =>
          b.segments.filter((s) => !s.startsWith(':')).length -
          a.segments.filter((s) => !s.startsWith(':')).length,
      );
  }

  match(method: string, path: string): MatchedRoute | undefined {
    const segments = path.split('/').filter(Boolean);
    for (const pattern of this.patterns) {
      if (pattern.method !== method || pattern.segments.length !== segments.length) continue;
      const params: Record<string, string> = {};
      const fits = pattern.segments.every((expected, i) => {
        const actual = segments[i]!;
        if (expected.startsWith(':')) {
          params[expected.slice(1)] = decodeSegment(actual).slice(0, MAX_PARAM);
          return true;
        }
        return expected === actual;
      });
      if (fits) return { route: pattern.route, audit: pattern.audit, params };
    }
    return undefined;
  }
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
