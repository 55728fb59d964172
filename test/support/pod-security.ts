/**
 * The Pod Security Standards' `restricted` profile (kubernetes.io/docs/concepts/security/
 * pod-security-standards, policy version latest), as checks on a pod spec: what Pod Security
 * admission would refuse in a namespace that enforces `restricted`. Each violation names its rule.
 */

interface SecurityContext {
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  runAsNonRoot?: boolean;
  runAsUser?: number;
  seccompProfile?: { type?: string };
  capabilities?: { add?: string[]; drop?: string[] };
  procMount?: string;
}

interface Container {
  name: string;
  securityContext?: SecurityContext;
  ports?: Array<{ hostPort?: number }>;
}

export interface PodSpec {
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  securityContext?: SecurityContext & { sysctls?: Array<{ name: string }> };
  containers: Container[];
  initContainers?: Container[];
  volumes?: Array<Record<string, unknown> & { name: string }>;
}

const ALLOWED_VOLUME_TYPES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);
const SAFE_SYSCTLS = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);

export function restrictedViolations(spec: PodSpec): string[] {
  const out: string[] = [];
  const pod = spec.securityContext ?? {};
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) out.push('host namespaces');
  for (const sysctl of pod.sysctls ?? [])
    if (!SAFE_SYSCTLS.has(sysctl.name)) out.push(`unsafe sysctl ${sysctl.name}`);
  for (const volume of spec.volumes ?? []) {
    const types = Object.keys(volume).filter((k) => k !== 'name');
    for (const type of types)
      if (!ALLOWED_VOLUME_TYPES.has(type)) out.push(`volume ${volume.name}: type ${type}`);
  }
  if (pod.runAsUser === 0) out.push('pod runAsUser 0');
  const podSeccomp = pod.seccompProfile?.type;
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    const sc = c.securityContext ?? {};
    const where = `container ${c.name}`;
    if (sc.privileged) out.push(`${where}: privileged`);
    if (sc.allowPrivilegeEscalation !== false)
      out.push(`${where}: allowPrivilegeEscalation != false`);
    if (sc.runAsNonRoot !== true && pod.runAsNonRoot !== true) out.push(`${where}: runAsNonRoot`);
    if (sc.runAsNonRoot === false) out.push(`${where}: runAsNonRoot false`);
    if (sc.runAsUser === 0) out.push(`${where}: runAsUser 0`);
    const seccomp = sc.seccompProfile?.type ?? podSeccomp;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') out.push(`${where}: seccomp`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) out.push(`${where}: capabilities drop ALL`);
    for (const cap of sc.capabilities?.add ?? [])
      if (cap !== 'NET_BIND_SERVICE') out.push(`${where}: capability ${cap}`);
    if (sc.procMount !== undefined && sc.procMount !== 'Default') out.push(`${where}: procMount`);
    for (const port of c.ports ?? []) if (port.hostPort) out.push(`${where}: hostPort`);
  }
  return out;
}
