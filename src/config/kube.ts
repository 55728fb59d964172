import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Env } from './reader.js';

export type KubeLocation =
  | { readonly kind: 'file'; readonly path: string }
  | { readonly kind: 'cluster' }
  | { readonly kind: 'none' };

export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const DNS_SUBDOMAIN =
  /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * The places client-node's loadFromDefault() looks, in its order, read here so that config stays
 * the only reader of the environment: the first existing file of KUBECONFIG, ~/.kube/config, then
 * the pod's service account.
 */
export function kubeLocation(env: Env, home: string): KubeLocation {
  const kubeconfig = env['KUBECONFIG'];
  if (kubeconfig !== undefined && kubeconfig !== '') {
    const path = kubeconfig.split(':').find((p) => p !== '' && existsSync(p));
    return path === undefined ? { kind: 'none' } : { kind: 'file', path };
  }
  const path = join(home, '.kube', 'config');
  if (existsSync(path)) return { kind: 'file', path };
  return (env['KUBERNETES_SERVICE_HOST'] ?? '') !== '' &&
    existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token')
    ? { kind: 'cluster' }
    : { kind: 'none' };
}
