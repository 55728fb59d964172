import type { V1Container, V1Job } from '@kubernetes/client-node';

import { isPinnedByDigest } from './images.js';
import { SOURCE_SCRIPT } from './source-container.js';
import { STEP_SCRIPT } from './steps.js';

/**
 * The hardening rules every build Job keeps (docs/adr/0014-job-translation.md), as problems found
 * in `job`: empty when it keeps them all. The table tests check every translation with it; the
 * reconciler may check a Job with it before creating one.
 */
export function hardeningProblems(job: V1Job): string[] {
  const problems: string[] = [];
  const spec = job.spec;
  const pod = spec?.template.spec;
  if (spec === undefined || pod === undefined) return ['the Job has no pod template'];
  if (spec.backoffLimit !== 0) problems.push('backoffLimit must be 0');
  if (!Number.isInteger(spec.activeDeadlineSeconds) || (spec.activeDeadlineSeconds ?? 0) <= 0) {
    problems.push('activeDeadlineSeconds must be a positive integer');
  }
  if (spec.ttlSecondsAfterFinished !== undefined) {
    problems.push('ttlSecondsAfterFinished is set only after the logs are stored');
  }
  if ((job.metadata?.ownerReferences ?? []).length > 0) {
    problems.push('ownerReferences are set by the reconciler');
  }
  for (const [where, labels] of [
    ['Job', job.metadata?.labels],
    ['pod template', spec.template.metadata?.labels],
  ] as const) {
    if (labels?.['app.kubernetes.io/managed-by'] !== 'kiln')
      problems.push(`the ${where} must carry app.kubernetes.io/managed-by=kiln`);
    for (const key of ['kiln.dev/build-id', 'kiln.dev/tenant-id', 'kiln.dev/project-id']) {
      if (!labels?.[key]) problems.push(`the ${where} must carry ${key}`);
    }
  }
  if (pod.restartPolicy !== 'Never') problems.push('restartPolicy must be Never');
  if (pod.automountServiceAccountToken !== false)
    problems.push('automountServiceAccountToken must be false');
  if (pod.enableServiceLinks !== false) problems.push('enableServiceLinks must be false');
  for (const key of Object.keys(pod)) {
    // hostUsers: false is the opposite of a host namespace: the pod gets a user namespace.
    if (key === 'hostUsers' && pod.hostUsers === false) continue;
    if (key.startsWith('host')) problems.push(`the pod must not set ${key}`);
  }
  if (pod.securityContext?.seccompProfile?.type !== 'RuntimeDefault')
    problems.push('the pod must use the RuntimeDefault seccomp profile');
  for (const volume of pod.volumes ?? []) {
    if (volume.hostPath !== undefined) problems.push(`volume ${volume.name} is a hostPath`);
  }
  for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
    problems.push(...containerProblems(container));
  }
  return problems;
}

function containerProblems(container: V1Container): string[] {
  const problems: string[] = [];
  const at = `container ${container.name}`;
  if (container.image === undefined || !isPinnedByDigest(container.image))
    problems.push(`${at}: image ${container.image ?? '(none)'} is not pinned by digest`);
  for (const kind of ['requests', 'limits'] as const) {
    for (const resource of ['cpu', 'memory', 'ephemeral-storage']) {
      if (container.resources?.[kind]?.[resource] === undefined)
        problems.push(`${at}: no ${resource} in resources.${kind}`);
    }
  }
  if (container.securityContext === undefined) problems.push(`${at}: no securityContext`);
  if (container.securityContext?.privileged === true) problems.push(`${at}: privileged`);
  if (container.terminationMessagePolicy !== 'FallbackToLogsOnError')
    problems.push(`${at}: terminationMessagePolicy must be FallbackToLogsOnError`);
  const argv = [...(container.command ?? []), ...(container.args ?? [])];
  argv.forEach((arg, index) => {
    if (arg === '-c' && index > 0 && /(?:^|\/)(?:ba|da|a)?sh$/.test(argv[index - 1] ?? '')) {
      if (argv[index + 1] !== SOURCE_SCRIPT && argv[index + 1] !== STEP_SCRIPT)
        problems.push(`${at}: a shell runs a script other than kiln's constant scripts`);
    }
  });
  return problems;
}
