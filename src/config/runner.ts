import { childEnvironmentOf } from './child-environment.js';
import type { KubeLocation } from './kube.js';
import type { EnvReader } from './reader.js';

export const ROLES = ['api', 'operator', 'all'] as const;
export type Role = (typeof ROLES)[number];

export const RUNNERS = ['local', 'kubernetes'] as const;
export type RunnerKind = (typeof RUNNERS)[number];

/** What this process serves (KILN_ROLE). */
export function readRole(read: EnvReader): Role {
  return read.oneOf('KILN_ROLE', ROLES, 'all');
}

/** Where builds run: kubernetes by default when a cluster is found, which it then requires. */
export function readRunner(read: EnvReader, kube: KubeLocation): RunnerKind {
  const runner = read.oneOf('KILN_RUNNER', RUNNERS, kube.kind === 'none' ? 'local' : 'kubernetes');
  if (runner === 'kubernetes' && kube.kind === 'none') {
    read.bad(
      'KILN_RUNNER',
      'local, or kubernetes with a kubeconfig (KUBECONFIG, ~/.kube/config) or a service account',
      'kubernetes',
    );
  }
  return runner;
}

/** KILN_LOCAL_CACHE_MAX_BYTES's default: 10 GiB of project layer caches. */
export const LOCAL_CACHE_MAX_BYTES = 10 * 2 ** 30;

/**
 * The local runner: parallel builds, where images go, how a cancelled child is stopped, how much
 * disk its layer caches may hold.
 */
export function readLocalRunner(read: EnvReader) {
  const localMaxParallel = read.integer('KILN_LOCAL_MAX_PARALLEL', 2, 1, 64);
  const localRegistry = read.value('KILN_LOCAL_REGISTRY');
  if (
    localRegistry !== undefined &&
    !/^[A-Za-z0-9.-]+(:\d+)?(\/[a-z0-9._/-]+)?$/.test(localRegistry)
  ) {
    read.bad('KILN_LOCAL_REGISTRY', 'host[:port][/path], e.g. 127.0.0.1:5000/kiln', localRegistry);
  }
  return {
    localMaxParallel,
    localRegistry,
    localInsecureRegistries: read.list('KILN_LOCAL_INSECURE_REGISTRIES'),
    localAuthFile: read.value('KILN_LOCAL_AUTHFILE'),
    cancelGraceMs: read.integer('KILN_CANCEL_GRACE_SECONDS', 10, 0, 600) * 1000,
    // Up to 1 PiB; 0 turns the layer cache off.
    localCacheMaxBytes: read.integer(
      'KILN_LOCAL_CACHE_MAX_BYTES',
      LOCAL_CACHE_MAX_BYTES,
      0,
      2 ** 50,
    ),
    childEnvironment: childEnvironmentOf(read.env),
  };
}
