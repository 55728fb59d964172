import {
  baselineViolations,
  type PodMetadata,
  type PodSpec,
  restrictedViolations,
} from './support/pod-security.js';

/**
 * The Pod Security checks (test/support/pod-security.ts) on one pod per rule: each pod starts from
 * one that passes `restricted` and changes one field, so its findings at each level are exactly
 * that rule's (kubernetes.io/docs/concepts/security/pod-security-standards).
 */

/** A pod that passes restricted, the strictest level: every case below changes one thing. */
function compliant(): PodSpec {
  return {
    securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
    containers: [
      {
        name: 'app',
        securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
      },
    ],
  };
}

/** `compliant()` with `change` applied to its (only) container's securityContext. */
function withContainer(change: Record<string, unknown>): PodSpec {
  const spec = compliant();
  Object.assign(spec.containers[0]!.securityContext!, change);
  return spec;
}

/** `compliant()` with `change` applied to its pod-level securityContext. */
function withPod(change: Record<string, unknown>): PodSpec {
  const spec = compliant();
  Object.assign(spec.securityContext!, change);
  return spec;
}

interface Case {
  rule: string;
  spec: PodSpec;
  metadata?: PodMetadata;
  baseline: string[];
  restricted: string[];
}

const cases: Case[] = [
  // Baseline controls: each refused at both levels (restricted includes baseline).
  {
    rule: 'a pod-level HostProcess',
    spec: withPod({ windowsOptions: { hostProcess: true } }),
    baseline: ['pod: hostProcess'],
    restricted: ['pod: hostProcess'],
  },
  {
    rule: 'a HostProcess container',
    spec: withContainer({ windowsOptions: { hostProcess: true } }),
    baseline: ['container app: hostProcess'],
    restricted: ['container app: hostProcess'],
  },
  {
    rule: 'the host network',
    spec: { ...compliant(), hostNetwork: true },
    baseline: ['pod: hostNetwork'],
    restricted: ['pod: hostNetwork'],
  },
  {
    rule: 'the host PID namespace',
    spec: { ...compliant(), hostPID: true },
    baseline: ['pod: hostPID'],
    restricted: ['pod: hostPID'],
  },
  {
    rule: 'the host IPC namespace',
    spec: { ...compliant(), hostIPC: true },
    baseline: ['pod: hostIPC'],
    restricted: ['pod: hostIPC'],
  },
  {
    rule: 'a privileged container',
    spec: withContainer({ privileged: true }),
    baseline: ['container app: privileged'],
    restricted: ['container app: privileged'],
  },
  {
    rule: 'a capability outside the baseline set',
    spec: withContainer({ capabilities: { drop: ['ALL'], add: ['SYS_ADMIN'] } }),
    baseline: ['container app: capability SYS_ADMIN'],
    restricted: ['container app: capability SYS_ADMIN'],
  },
  {
    rule: 'a hostPath volume',
    spec: { ...compliant(), volumes: [{ name: 'host', hostPath: { path: '/' } }] },
    baseline: ['volume host: hostPath'],
    restricted: ['volume host: type hostPath'],
  },
  {
    rule: 'a host port',
    spec: {
      ...compliant(),
      containers: [{ ...compliant().containers[0]!, ports: [{ hostPort: 8080 }] }],
    },
    baseline: ['container app: hostPort 8080'],
    restricted: ['container app: hostPort 8080'],
  },
  {
    rule: 'a probe aimed at another host',
    spec: {
      ...compliant(),
      containers: [
        { ...compliant().containers[0]!, livenessProbe: { httpGet: { host: '10.0.0.1' } } },
      ],
    },
    baseline: ['container app: livenessProbe.httpGet.host'],
    restricted: ['container app: livenessProbe.httpGet.host'],
  },
  {
    rule: 'a lifecycle hook aimed at another host',
    spec: {
      ...compliant(),
      containers: [
        {
          ...compliant().containers[0]!,
          lifecycle: { preStop: { tcpSocket: { host: 'metadata.internal' } } },
        },
      ],
    },
    baseline: ['container app: lifecycle.preStop.tcpSocket.host'],
    restricted: ['container app: lifecycle.preStop.tcpSocket.host'],
  },
  {
    rule: 'a pod-level Unconfined AppArmor profile',
    spec: withPod({ appArmorProfile: { type: 'Unconfined' } }),
    baseline: ['pod: AppArmor Unconfined'],
    restricted: ['pod: AppArmor Unconfined'],
  },
  {
    rule: 'a container Unconfined AppArmor profile',
    spec: withContainer({ appArmorProfile: { type: 'Unconfined' } }),
    baseline: ['container app: AppArmor Unconfined'],
    restricted: ['container app: AppArmor Unconfined'],
  },
  {
    rule: 'an unconfined AppArmor annotation',
    spec: compliant(),
    metadata: {
      annotations: { 'container.apparmor.security.beta.kubernetes.io/app': 'unconfined' },
    },
    baseline: ['annotation container.apparmor.security.beta.kubernetes.io/app: unconfined'],
    restricted: ['annotation container.apparmor.security.beta.kubernetes.io/app: unconfined'],
  },
  {
    rule: 'an SELinux type outside the container types',
    spec: withPod({ seLinuxOptions: { type: 'spc_t' } }),
    baseline: ['pod: SELinux type spc_t'],
    restricted: ['pod: SELinux type spc_t'],
  },
  {
    rule: 'an SELinux user and role',
    spec: withContainer({ seLinuxOptions: { user: 'system_u', role: 'system_r' } }),
    baseline: ['container app: SELinux user', 'container app: SELinux role'],
    restricted: ['container app: SELinux user', 'container app: SELinux role'],
  },
  {
    rule: 'an unmasked /proc',
    spec: withContainer({ procMount: 'Unmasked' }),
    baseline: ['container app: procMount Unmasked'],
    restricted: ['container app: procMount Unmasked'],
  },
  {
    rule: 'a pod-level Unconfined seccomp profile',
    spec: withPod({ seccompProfile: { type: 'Unconfined' } }),
    baseline: ['pod: seccomp Unconfined'],
    // Restricted also refuses the container, which now has no valid profile to inherit.
    restricted: ['pod: seccomp Unconfined', 'container app: seccomp'],
  },
  {
    rule: 'a container Unconfined seccomp profile',
    spec: withContainer({ seccompProfile: { type: 'Unconfined' } }),
    baseline: ['container app: seccomp Unconfined'],
    restricted: ['container app: seccomp Unconfined'],
  },
  {
    rule: 'a sysctl outside the safe set',
    spec: withPod({ sysctls: [{ name: 'kernel.msgmax' }] }),
    baseline: ['pod: sysctl kernel.msgmax'],
    restricted: ['pod: sysctl kernel.msgmax'],
  },

  // Values each baseline control allows: admitted at both levels.
  {
    rule: 'HostProcess false',
    spec: withPod({ windowsOptions: { hostProcess: false } }),
    baseline: [],
    restricted: [],
  },
  {
    rule: 'host port 0',
    spec: {
      ...compliant(),
      containers: [{ ...compliant().containers[0]!, ports: [{ hostPort: 0 }] }],
    },
    baseline: [],
    restricted: [],
  },
  {
    rule: 'a probe on the pod itself',
    spec: {
      ...compliant(),
      containers: [{ ...compliant().containers[0]!, readinessProbe: { tcpSocket: { host: '' } } }],
    },
    baseline: [],
    restricted: [],
  },
  {
    rule: 'Localhost and RuntimeDefault AppArmor profiles',
    spec: {
      ...withPod({ appArmorProfile: { type: 'RuntimeDefault' } }),
      initContainers: [
        {
          ...compliant().containers[0]!,
          name: 'init',
          securityContext: {
            ...compliant().containers[0]!.securityContext,
            appArmorProfile: { type: 'Localhost' },
          },
        },
      ],
    },
    metadata: {
      annotations: {
        'container.apparmor.security.beta.kubernetes.io/app': 'localhost/kiln',
        'container.apparmor.security.beta.kubernetes.io/init': 'runtime/default',
      },
    },
    baseline: [],
    restricted: [],
  },
  {
    rule: 'the container_engine_t SELinux type and a level',
    spec: withContainer({ seLinuxOptions: { type: 'container_engine_t', level: 's0:c123,c456' } }),
    baseline: [],
    restricted: [],
  },
  {
    rule: 'the Default /proc mount',
    spec: withContainer({ procMount: 'Default' }),
    baseline: [],
    restricted: [],
  },
  {
    rule: 'a Localhost seccomp profile',
    spec: withContainer({ seccompProfile: { type: 'Localhost' } }),
    baseline: [],
    restricted: [],
  },
  {
    rule: 'the safe sysctls, tcp_rmem included',
    spec: withPod({
      sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start' }, { name: 'net.ipv4.tcp_rmem' }],
    }),
    baseline: [],
    restricted: [],
  },
  {
    rule: 'NET_BIND_SERVICE',
    spec: withContainer({ capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] } }),
    baseline: [],
    restricted: [],
  },

  // What baseline admits and restricted refuses.
  {
    rule: 'a baseline capability other than NET_BIND_SERVICE',
    spec: withContainer({ capabilities: { drop: ['ALL'], add: ['CHOWN'] } }),
    baseline: [],
    restricted: ['container app: capability CHOWN'],
  },
  {
    rule: 'keeping the default capabilities',
    spec: withContainer({ capabilities: {} }),
    baseline: [],
    restricted: ['container app: capabilities drop ALL'],
  },
  {
    rule: 'a non-core volume type',
    spec: { ...compliant(), volumes: [{ name: 'share', nfs: { server: 'nfs', path: '/' } }] },
    baseline: [],
    restricted: ['volume share: type nfs'],
  },
  {
    rule: 'allowing privilege escalation',
    spec: withContainer({ allowPrivilegeEscalation: true }),
    baseline: [],
    restricted: ['container app: allowPrivilegeEscalation != false'],
  },
  {
    rule: 'no runAsNonRoot anywhere',
    spec: withPod({ runAsNonRoot: undefined }),
    baseline: [],
    restricted: ['container app: runAsNonRoot'],
  },
  {
    rule: 'a container runAsNonRoot false under a pod-level true',
    spec: withContainer({ runAsNonRoot: false }),
    baseline: [],
    restricted: ['container app: runAsNonRoot false'],
  },
  {
    rule: 'runAsUser 0 at pod level',
    spec: withPod({ runAsUser: 0 }),
    baseline: [],
    restricted: ['pod: runAsUser 0'],
  },
  {
    rule: 'no seccomp profile anywhere',
    spec: withPod({ seccompProfile: undefined }),
    baseline: [],
    restricted: ['container app: seccomp'],
  },
  {
    rule: 'an unmasked /proc in a user namespace',
    spec: { ...withContainer({ procMount: 'Unmasked' }), hostUsers: false },
    baseline: [],
    restricted: ['container app: procMount Unmasked'],
  },

  // Exemptions restricted grants.
  {
    rule: 'root in a user namespace',
    spec: { ...withContainer({ runAsUser: 0, runAsNonRoot: false }), hostUsers: false },
    baseline: [],
    restricted: [],
  },
  {
    rule: 'a Windows pod without the Linux-only settings',
    spec: {
      os: { name: 'windows' },
      securityContext: { runAsNonRoot: true },
      containers: [{ name: 'app' }],
    },
    baseline: [],
    restricted: [],
  },
];

describe('Pod Security Standards checks', () => {
  it('admits the pod every case starts from at both levels', () => {
    expect(baselineViolations(compliant())).toEqual([]);
    expect(restrictedViolations(compliant())).toEqual([]);
  });

  it('admits the minimally specified pod at baseline and refuses it at restricted', () => {
    const minimal: PodSpec = { containers: [{ name: 'app' }] };
    expect(baselineViolations(minimal)).toEqual([]);
    expect(restrictedViolations(minimal)).toEqual([
      'container app: allowPrivilegeEscalation != false',
      'container app: runAsNonRoot',
      'container app: seccomp',
      'container app: capabilities drop ALL',
    ]);
  });

  it.each(cases)('finds exactly the rule at each level for $rule', (c) => {
    expect({
      baseline: baselineViolations(c.spec, c.metadata),
      restricted: restrictedViolations(c.spec, c.metadata),
    }).toEqual({ baseline: c.baseline, restricted: c.restricted });
  });

  it('checks init and ephemeral containers as well as regular ones', () => {
    const privileged = { ...compliant().containers[0]!, securityContext: { privileged: true } };
    const spec: PodSpec = {
      ...compliant(),
      initContainers: [{ ...privileged, name: 'init' }],
      ephemeralContainers: [{ ...privileged, name: 'debug' }],
    };
    expect(baselineViolations(spec)).toEqual([
      'container init: privileged',
      'container debug: privileged',
    ]);
  });
});
