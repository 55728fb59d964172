import { fieldErrors, type FieldError } from './errors.js';
import {
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

/** Server-side defaults and resets a built-in object gets on create (the ones controllers read). */
export function prepareBuiltInForCreate(object: KubeObject): void {
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
  }
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

/** Types whose metadata.generation the server maintains (bumped on spec changes). */
export const hasGeneration = (type: ResourceType): boolean => type.custom || type.kind === 'Job';
