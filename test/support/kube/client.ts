// The one place the double's own tests import @kubernetes/client-node: kiln's code reaches it
// only through src/kubernetes/, and these helpers keep the tests to the same shape.
import * as k8s from '@kubernetes/client-node';

export { k8s };

/**
 * A client-node config for the double: pass the server's `url` (certificate not checked) or the
 * server itself, whose `caPem` (TLS) the client then verifies against.
 */
export function kubeConfigFor(
  target: string | { url: string; caPem?: string },
  namespace = 'default',
  token = 'kiln-double',
): k8s.KubeConfig {
  const { url: server, caPem } = typeof target === 'string' ? { url: target } : target;
  const config = new k8s.KubeConfig();
  config.loadFromOptions({
    clusters: [
      caPem === undefined
        ? { name: 'double', server, skipTLSVerify: true }
        : { name: 'double', server, caData: Buffer.from(caPem).toString('base64') },
    ],
    users: [{ name: 'double', token }],
    contexts: [{ name: 'double', cluster: 'double', user: 'double', namespace }],
    currentContext: 'double',
  });
  return config;
}

/** The Status body of a failed client-node call (ApiException.body is a JSON string). */
export function statusOf(error: unknown): {
  code: number;
  reason?: string;
  message?: string;
  details?: any;
} {
  if (!(error instanceof k8s.ApiException)) throw error;
  const body =
    typeof error.body === 'string' ? (JSON.parse(error.body) as object) : (error.body as object);
  return { code: error.code, ...body };
}

export async function expectStatus(
  promise: Promise<unknown>,
): Promise<ReturnType<typeof statusOf>> {
  try {
    await promise;
  } catch (error) {
    return statusOf(error);
  }
  throw new Error('expected the call to fail with a Status');
}

export const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
export const strategic = k8s.setHeaderOptions(
  'Content-Type',
  k8s.PatchStrategy.StrategicMergePatch,
);
export const apply = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply);

export const FIXTURES_DIR = 'test/support/kube/fixtures';

/** Polls until `check` returns a value other than undefined (or throws after `timeoutMs`). */
export async function eventually<T>(
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 5000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
