/**
 * The Pod Security Standards' `baseline` and `restricted` profiles, policy version latest, as checks
 * on a pod: what Pod Security admission would refuse in a namespace that enforces the level.
 *
 * Sources: kubernetes.io/docs/concepts/security/pod-security-standards (the controls and their
 * allowed values) and, where the page lags or is silent, the admission controller itself,
 * k8s.io/pod-security-admission v0.36.2 (Kubernetes 1.36) `policy/check_*.go`: the sysctls it
 * allows since 1.32, the `image` volume type, the user-namespace relaxations of 1.35 and which
 * restricted checks replace a baseline one. Each violation reads `<where>: <what>`.
 */

interface SecurityContext {
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  runAsNonRoot?: boolean;
  runAsUser?: number;
  seccompProfile?: { type?: string };
  appArmorProfile?: { type?: string };
  seLinuxOptions?: { type?: string; user?: string; role?: string; level?: string };
  windowsOptions?: { hostProcess?: boolean };
  capabilities?: { add?: string[]; drop?: string[] };
  procMount?: string;
}

/** A probe or lifecycle handler; only the fields that can name another host matter here. */
interface Handler {
  httpGet?: { host?: string };
  tcpSocket?: { host?: string };
}

interface Container {
  name: string;
  securityContext?: SecurityContext;
  ports?: Array<{ hostPort?: number }>;
  livenessProbe?: Handler;
  readinessProbe?: Handler;
  startupProbe?: Handler;
  lifecycle?: { postStart?: Handler; preStop?: Handler };
}

export interface PodSpec {
  os?: { name?: string };
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  hostUsers?: boolean;
  securityContext?: SecurityContext & { sysctls?: Array<{ name: string }> };
  containers: Container[];
  initContainers?: Container[];
  ephemeralContainers?: Container[];
  volumes?: Array<Record<string, unknown> & { name: string }>;
}

/** The part of a pod's metadata the standards read: the AppArmor annotations. */
export interface PodMetadata {
  annotations?: Record<string, string>;
}

/** One control of a profile. `overrides` names the baseline control a restricted one replaces. */
interface Check {
  id: string;
  overrides?: string;
  violations(spec: PodSpec, metadata: PodMetadata): string[];
}

const BASELINE_CAPABILITIES = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
// The empty string is how an unset type arrives when seLinuxOptions sets only a level.
const SELINUX_TYPES = new Set([
  '',
  'container_t',
  'container_init_t',
  'container_kvm_t',
  'container_engine_t',
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
  // Allowed by the admission controller since 1.32; the docs page does not list them yet.
  'net.ipv4.tcp_rmem',
  'net.ipv4.tcp_wmem',
]);
const CONFINED_PROFILES = new Set(['RuntimeDefault', 'Localhost']);
const APPARMOR_ANNOTATION = 'container.apparmor.security.beta.kubernetes.io/';
const ALLOWED_VOLUME_TYPES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  // OCI image volumes: in the admission controller's list, not yet on the docs page.
  'image',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);

/** Every container the admission controller visits: init, regular, then ephemeral. */
function allContainers(spec: PodSpec): Container[] {
  return [...(spec.initContainers ?? []), ...spec.containers, ...(spec.ephemeralContainers ?? [])];
}

/** Runs `find` on each container and names the container in front of each of its findings. */
function perContainer(spec: PodSpec, find: (c: Container) => string[]): string[] {
  return allContainers(spec).flatMap((c) => find(c).map((what) => `container ${c.name}: ${what}`));
}

/** Pod-level findings first (named `pod`), then each container's, for a field both levels carry. */
function podAndContainers(spec: PodSpec, find: (sc: SecurityContext) => string[]): string[] {
  return [
    ...find(spec.securityContext ?? {}).map((what) => `pod: ${what}`),
    ...perContainer(spec, (c) => find(c.securityContext ?? {})),
  ];
}

/** A user-namespaced pod (`hostUsers: false`) is root only inside its namespace (1.35+). */
const inUserNamespace = (spec: PodSpec): boolean => spec.hostUsers === false;

/** Restricted skips three Linux-only controls for pods that declare Windows (1.25+). */
const isWindows = (spec: PodSpec): boolean => spec.os?.name === 'windows';

/** An explicitly set profile that is neither RuntimeDefault nor Localhost. */
const unconfined = (profile: { type?: string } | undefined): boolean =>
  profile !== undefined && !CONFINED_PROFILES.has(profile.type ?? '');

function handlerHosts(c: Container): string[] {
  const handlers: Array<[string, Handler | undefined]> = [
    ['livenessProbe', c.livenessProbe],
    ['readinessProbe', c.readinessProbe],
    ['startupProbe', c.startupProbe],
    ['lifecycle.postStart', c.lifecycle?.postStart],
    ['lifecycle.preStop', c.lifecycle?.preStop],
  ];
  return handlers.flatMap(([field, handler]) =>
    (['httpGet', 'tcpSocket'] as const)
      .filter((kind) => handler?.[kind]?.host)
      .map((kind) => `${field}.${kind}.host`),
  );
}

function seLinuxFindings(options: SecurityContext['seLinuxOptions']): string[] {
  if (options === undefined) return [];
  return [
    ...(SELINUX_TYPES.has(options.type ?? '') ? [] : [`SELinux type ${options.type}`]),
    ...(options.user ? ['SELinux user'] : []),
    ...(options.role ? ['SELinux role'] : []),
  ];
}

const unmaskedProc = (spec: PodSpec): string[] =>
  perContainer(spec, (c) => {
    const mount = c.securityContext?.procMount;
    return mount !== undefined && mount !== 'Default' ? [`procMount ${mount}`] : [];
  });

const BASELINE: Check[] = [
  {
    id: 'windowsHostProcess',
    violations: (spec) =>
      podAndContainers(spec, (sc) => (sc.windowsOptions?.hostProcess ? ['hostProcess'] : [])),
  },
  {
    id: 'hostNamespaces',
    violations: (spec) =>
      (['hostNetwork', 'hostPID', 'hostIPC'] as const)
        .filter((field) => spec[field])
        .map((field) => `pod: ${field}`),
  },
  {
    id: 'privileged',
    violations: (spec) =>
      perContainer(spec, (c) => (c.securityContext?.privileged ? ['privileged'] : [])),
  },
  {
    id: 'capabilities_baseline',
    violations: (spec) =>
      perContainer(spec, (c) =>
        (c.securityContext?.capabilities?.add ?? [])
          .filter((cap) => !BASELINE_CAPABILITIES.has(cap))
          .map((cap) => `capability ${cap}`),
      ),
  },
  {
    id: 'hostPathVolumes',
    violations: (spec) =>
      (spec.volumes ?? [])
        .filter((volume) => volume.hostPath !== undefined)
        .map((volume) => `volume ${volume.name}: hostPath`),
  },
  {
    id: 'hostPorts',
    violations: (spec) =>
      perContainer(spec, (c) =>
        (c.ports ?? []).flatMap((port) => (port.hostPort ? [`hostPort ${port.hostPort}`] : [])),
      ),
  },
  { id: 'hostProbesAndHostLifecycle', violations: (spec) => perContainer(spec, handlerHosts) },
  {
    id: 'appArmorProfile',
    violations: (spec, metadata) => [
      ...podAndContainers(spec, (sc) =>
        unconfined(sc.appArmorProfile) ? [`AppArmor ${sc.appArmorProfile?.type}`] : [],
      ),
      ...Object.entries(metadata.annotations ?? {})
        .filter(([key]) => key.startsWith(APPARMOR_ANNOTATION))
        .filter(([, value]) => value !== '' && value !== 'runtime/default')
        .filter(([, value]) => !value.startsWith('localhost/'))
        .map(([key, value]) => `annotation ${key}: ${value}`),
    ],
  },
  {
    id: 'seLinuxOptions',
    violations: (spec) => podAndContainers(spec, (sc) => seLinuxFindings(sc.seLinuxOptions)),
  },
  {
    id: 'procMount',
    violations: (spec) => (inUserNamespace(spec) ? [] : unmaskedProc(spec)),
  },
  {
    id: 'seccompProfile_baseline',
    violations: (spec) =>
      podAndContainers(spec, (sc) =>
        unconfined(sc.seccompProfile) ? [`seccomp ${sc.seccompProfile?.type}`] : [],
      ),
  },
  {
    id: 'sysctls',
    violations: (spec) =>
      (spec.securityContext?.sysctls ?? [])
        .filter((sysctl) => !SAFE_SYSCTLS.has(sysctl.name))
        .map((sysctl) => `pod: sysctl ${sysctl.name}`),
  },
];

const RESTRICTED: Check[] = [
  {
    id: 'restrictedVolumes',
    overrides: 'hostPathVolumes',
    violations: (spec) =>
      (spec.volumes ?? []).flatMap((volume) =>
        Object.keys(volume)
          .filter((key) => key !== 'name' && !ALLOWED_VOLUME_TYPES.has(key))
          .map((type) => `volume ${volume.name}: type ${type}`),
      ),
  },
  {
    id: 'allowPrivilegeEscalation',
    violations: (spec) =>
      isWindows(spec)
        ? []
        : perContainer(spec, (c) =>
            c.securityContext?.allowPrivilegeEscalation === false
              ? []
              : ['allowPrivilegeEscalation != false'],
          ),
  },
  {
    id: 'runAsNonRoot',
    violations: (spec) => {
      if (inUserNamespace(spec)) return [];
      const pod = spec.securityContext?.runAsNonRoot;
      return [
        ...(pod === false ? ['pod: runAsNonRoot false'] : []),
        ...perContainer(spec, (c) => {
          const own = c.securityContext?.runAsNonRoot;
          if (own === false) return ['runAsNonRoot false'];
          return own === undefined && pod !== true ? ['runAsNonRoot'] : [];
        }),
      ];
    },
  },
  {
    id: 'runAsUser',
    violations: (spec) =>
      inUserNamespace(spec)
        ? []
        : podAndContainers(spec, (sc) => (sc.runAsUser === 0 ? ['runAsUser 0'] : [])),
  },
  {
    id: 'seccompProfile_restricted',
    overrides: 'seccompProfile_baseline',
    violations: (spec) => {
      if (isWindows(spec)) return [];
      const pod = spec.securityContext?.seccompProfile;
      return [
        ...(unconfined(pod) ? [`pod: seccomp ${pod?.type}`] : []),
        ...perContainer(spec, (c) => {
          const own = c.securityContext?.seccompProfile;
          if (own !== undefined) return unconfined(own) ? [`seccomp ${own.type}`] : [];
          // An unset container profile is fine only under a valid pod-level one.
          return pod === undefined || unconfined(pod) ? ['seccomp'] : [];
        }),
      ];
    },
  },
  {
    id: 'capabilities_restricted',
    overrides: 'capabilities_baseline',
    violations: (spec) =>
      isWindows(spec)
        ? []
        : perContainer(spec, (c) => {
            const caps = c.securityContext?.capabilities;
            return [
              ...((caps?.drop ?? []).includes('ALL') ? [] : ['capabilities drop ALL']),
              ...(caps?.add ?? [])
                .filter((cap) => cap !== 'NET_BIND_SERVICE')
                .map((cap) => `capability ${cap}`),
            ];
          }),
  },
  {
    // Baseline lets a user-namespaced pod unmask /proc; restricted never does.
    id: 'procMount_restricted',
    overrides: 'procMount',
    violations: unmaskedProc,
  },
];

const RESTRICTED_OVERRIDES = new Set(RESTRICTED.flatMap((check) => check.overrides ?? []));

/**
 * What a namespace enforcing `baseline` would refuse in this pod: `[]` when it is admitted.
 * `metadata` carries the AppArmor annotations, the one control outside the spec.
 */
export function baselineViolations(spec: PodSpec, metadata: PodMetadata = {}): string[] {
  return BASELINE.flatMap((check) => check.violations(spec, metadata));
}

/**
 * What a namespace enforcing `restricted` would refuse: the baseline controls plus the restricted
 * ones. As in the admission controller, four restricted controls replace the baseline control they
 * tighten (volume types, capabilities, seccomp, procMount), so a finding is reported once; the
 * replacements skip Windows pods where they are Linux-only, as the admission controller's do.
 */
export function restrictedViolations(spec: PodSpec, metadata: PodMetadata = {}): string[] {
  return [
    ...BASELINE.filter((check) => !RESTRICTED_OVERRIDES.has(check.id)),
    ...RESTRICTED,
  ].flatMap((check) => check.violations(spec, metadata));
}

/** One control a pod fails: its id in the admission controller (`runAsNonRoot`, …) and findings. */
export interface FailedControl {
  id: string;
  violations: string[];
}

/**
 * The controls of a level this pod fails, in the order Pod Security admission reports them: the
 * baseline controls by id, then the restricted ones by id (policy/registry.go sorts each level's
 * check ids and puts baseline first), so a message built from them lists its reasons as the real
 * `violates PodSecurity` message does. The API server double words each control's findings.
 */
export function failedControls(
  level: 'baseline' | 'restricted',
  spec: PodSpec,
  metadata: PodMetadata = {},
): FailedControl[] {
  const byId = (a: Check, b: Check): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const baseline = BASELINE.filter(
    (check) => level === 'baseline' || !RESTRICTED_OVERRIDES.has(check.id),
  );
  const checks = [
    ...[...baseline].sort(byId),
    ...(level === 'restricted' ? [...RESTRICTED].sort(byId) : []),
  ];
  return checks
    .map((check) => ({ id: check.id, violations: check.violations(spec, metadata) }))
    .filter((control) => control.violations.length > 0);
}
