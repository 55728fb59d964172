import { ruleCompileErrors } from './cel.js';
import { fieldErrors, type FieldError } from './errors.js';
import {
  clone,
  isObject,
  type Json,
  type JsonObject,
  type KubeObject,
  type ResourceType,
} from './types.js';

const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

export function validateName(type: ResourceType, name: string): FieldError[] {
  if (type.kind === 'Namespace') {
    if (name.length > 63 || !LABEL.test(name))
      return [
        fieldErrors.invalid(
          'metadata.name',
          name,
          "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
      ];
    return [];
  }
  if (name.length > 253 || !SUBDOMAIN.test(name))
    return [
      fieldErrors.invalid(
        'metadata.name',
        name,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
      ),
    ];
  return [];
}

export function validateLabels(labels: Record<string, string> | undefined): FieldError[] {
  return Object.values(labels ?? {})
    .filter((value) => typeof value !== 'string' || value.length > 63 || !LABEL_VALUE.test(value))
    .map((value) =>
      fieldErrors.invalid(
        'metadata.labels',
        value,
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
      ),
    );
}

const obj = (value: unknown): JsonObject => (isObject(value) ? value : {});

function setDefault(target: JsonObject, key: string, value: Json): void {
  if (target[key] === undefined) target[key] = value;
}

function defaultContainer(container: JsonObject): void {
  setDefault(container, 'terminationMessagePath', '/dev/termination-log');
  setDefault(container, 'terminationMessagePolicy', 'File');
  setDefault(container, 'resources', {});
  const image = typeof container.image === 'string' ? container.image : '';
  const tag = image.includes('@') ? 'digest' : (/:([^/:]+)$/.exec(image)?.[1] ?? 'latest');
  setDefault(container, 'imagePullPolicy', tag === 'latest' ? 'Always' : 'IfNotPresent');
}

function defaultPodSpec(spec: JsonObject): void {
  setDefault(spec, 'restartPolicy', 'Always');
  setDefault(spec, 'terminationGracePeriodSeconds', 30);
  setDefault(spec, 'dnsPolicy', 'ClusterFirst');
  setDefault(spec, 'securityContext', {});
  setDefault(spec, 'schedulerName', 'default-scheduler');
  for (const key of ['containers', 'initContainers']) {
    const list = spec[key];
    if (Array.isArray(list)) for (const c of list) if (isObject(c)) defaultContainer(c);
  }
}

function validatePodSpec(spec: JsonObject, path: string): FieldError[] {
  const errors: FieldError[] = [];
  const containers = spec.containers;
  if (!Array.isArray(containers) || containers.length === 0)
    errors.push(fieldErrors.required(`${path}.containers`));
  const seen = new Set<string>();
  for (const key of ['initContainers', 'containers']) {
    const list = spec[key];
    if (!Array.isArray(list)) continue;
    list.forEach((c, i) => {
      const container = obj(c);
      const name = container.name;
      if (typeof name !== 'string' || name === '')
        errors.push(fieldErrors.required(`${path}.${key}[${i}].name`));
      else if (seen.has(name))
        errors.push({
          field: `${path}.${key}[${i}].name`,
          reason: 'FieldValueInvalid',
          detail: `Duplicate value: "${name}"`,
        });
      else seen.add(name);
      if (typeof container.image !== 'string' || container.image === '')
        errors.push(fieldErrors.required(`${path}.${key}[${i}].image`));
    });
  }
  return errors;
}

const arr = (value: unknown): Json[] => (Array.isArray(value) ? value : []);
const str = (value: unknown): string => (typeof value === 'string' ? value : '');

/** JSON with sorted keys: equal objects compare equal whatever order a patch left their keys in. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (!isObject(value)) return JSON.stringify(value ?? null);
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
}

// Go's %#v of the values these field errors carry, as the real server prints them.
const goStringMap = (value: unknown): string =>
  isObject(value)
    ? `map[string]string{${Object.keys(value)
        .sort()
        .map((k) => `${JSON.stringify(k)}:${JSON.stringify(value[k])}`)
        .join(', ')}}`
    : 'map[string]string(nil)';
const goSlice = (type: string, value: unknown, item: (v: Json) => string): string =>
  Array.isArray(value) ? `[]${type}{${value.map(item).join(', ')}}` : `[]${type}(nil)`;
const goString = (v: Json): string => JSON.stringify(typeof v === 'string' ? v : '');

function goLabelSelector(selector: JsonObject): string {
  const requirement = (v: Json): string => {
    const r = obj(v);
    return `v1.LabelSelectorRequirement{Key:${goString(r.key ?? '')}, Operator:${goString(r.operator ?? '')}, Values:${goSlice('string', r.values, goString)}}`;
  };
  return `v1.LabelSelector{MatchLabels:${goStringMap(selector.matchLabels)}, MatchExpressions:${goSlice('v1.LabelSelectorRequirement', selector.matchExpressions, requirement)}}`;
}

/** metav1.LabelSelectorAsSelector(…).Matches: matchLabels and the four expression operators. */
export function selectorMatches(selector: JsonObject, labels: JsonObject): boolean {
  const has = (key: string): boolean => Object.hasOwn(labels, key);
  if (Object.entries(obj(selector.matchLabels)).some(([k, v]) => labels[k] !== v)) return false;
  return arr(selector.matchExpressions).every((e) => {
    const { key, operator, values } = obj(e);
    const k = str(key);
    const listed = arr(values).includes(labels[k] ?? null);
    switch (operator) {
      case 'In':
        return has(k) && listed;
      case 'NotIn':
        return !has(k) || !listed;
      case 'Exists':
        return has(k);
      case 'DoesNotExist':
        return !has(k);
      default:
        return false;
    }
  });
}

const isEmptySelector = (selector: JsonObject): boolean =>
  Object.keys(obj(selector.matchLabels)).length + arr(selector.matchExpressions).length === 0;

function defaultPodTemplate(spec: JsonObject): void {
  const template = obj(spec.template);
  const podSpec = obj(template.spec);
  defaultPodSpec(podSpec);
  template.spec = podSpec;
  spec.template = template;
}

function defaultDeploymentSpec(spec: JsonObject): void {
  setDefault(spec, 'replicas', 1);
  setDefault(spec, 'revisionHistoryLimit', 10);
  setDefault(spec, 'progressDeadlineSeconds', 600);
  const strategy = obj(spec.strategy);
  setDefault(strategy, 'type', 'RollingUpdate');
  if (strategy.type === 'RollingUpdate') {
    const rolling = obj(strategy.rollingUpdate);
    setDefault(rolling, 'maxUnavailable', '25%');
    setDefault(rolling, 'maxSurge', '25%');
    strategy.rollingUpdate = rolling;
  }
  spec.strategy = strategy;
  defaultPodTemplate(spec);
}

function defaultStatefulSetSpec(spec: JsonObject): void {
  setDefault(spec, 'replicas', 1);
  setDefault(spec, 'podManagementPolicy', 'OrderedReady');
  setDefault(spec, 'revisionHistoryLimit', 10);
  setDefault(spec, 'updateStrategy', { type: 'RollingUpdate', rollingUpdate: { partition: 0 } });
  setDefault(spec, 'persistentVolumeClaimRetentionPolicy', {
    whenDeleted: 'Retain',
    whenScaled: 'Retain',
  });
  defaultPodTemplate(spec);
}

/** Service defaults, without the cluster IP the real server allocates (the double has no IPAM). */
function defaultServiceSpec(spec: JsonObject): void {
  setDefault(spec, 'type', 'ClusterIP');
  setDefault(spec, 'sessionAffinity', 'None');
  if (spec.type !== 'ExternalName') setDefault(spec, 'internalTrafficPolicy', 'Cluster');
  for (const p of arr(spec.ports)) {
    if (!isObject(p)) continue;
    setDefault(p, 'protocol', 'TCP');
    if (p.targetPort === undefined || p.targetPort === 0 || p.targetPort === '')
      p.targetPort = p.port ?? 0;
  }
}

const RBAC_GROUP = 'rbac.authorization.k8s.io';

/** Users and groups belong to the RBAC group when a subject names none. */
function defaultSubjects(binding: JsonObject): void {
  for (const s of arr(binding.subjects))
    if (isObject(s) && (s.kind === 'User' || s.kind === 'Group'))
      setDefault(s, 'apiGroup', RBAC_GROUP);
}

function defaultCrdSpec(spec: JsonObject): void {
  const names = obj(spec.names);
  setDefault(names, 'singular', str(names.kind).toLowerCase());
  if (str(names.kind) !== '') setDefault(names, 'listKind', `${str(names.kind)}List`);
  spec.names = names;
  setDefault(spec, 'conversion', { strategy: 'None' });
}

/**
 * The status the apiextensions controllers give a CRD within moments of its creation (names
 * accepted, Established), set at once: the double serves its resources from the create on.
 */
function establishedCrdStatus(spec: JsonObject): JsonObject {
  const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  const condition = (type: string, reason: string, message: string): JsonObject => ({
    type,
    status: 'True',
    lastTransitionTime: now,
    reason,
    message,
  });
  return {
    conditions: [
      condition('NamesAccepted', 'NoConflicts', 'no conflicts found'),
      condition('Established', 'InitialNamesAccepted', 'the initial names have been accepted'),
    ],
    acceptedNames: clone(obj(spec.names)),
    storedVersions: arr(spec.versions)
      .filter((v) => isObject(v) && v.storage === true)
      .map((v) => obj(v).name ?? ''),
  };
}

/** The StatefulSet spec fields an update may change (ValidateStatefulSetUpdate). */
const STATEFULSET_MUTABLE = [
  'replicas',
  'ordinals',
  'template',
  'updateStrategy',
  'revisionHistoryLimit',
  'persistentVolumeClaimRetentionPolicy',
  'minReadySeconds',
];

/** Deployments and StatefulSets: selector, its match with the pod template, the pod template. */
function validateWorkload(object: KubeObject, old: KubeObject | undefined): FieldError[] {
  const spec = obj(object.spec);
  const errors: FieldError[] = [];
  const selector = spec.selector;
  if (!isObject(selector)) errors.push(fieldErrors.required('spec.selector'));
  else if (isEmptySelector(selector))
    errors.push(
      fieldErrors.invalidRendered(
        'spec.selector',
        goLabelSelector(selector),
        `empty selector is invalid for ${object.kind.toLowerCase()}`,
      ),
    );
  const template = obj(spec.template);
  const labels = obj(template.metadata).labels;
  // A missing selector selects nothing (so never matches); an empty one is reported above.
  const matches =
    isObject(selector) && (isEmptySelector(selector) || selectorMatches(selector, obj(labels)));
  if (!matches)
    errors.push(
      fieldErrors.invalidRendered(
        'spec.template.metadata.labels',
        goStringMap(labels),
        '`selector` does not match template `labels`',
      ),
    );
  const podSpec = obj(template.spec);
  errors.push(...validatePodSpec(podSpec, 'spec.template.spec'));
  if (podSpec.restartPolicy !== 'Always')
    errors.push(
      fieldErrors.notSupported('spec.template.spec.restartPolicy', podSpec.restartPolicy ?? '', [
        'Always',
      ]),
    );
  if (!old) return errors;
  const oldSpec = obj(old.spec);
  if (object.kind === 'Deployment') {
    if (isObject(selector) && canonical(selector) !== canonical(oldSpec.selector))
      errors.push(
        fieldErrors.invalidRendered(
          'spec.selector',
          goLabelSelector(selector),
          'field is immutable',
        ),
      );
    return errors;
  }
  const frozen = (s: JsonObject): string =>
    canonical(
      Object.fromEntries(Object.entries(s).filter(([k]) => !STATEFULSET_MUTABLE.includes(k))),
    );
  if (frozen(spec) !== frozen(oldSpec))
    errors.push(
      fieldErrors.forbidden(
        'spec',
        "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
      ),
    );
  return errors;
}

const PORT_RANGE = 'must be between 1 and 65535, inclusive';
const isPort = (value: unknown): boolean =>
  typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65535;

/** validation.IsValidPortName: an IANA service name. */
function portNameErrors(name: string): string[] {
  const errors: string[] = [];
  if (name.length > 15) errors.push('must be no more than 15 characters');
  if (!/^[-a-z0-9]+$/.test(name))
    errors.push('must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)');
  if (!/[a-z]/.test(name)) errors.push('must contain at least one letter (a-z)');
  if (name.includes('--')) errors.push('must not contain consecutive hyphens');
  if (name.startsWith('-') || name.endsWith('-'))
    errors.push('must not begin or end with a hyphen');
  return errors;
}

const SERVICE_TYPES = ['ClusterIP', 'ExternalName', 'LoadBalancer', 'NodePort'];

/** Service: type, ports (required unless headless or ExternalName), names, numbers, targets. */
function validateService(spec: JsonObject): FieldError[] {
  const errors: FieldError[] = [];
  const ports = arr(spec.ports);
  if (ports.length === 0 && spec.clusterIP !== 'None' && spec.type !== 'ExternalName')
    errors.push(fieldErrors.required('spec.ports'));
  if (!SERVICE_TYPES.includes(str(spec.type)))
    errors.push(fieldErrors.notSupported('spec.type', spec.type ?? '', SERVICE_TYPES));
  const names = new Set<string>();
  ports.forEach((p, i) => {
    const port = obj(p);
    const path = `spec.ports[${i}]`;
    const name = str(port.name);
    if (ports.length > 1 && name === '') errors.push(fieldErrors.required(`${path}.name`));
    else if (name !== '') {
      if (name.length > 63 || !LABEL.test(name))
        errors.push(
          fieldErrors.invalid(
            `${path}.name`,
            name,
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
          ),
        );
      if (names.has(name)) errors.push(fieldErrors.duplicate(`${path}.name`, name));
      names.add(name);
    }
    if (!isPort(port.port))
      errors.push(fieldErrors.invalid(`${path}.port`, port.port ?? 0, PORT_RANGE));
    const target = port.targetPort;
    if (typeof target === 'string')
      errors.push(
        ...portNameErrors(target).map((why) =>
          fieldErrors.invalid(`${path}.targetPort`, target, why),
        ),
      );
    else if (!isPort(target))
      errors.push(fieldErrors.invalid(`${path}.targetPort`, target ?? 0, PORT_RANGE));
  });
  return errors;
}

/** Roles and ClusterRoles: every rule needs verbs, and resource rules groups and resources. */
function validateRules(role: JsonObject, namespaced: boolean): FieldError[] {
  return arr(role.rules).flatMap((r, i) => {
    const rule = obj(r);
    const path = `rules[${i}]`;
    const errors: FieldError[] = [];
    if (arr(rule.verbs).length === 0)
      errors.push(fieldErrors.required(`${path}.verbs`, 'verbs must contain at least one value'));
    const urls = arr(rule.nonResourceURLs);
    if (urls.length > 0) {
      const rendered = goSlice('string', urls, goString);
      if (namespaced)
        errors.push(
          fieldErrors.invalidRendered(
            `${path}.nonResourceURLs`,
            rendered,
            'namespaced rules cannot apply to non-resource URLs',
          ),
        );
      if (['apiGroups', 'resources', 'resourceNames'].some((k) => arr(rule[k]).length > 0))
        errors.push(
          fieldErrors.invalidRendered(
            `${path}.nonResourceURLs`,
            rendered,
            'rules cannot apply to both regular resources and non-resource URLs',
          ),
        );
      return errors;
    }
    if (arr(rule.apiGroups).length === 0)
      errors.push(
        fieldErrors.required(
          `${path}.apiGroups`,
          'resource rules must supply at least one api group',
        ),
      );
    if (arr(rule.resources).length === 0)
      errors.push(
        fieldErrors.required(
          `${path}.resources`,
          'resource rules must supply at least one resource',
        ),
      );
    return errors;
  });
}

const goRoleRef = (ref: JsonObject): string =>
  `rbac.RoleRef{APIGroup:${goString(ref.apiGroup ?? '')}, Kind:${goString(ref.kind ?? '')}, Name:${goString(ref.name ?? '')}}`;

/** RoleBindings and ClusterRoleBindings: a roleRef (fixed once created) and valid subjects. */
function validateBinding(binding: JsonObject, old: JsonObject | undefined): FieldError[] {
  const cluster = binding.kind === 'ClusterRoleBinding';
  const ref = obj(binding.roleRef);
  const errors: FieldError[] = [];
  if (ref.apiGroup !== RBAC_GROUP)
    errors.push(fieldErrors.notSupported('roleRef.apiGroup', ref.apiGroup ?? '', [RBAC_GROUP]));
  const kinds = cluster ? ['ClusterRole'] : ['Role', 'ClusterRole'];
  if (!kinds.includes(str(ref.kind)))
    errors.push(fieldErrors.notSupported('roleRef.kind', ref.kind ?? '', kinds));
  if (str(ref.name) === '') errors.push(fieldErrors.required('roleRef.name'));
  arr(binding.subjects).forEach((s, i) => {
    const subject = obj(s);
    const path = `subjects[${i}]`;
    if (str(subject.name) === '') errors.push(fieldErrors.required(`${path}.name`));
    switch (subject.kind) {
      case 'ServiceAccount':
        if (str(subject.apiGroup) !== '')
          errors.push(fieldErrors.notSupported(`${path}.apiGroup`, subject.apiGroup, ['']));
        if (cluster && str(subject.namespace) === '')
          errors.push(fieldErrors.required(`${path}.namespace`));
        break;
      case 'User':
      case 'Group':
        if (subject.apiGroup !== RBAC_GROUP)
          errors.push(
            fieldErrors.notSupported(`${path}.apiGroup`, subject.apiGroup ?? '', [RBAC_GROUP]),
          );
        break;
      default:
        errors.push(
          fieldErrors.notSupported(`${path}.kind`, subject.kind ?? '', [
            'ServiceAccount',
            'User',
            'Group',
          ]),
        );
    }
  });
  if (old && canonical(old.roleRef) !== canonical(binding.roleRef))
    errors.push(fieldErrors.invalidRendered('roleRef', goRoleRef(ref), 'cannot change roleRef'));
  return errors;
}

function validateNetworkPolicy(spec: JsonObject): FieldError[] {
  const types = arr(spec.policyTypes);
  if (types.length > 2)
    return [
      fieldErrors.invalidRendered(
        'spec.policyTypes',
        goSlice('networking.PolicyType', types, goString),
        'may not specify more than two policyTypes',
      ),
    ];
  return types.flatMap((t, i) =>
    t === 'Ingress' || t === 'Egress'
      ? []
      : [fieldErrors.notSupported(`spec.policyTypes[${i}]`, t, ['Ingress', 'Egress'])],
  );
}

/** An Ingress backend: a service with a name and a port name or number (or a resource). */
function validateIngressBackend(backend: JsonObject, path: string): FieldError[] {
  const service = backend.service;
  if (isObject(service) && isObject(backend.resource))
    return [fieldErrors.invalid(path, '', 'cannot set both resource and service backends')];
  if (isObject(backend.resource)) return [];
  if (!isObject(service))
    return [fieldErrors.invalid(path, '', 'resource or service backend is required')];
  const errors: FieldError[] = [];
  if (str(service.name) === '') errors.push(fieldErrors.required(`${path}.service.name`));
  const port = obj(service.port);
  const name = str(port.name);
  const number = port.number ?? 0;
  if (name !== '' && number !== 0)
    errors.push(fieldErrors.invalid(path, '', 'cannot set both port name & port number'));
  else if (name !== '')
    errors.push(
      ...portNameErrors(name).map((why) =>
        fieldErrors.invalid(`${path}.service.port.name`, name, why),
      ),
    );
  else if (number !== 0) {
    if (!isPort(number))
      errors.push(fieldErrors.invalid(`${path}.service.port.number`, number, PORT_RANGE));
  } else errors.push(fieldErrors.required(path, 'port name or number is required'));
  return errors;
}

const PATH_TYPES = ['Exact', 'ImplementationSpecific', 'Prefix'];

/** Ingress: rules or a default backend; each HTTP path with a pathType and a backend. */
function validateIngress(spec: JsonObject): FieldError[] {
  const errors: FieldError[] = [];
  const rules = arr(spec.rules);
  rules.forEach((r, i) => {
    const http = obj(r).http;
    if (!isObject(http)) return;
    const base = `spec.rules[${i}].http.paths`;
    const paths = arr(http.paths);
    if (paths.length === 0) errors.push(fieldErrors.required(base));
    paths.forEach((p, j) => {
      const entry = obj(p);
      const path = `${base}[${j}]`;
      const pathType = entry.pathType;
      if (pathType === undefined || pathType === null) {
        errors.push(fieldErrors.required(`${path}.pathType`, 'pathType must be specified'));
        return;
      }
      const text = str(entry.path);
      if (!PATH_TYPES.includes(str(pathType)))
        errors.push(fieldErrors.notSupported(`${path}.pathType`, pathType, PATH_TYPES));
      else if (!text.startsWith('/') && (pathType !== 'ImplementationSpecific' || text !== ''))
        errors.push(fieldErrors.invalid(`${path}.path`, text, 'must be an absolute path'));
      errors.push(...validateIngressBackend(obj(entry.backend), `${path}.backend`));
    });
  });
  if (isObject(spec.defaultBackend))
    errors.push(...validateIngressBackend(spec.defaultBackend, 'spec.defaultBackend'));
  else if (rules.length === 0)
    errors.push(
      fieldErrors.invalidRendered(
        'spec',
        goSlice('networking.IngressRule', spec.rules, () => 'networking.IngressRule{…}'),
        'either `defaultBackend` or `rules` must be specified',
      ),
    );
  return errors;
}

/** extensions validation's ValidatePositiveIntOrPercent and IsNotMoreThan100Percent. */
function intOrPercentErrors(value: Json, path: string): FieldError[] {
  if (typeof value === 'number')
    return value < 0
      ? [fieldErrors.invalid(path, value, 'must be greater than or equal to 0')]
      : [];
  const text = str(value);
  if (!/^[0-9]+%$/.test(text))
    return [
      fieldErrors.invalid(
        path,
        text,
        "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
      ),
    ];
  return Number(text.slice(0, -1)) > 100
    ? [fieldErrors.invalid(path, text, 'must not be greater than 100%')]
    : [];
}

/**
 * PodDisruptionBudget: at most one of minAvailable and maxUnavailable, each a count or a
 * percentage. A missing selector is valid in policy/v1 (it selects no pods), as on a real server.
 */
function validatePdb(spec: JsonObject): FieldError[] {
  const errors: FieldError[] = [];
  const { minAvailable, maxUnavailable } = spec;
  if (minAvailable !== undefined && maxUnavailable !== undefined)
    errors.push(
      fieldErrors.invalidRendered(
        'spec',
        'policy.PodDisruptionBudgetSpec{…}',
        'minAvailable and maxUnavailable cannot be both set',
      ),
    );
  if (minAvailable !== undefined)
    errors.push(...intOrPercentErrors(minAvailable, 'spec.minAvailable'));
  if (maxUnavailable !== undefined)
    errors.push(...intOrPercentErrors(maxUnavailable, 'spec.maxUnavailable'));
  return errors;
}

/** The CRD checks that keep the double able to serve what it accepts (apiextensions validation). */
function validateCrd(crd: KubeObject): FieldError[] {
  const spec = obj(crd.spec);
  const names = obj(spec.names);
  const group = str(spec.group);
  const errors: FieldError[] = [];
  const name = crd.metadata.name ?? '';
  if (name !== `${str(names.plural)}.${group}`)
    errors.push(
      fieldErrors.invalid('metadata.name', name, 'must be spec.names.plural+"."+spec.group'),
    );
  if (group === '') errors.push(fieldErrors.required('spec.group'));
  else if (!group.includes('.'))
    errors.push(
      fieldErrors.invalid('spec.group', group, 'should be a domain with at least one dot'),
    );
  const scope = spec.scope;
  if (scope === undefined || scope === '') errors.push(fieldErrors.required('spec.scope'));
  else if (scope !== 'Cluster' && scope !== 'Namespaced')
    errors.push(fieldErrors.notSupported('spec.scope', scope, ['Cluster', 'Namespaced']));
  const versions = arr(spec.versions);
  versions.forEach((v, i) => {
    const schema = obj(obj(v).schema).openAPIV3Schema;
    if (!isObject(schema))
      errors.push(
        fieldErrors.required(`spec.versions[${i}].schema.openAPIV3Schema`, 'schemas are required'),
      );
    else errors.push(...ruleCompileErrors(schema, `spec.versions[${i}].schema.openAPIV3Schema`));
  });
  if (versions.filter((v) => obj(v).storage === true).length !== 1)
    errors.push(
      fieldErrors.invalidRendered(
        'spec.versions',
        goSlice(
          'apiextensions.CustomResourceDefinitionVersion',
          spec.versions,
          () => 'apiextensions.CustomResourceDefinitionVersion{…}',
        ),
        'must have exactly one version marked as storage version',
      ),
    );
  for (const key of ['plural', 'singular', 'kind', 'listKind'])
    if (str(names[key]) === '') errors.push(fieldErrors.required(`spec.names.${key}`));
  return errors;
}

/** Server-side defaults and resets a built-in object gets on create (the ones controllers read). */
export function prepareBuiltInForCreate(object: KubeObject): void {
  defaultBuiltIn(object);
  const spec = obj(object.spec);
  switch (object.kind) {
    case 'Namespace':
      object.spec = { finalizers: ['kubernetes'] };
      object.status = { phase: 'Active' };
      object.metadata.labels = {
        ...object.metadata.labels,
        'kubernetes.io/metadata.name': object.metadata.name ?? '',
      };
      break;
    case 'Pod':
      defaultPodSpec(spec);
      setDefault(spec, 'serviceAccountName', 'default');
      setDefault(spec, 'enableServiceLinks', true);
      setDefault(spec, 'priority', 0);
      object.spec = spec;
      object.status = { phase: 'Pending', qosClass: 'BestEffort' };
      break;
    case 'Job': {
      const uid = object.metadata.uid ?? '';
      const name = object.metadata.name ?? '';
      setDefault(spec, 'parallelism', 1);
      setDefault(spec, 'completions', 1);
      setDefault(spec, 'backoffLimit', 6);
      setDefault(spec, 'completionMode', 'NonIndexed');
      setDefault(spec, 'suspend', false);
      setDefault(spec, 'podReplacementPolicy', 'TerminatingOrFailed');
      const controllerLabels = { 'batch.kubernetes.io/controller-uid': uid };
      setDefault(spec, 'selector', { matchLabels: controllerLabels });
      const template = obj(spec.template);
      const templateMeta = obj(template.metadata);
      templateMeta.labels = {
        ...obj(templateMeta.labels),
        'batch.kubernetes.io/controller-uid': uid,
        'batch.kubernetes.io/job-name': name,
        'controller-uid': uid,
        'job-name': name,
      };
      template.metadata = templateMeta;
      const podSpec = obj(template.spec);
      defaultPodSpec(podSpec);
      template.spec = podSpec;
      spec.template = template;
      object.spec = spec;
      object.status = {};
      break;
    }
    case 'Secret': {
      setDefault(object as unknown as JsonObject, 'type', 'Opaque');
      break;
    }
    // The kinds below get their defaults from defaultBuiltIn (on every write); a create resets
    // their status to the one a new object starts with.
    case 'Deployment':
    case 'ResourceQuota':
      object.status = {};
      break;
    case 'Service':
    case 'Ingress':
      object.status = { loadBalancer: {} };
      break;
    case 'StatefulSet':
      object.status = { replicas: 0, availableReplicas: 0 };
      break;
    case 'PersistentVolumeClaim':
      object.status = { phase: 'Pending' };
      break;
    case 'PodDisruptionBudget':
      object.status = {
        disruptionsAllowed: 0,
        currentHealthy: 0,
        desiredHealthy: 0,
        expectedPods: 0,
      };
      break;
    case 'CustomResourceDefinition':
      object.status = establishedCrdStatus(obj(object.spec));
      break;
  }
}

/**
 * The defaults the real server applies on every write (its SetDefaults_* functions), for the kinds
 * a chart renders: a re-apply that leaves them out gets them again. (Pods and Jobs get theirs from
 * prepareBuiltInForCreate, on create only.)
 */
export function defaultBuiltIn(object: KubeObject): void {
  const spec = obj(object.spec);
  switch (object.kind) {
    case 'Deployment':
      defaultDeploymentSpec(spec);
      break;
    case 'StatefulSet':
      defaultStatefulSetSpec(spec);
      break;
    case 'Service':
      defaultServiceSpec(spec);
      break;
    case 'PersistentVolumeClaim':
      setDefault(spec, 'volumeMode', 'Filesystem');
      break;
    case 'NetworkPolicy':
      // A policy that names no types is an Ingress policy, and an Egress one when it has egress rules.
      if (arr(spec.policyTypes).length === 0)
        spec.policyTypes = ['Ingress', ...(arr(spec.egress).length > 0 ? ['Egress'] : [])];
      break;
    case 'CustomResourceDefinition':
      defaultCrdSpec(spec);
      break;
    case 'RoleBinding':
    case 'ClusterRoleBinding':
      defaultSubjects(object as unknown as JsonObject);
      return;
    default:
      return;
  }
  object.spec = spec;
}

/** Built-in validation, the checks a controller's mistakes would hit first. */
export function validateBuiltIn(object: KubeObject, old: KubeObject | undefined): FieldError[] {
  switch (object.kind) {
    case 'Pod':
      return validatePodSpec(obj(object.spec), 'spec');
    case 'Job': {
      const spec = obj(object.spec);
      const podSpec = obj(obj(spec.template).spec);
      const errors = validatePodSpec(podSpec, 'spec.template.spec');
      if (podSpec.restartPolicy !== 'Never' && podSpec.restartPolicy !== 'OnFailure')
        errors.push(
          fieldErrors.required(
            'spec.template.spec.restartPolicy',
            'valid values: "OnFailure", "Never"',
          ),
        );
      if (old) {
        const oldSpec = obj(old.spec);
        if (
          JSON.stringify(oldSpec.template) !== JSON.stringify(spec.template) &&
          oldSpec.suspend !== true
        )
          errors.push(
            fieldErrors.invalidRendered(
              'spec.template',
              'core.PodTemplateSpec{…}',
              'field is immutable',
            ),
          );
        if (JSON.stringify(oldSpec.selector) !== JSON.stringify(spec.selector))
          errors.push(
            fieldErrors.invalidRendered(
              'spec.selector',
              'v1.LabelSelector{…}',
              'field is immutable',
            ),
          );
      }
      return errors;
    }
    case 'Secret': {
      const data = obj((object as unknown as JsonObject).data);
      return Object.entries(data)
        .filter(([, v]) => typeof v !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(v))
        .map(([k]) =>
          fieldErrors.invalid(`data[${k}]`, '<secret contents redacted>', 'illegal base64 data'),
        );
    }
    case 'Deployment':
    case 'StatefulSet':
      return validateWorkload(object, old);
    case 'Service':
      return validateService(obj(object.spec));
    case 'Role':
    case 'ClusterRole':
      return validateRules(object as unknown as JsonObject, object.kind === 'Role');
    case 'RoleBinding':
    case 'ClusterRoleBinding':
      return validateBinding(
        object as unknown as JsonObject,
        old as unknown as JsonObject | undefined,
      );
    case 'NetworkPolicy':
      return validateNetworkPolicy(obj(object.spec));
    case 'Ingress':
      return validateIngress(obj(object.spec));
    case 'PodDisruptionBudget':
      return validatePdb(obj(object.spec));
    case 'CustomResourceDefinition':
      return validateCrd(object);
    default:
      return [];
  }
}

/** Secrets: stringData is write-only and folds into data, as the real server does. */
export function foldStringData(object: KubeObject): void {
  if (object.kind !== 'Secret') return;
  const body = object as unknown as JsonObject;
  const stringData = body.stringData;
  if (!isObject(stringData)) return;
  const data = obj(body.data);
  for (const [k, v] of Object.entries(stringData))
    data[k] = Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64');
  body.data = data;
  delete body.stringData;
}

const GENERATION_KINDS = new Set([
  'Job',
  'Deployment',
  'StatefulSet',
  'NetworkPolicy',
  'Ingress',
  'PodDisruptionBudget',
  'CustomResourceDefinition',
]);

/** Types whose metadata.generation the server maintains (bumped on spec changes). */
export const hasGeneration = (type: ResourceType): boolean =>
  type.custom || GENERATION_KINDS.has(type.kind);
