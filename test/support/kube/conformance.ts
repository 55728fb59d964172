import type { RecordedRequest } from './api-server.js';

/**
 * What the API server double promises to behave like a real kube-apiserver for: every request
 * kiln, kubectl 1.34 and helm 4 send it in the test suites, by resource and verb. docs/adr/0041
 * explains the list; test/kube-double/conformance.spec.ts keeps the ADR's table equal to it, and
 * the suites that drive each client (kiln: operator.spec.ts, kubectl: kube-double/kubectl.spec.ts
 * and builtin-kinds.spec.ts, helm: chart-helm.spec.ts) fail on a request it does not list, so a
 * client that starts using something new meets the question "does the double do that faithfully?"
 * in review, not in production.
 */
export type Verb =
  | 'get'
  | 'list'
  | 'watch'
  | 'create'
  | 'update'
  | 'patch'
  | 'apply'
  | 'delete'
  | 'deletecollection';

/** `<group>/<resource>[/<subresource>]` (`core` for the legacy group) → verbs promised. */
export const PROMISED: Readonly<Record<string, readonly Verb[]>> = {
  'core/namespaces': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'core/pods': ['get', 'list', 'watch', 'create', 'apply', 'delete', 'deletecollection'],
  'core/pods/log': ['get'],
  'core/pods/status': ['get', 'update', 'patch'],
  'core/secrets': ['get', 'list', 'watch', 'create', 'update', 'patch', 'apply', 'delete'],
  'core/configmaps': ['get', 'list', 'watch', 'create', 'update', 'patch', 'apply', 'delete'],
  'core/events': ['get', 'list', 'watch', 'create', 'patch'],
  'core/serviceaccounts': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'core/services': ['get', 'list', 'watch', 'create', 'patch', 'apply', 'delete'],
  'core/resourcequotas': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'core/limitranges': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'core/persistentvolumeclaims': ['get', 'list', 'create', 'apply', 'delete'],
  'apps/deployments': ['get', 'list', 'watch', 'create', 'update', 'patch', 'apply', 'delete'],
  'apps/statefulsets': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'batch/jobs': ['get', 'list', 'watch', 'create', 'update', 'patch', 'apply', 'delete'],
  'batch/jobs/status': ['get', 'update', 'patch'],
  'coordination.k8s.io/leases': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  'networking.k8s.io/networkpolicies': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'networking.k8s.io/ingresses': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'policy/poddisruptionbudgets': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'rbac.authorization.k8s.io/roles': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'rbac.authorization.k8s.io/rolebindings': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'rbac.authorization.k8s.io/clusterroles': ['get', 'list', 'create', 'apply', 'delete'],
  'rbac.authorization.k8s.io/clusterrolebindings': ['get', 'list', 'create', 'apply', 'delete'],
  'apiextensions.k8s.io/customresourcedefinitions': [
    'get',
    'list',
    'watch',
    'create',
    'update',
    'patch',
    'apply',
    'delete',
  ],
  'kiln.dev/builds': [
    'get',
    'list',
    'watch',
    'create',
    'update',
    'patch',
    'apply',
    'delete',
    'deletecollection',
  ],
  'kiln.dev/builds/status': ['get', 'update', 'patch'],
  // Kueue, with KubeApiServer.start({ kueue: true }): its CRDs and the fake Kueue (kueue.ts).
  'kueue.x-k8s.io/workloads': ['get', 'list', 'watch'],
  'kueue.x-k8s.io/localqueues': ['get', 'list', 'watch', 'create', 'apply', 'delete'],
  'kueue.x-k8s.io/clusterqueues': ['get', 'list', 'watch', 'create', 'patch', 'apply', 'delete'],
  'kueue.x-k8s.io/resourceflavors': ['get', 'list', 'create', 'apply', 'delete'],
  'visibility.kueue.x-k8s.io/localqueues/pendingworkloads': ['get'],
  'visibility.kueue.x-k8s.io/clusterqueues/pendingworkloads': ['get'],
};

/**
 * Field selectors promised in list and watch, by resource, beyond `metadata.name` and
 * `metadata.namespace` (which every resource takes): for Events, every field the real registry
 * makes selectable (pkg/registry/core/event/strategy.go ToSelectableFields), so that "why does my
 * build's pod not run" can be asked as kubectl and client-go ask it (`involvedObject.uid=…`,
 * `reason=FailedCreate`, `type=Warning`). test/kube-double/events.spec.ts checks each one.
 */
export const PROMISED_FIELD_SELECTORS: Readonly<Record<string, readonly string[]>> = {
  'core/events': [
    'involvedObject.kind',
    'involvedObject.name',
    'involvedObject.uid',
    'involvedObject.namespace',
    'involvedObject.apiVersion',
    'involvedObject.resourceVersion',
    'involvedObject.fieldPath',
    'reason',
    'reportingComponent',
    'source',
    'type',
  ],
};

/** Paths outside the resource API that clients read: discovery, OpenAPI, version, health. */
export const PROMISED_PATHS: readonly RegExp[] = [
  /^\/version$/,
  /^\/(healthz|readyz|livez)$/,
  /^\/api$/,
  /^\/apis$/,
  /^\/api\/v1$/,
  /^\/apis\/[^/]+\/[^/]+$/,
  /^\/openapi\/v2$/,
  /^\/openapi\/v3(\/.*)?$/,
];

/** The resource and verb of a recorded request, or the path for a non-resource request. */
export function classify(request: RecordedRequest): { key: string; verb: Verb } | { path: string } {
  const segments = request.path.split('/').filter((s) => s !== '');
  let group: string;
  let rest: string[];
  if (segments[0] === 'api' && segments[1] === 'v1' && segments.length > 2) {
    group = 'core';
    rest = segments.slice(2);
  } else if (segments[0] === 'apis' && segments.length > 3) {
    group = segments[1] ?? '';
    rest = segments.slice(3);
  } else return { path: request.path };
  // namespaces/<ns>/<resource>/... , except the namespaces resource itself.
  if (rest[0] === 'namespaces' && rest.length >= 3 && !['status', 'finalize'].includes(rest[2]!))
    rest = rest.slice(2);
  const [resource, name, subresource] = rest;
  const key = [group, resource, subresource].filter((s) => s !== undefined).join('/');
  const contentType = (request.contentType ?? '').split(';')[0]?.trim();
  const verb = ((): Verb => {
    switch (request.method) {
      case 'GET':
        if (name !== undefined) return 'get';
        return request.query['watch'] === 'true' || request.query['watch'] === '1'
          ? 'watch'
          : 'list';
      case 'POST':
        return 'create';
      case 'PUT':
        return 'update';
      case 'PATCH':
        return contentType === 'application/apply-patch+yaml' ? 'apply' : 'patch';
      case 'DELETE':
        return name === undefined ? 'deletecollection' : 'delete';
      default:
        return request.method.toLowerCase() as Verb;
    }
  })();
  return { key, verb };
}

/** Recorded requests the conformance list does not promise, as `verb key` or the bare path. */
export function unpromised(requests: readonly RecordedRequest[]): string[] {
  const out = new Set<string>();
  for (const request of requests) {
    const c = classify(request);
    if ('path' in c) {
      if (!PROMISED_PATHS.some((p) => p.test(c.path))) out.add(`${request.method} ${c.path}`);
    } else if (!(PROMISED[c.key] ?? []).includes(c.verb)) out.add(`${c.verb} ${c.key}`);
  }
  return [...out].sort();
}
