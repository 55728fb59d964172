import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Ajv } from 'ajv';
import { parse, parseAllDocuments, parseDocument } from 'yaml';
import { HELM, requireKubeTools } from './support/kube/kubectl.js';

/*
 * The real-cluster workflow (.github/workflows/cluster.yaml) and `make test-cluster`
 * (scripts/test-cluster.sh) cannot run here: no cluster, no docker daemon. What can be checked
 * without them is checked: the workflow's shape, pins and order, its scripts' syntax, its Helm
 * values against the chart's schema and the chart rendered with them by the project's helm, and
 * the target's refusal without KUBECONFIG.
 */
const ROOT = join(__dirname, '..');
const WORKFLOW = join(ROOT, '.github', 'workflows', 'cluster.yaml');
const CHART = join(ROOT, 'charts', 'kiln');
const SCRIPT = join(ROOT, 'scripts', 'test-cluster.sh');

interface Step {
  name?: string;
  uses?: string;
  run?: string;
  if?: string;
  with?: Record<string, unknown>;
  env?: Record<string, unknown>;
}
interface Job {
  'runs-on'?: unknown;
  'timeout-minutes'?: unknown;
  env?: Record<string, unknown>;
  steps?: Step[];
}
interface Workflow {
  on: Record<string, unknown>;
  permissions: unknown;
  concurrency: Record<string, unknown>;
  jobs: Record<string, Job>;
}

const text = readFileSync(WORKFLOW, 'utf8');
const workflow = parse(text) as Workflow;
const jobs = Object.values(workflow.jobs ?? {});
const job = jobs[0]!;
const steps = job.steps ?? [];
const runOf = (step: Step): string => step.run ?? '';

/** Shell words of a command without expansions: double- or single-quoted, or bare. */
function words(command: string): string[] {
  return [...command.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!);
}

/** A `--set` value as Helm types it: booleans, null and integers; anything else a string. */
function helmScalar(value: string): unknown {
  if (value === 'true' || value === 'false') return value === 'true';
  if (value === 'null') return null;
  return /^-?\d+$/.test(value) ? Number(value) : value;
}

function setPath(target: Record<string, any>, path: string[], value: unknown): void {
  let at = target;
  for (const key of path.slice(0, -1)) {
    if (typeof at[key] !== 'object' || at[key] === null) at[key] = {};
    at = at[key];
  }
  at[path.at(-1)!] = value;
}

function merge(base: Record<string, any>, over: Record<string, any>): Record<string, any> {
  const out = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const both = [out[key], value].every((v) => typeof v === 'object' && v && !Array.isArray(v));
    out[key] = both ? merge(out[key], value) : value;
  }
  return out;
}

interface HelmInstall {
  release: string;
  chart: string;
  namespace: string | undefined;
  valueFiles: string[];
  sets: Array<[path: string[], value: unknown]>;
  wait: boolean;
}

/** The workflow's `helm install` line, read as Helm would (only the flags it uses). */
function helmInstall(command: string): HelmInstall {
  const argv = words(command);
  expect(argv.slice(0, 2)).toEqual(['helm', 'install']);
  expect(argv.filter((word) => word.includes('$'))).toEqual([]);
  const positional: string[] = [];
  const install: HelmInstall = {
    release: '',
    chart: '',
    namespace: undefined,
    valueFiles: [],
    sets: [],
    wait: false,
  };
  for (let i = 2; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = (): string => inline ?? argv[++i]!;
    switch (flag) {
      case '--namespace':
      case '-n':
        install.namespace = value();
        break;
      case '--values':
      case '-f':
        install.valueFiles.push(value());
        break;
      case '--set':
        for (const pair of value().split(',')) {
          const [key, raw = ''] = pair.split(/=(.*)/s, 2);
          install.sets.push([key!.split('.'), helmScalar(raw)]);
        }
        break;
      case '--timeout':
        value();
        break;
      case '--wait':
        install.wait = true;
        break;
      case '--create-namespace':
        break;
      default:
        if (flag.startsWith('-')) throw new Error(`helm install: ${flag} is not read by this test`);
        positional.push(argv[i]!);
    }
  }
  [install.release = '', install.chart = ''] = positional;
  return install;
}

const findStep = (pattern: RegExp): Step => {
  const found = steps.filter((step) => pattern.test(runOf(step)));
  expect(found).toHaveLength(1);
  return found[0]!;
};

describe('the real-cluster workflow (.github/workflows/cluster.yaml)', () => {
  it('parses as YAML without an error or a warning', () => {
    const document = parseDocument(text);

    expect(document.errors).toEqual([]);
    expect(document.warnings).toEqual([]);
    expect(Object.keys(workflow)).toEqual(
      expect.arrayContaining(['name', 'on', 'permissions', 'concurrency', 'jobs']),
    );
  });

  it('runs on a push to main, on pull requests and by hand', () => {
    expect(Object.keys(workflow.on).sort()).toEqual(['pull_request', 'push', 'workflow_dispatch']);
    expect(workflow.on['push']).toEqual({ branches: ['main'] });
  });

  it('reads the repository only, has a time limit and one run at a time per ref', () => {
    expect(workflow.permissions).toEqual({ contents: 'read' });
    expect(jobs.length).toBeGreaterThan(0);
    for (const each of jobs) {
      expect(each['timeout-minutes']).toEqual(expect.any(Number));
      expect(each['timeout-minutes']).toBeLessThanOrEqual(90);
    }
    expect(workflow.concurrency['group']).toMatch(/github\.ref/);
  });

  it('gives every job a runner and steps, and every step exactly one of uses and run', () => {
    for (const each of jobs) {
      expect(each['runs-on']).toBe('ubuntu-24.04');
      expect(each.steps?.length).toBeGreaterThan(0);
      const both = (each.steps ?? []).filter(
        (step) => (step.uses === undefined) === (step.run === undefined),
      );
      expect(both).toEqual([]);
    }
  });

  it('pins every action to a full commit SHA with its version in a comment on the same line', () => {
    const lines = text.split('\n').filter((line) => /^\s*(?:-\s+)?uses:/.test(line));
    const used = jobs.flatMap((each) => (each.steps ?? []).filter((step) => step.uses));

    expect(lines).toHaveLength(used.length);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(line).toMatch(
        /^\s*(?:-\s+)?uses:\s+[\w.-]+\/[\w.-]+(?:\/[\w./-]+)?@[0-9a-f]{40}\s+#\s+v\d+(?:\.\d+)*\s*$/,
      );
    }
  });

  it('builds, installs and tests in order, and collects the logs on failure', () => {
    const order: Array<[string, (step: Step) => boolean]> = [
      ['check out', (s) => s.uses?.startsWith('actions/checkout@') === true],
      [
        'Node 20 with the npm cache',
        (s) =>
          s.uses?.startsWith('actions/setup-node@') === true &&
          String(s.with?.['node-version']) === '20' &&
          s.with?.['cache'] === 'npm',
      ],
      ['npm ci', (s) => /^(?:npm ci\b|make deps$)/m.test(runOf(s))],
      ['build the image', (s) => /^make image IMAGE=/m.test(runOf(s))],
      ['create a kind cluster', (s) => s.uses?.startsWith('helm/kind-action@') === true],
      ['load the image into kind', (s) => /^kind load docker-image /m.test(runOf(s))],
      ['helm install', (s) => /^helm install /m.test(runOf(s))],
      ['make test-cluster', (s) => /^make test-cluster$/m.test(runOf(s))],
      ['helm test', (s) => /^helm test /m.test(runOf(s))],
      ['collect the logs', (s) => s.if === 'failure()' && /^\s*kind export logs /m.test(runOf(s))],
      [
        'upload them',
        (s) => s.if === 'failure()' && s.uses?.startsWith('actions/upload-artifact@') === true,
      ],
    ];

    const at = order.map(([what, matches]) => {
      const found = steps.flatMap((step, index) => (matches(step) ? [index] : []));
      return [what, found] as const;
    });

    expect(at.filter(([, found]) => found.length !== 1).map(([what]) => what)).toEqual([]);
    const indexes = at.map(([, found]) => found[0]!);
    expect(indexes).toEqual([...indexes].sort((a, b) => a - b));
    const collect = runOf(steps[indexes.at(-2)!]!);
    expect(collect).toMatch(/^\s*kubectl -n "\$ns" get all/m);
    expect(collect).toMatch(/^\s*kubectl -n "\$ns" describe all/m);
    expect(collect).toMatch(/^\s*kubectl -n "\$ns" logs "\$pod" --all-containers/m);
    expect(collect).toMatch(/^\s*helm status kiln /m);
    expect(steps[indexes.at(-1)!]!.with?.['path']).toBe('cluster-logs/');
    expect(steps.slice(0, indexes.at(-2)).filter((step) => step.if !== undefined)).toEqual([]);
  });

  it('writes every run script in valid bash', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-cluster-workflow-'));
    try {
      const checked = steps
        .filter((step) => step.run !== undefined)
        .map((step, index) => {
          const file = join(dir, `step-${index}.sh`);
          // Actions replaces ${{ … }} before bash reads the script.
          writeFileSync(file, runOf(step).replace(/\$\{\{[^}]*\}\}/g, 'x'));
          const result = spawnSync('bash', ['-n', file], { encoding: 'utf8' });
          return { step: step.name, status: result.status, stderr: result.stderr };
        });
      expect(checked.length).toBeGreaterThan(5);
      expect(checked.filter((c) => c.status !== 0 || c.stderr !== '')).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('pins the kind node image (Kubernetes 1.34) and the registry image by digest', () => {
    const kind = steps.find((step) => step.uses?.startsWith('helm/kind-action@'))!;

    expect(kind.with?.['node_image']).toMatch(/^kindest\/node:v1\.34\.\d+@sha256:[0-9a-f]{64}$/);
    expect(kind.with?.['version']).toMatch(/^v\d+\.\d+\.\d+$/);
    expect(job.env?.['REGISTRY_IMAGE']).toMatch(/^[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}$/);
    const registry = findStep(/--image="\$REGISTRY_IMAGE"/);
    expect(runOf(registry)).toMatch(/^echo "KILN_TEST_REGISTRY=.*" >> "\$GITHUB_ENV"$/m);
  });

  it('installs charts/kiln with values its schema accepts: the image it built and loaded, the evaluation PostgreSQL', () => {
    const install = helmInstall(runOf(findStep(/^helm install /m)));
    const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, any>;

    expect(install).toMatchObject({ release: 'kiln', chart: 'charts/kiln', wait: true });
    expect(install.valueFiles).toContain('charts/kiln/ci/evaluation-values.yaml');
    for (const file of install.valueFiles) expect(existsSync(join(ROOT, file))).toBe(true);
    const unknown = install.sets.filter(
      ([path]) => path.reduce<any>((at, key) => at?.[key], defaults) === undefined,
    );
    expect(unknown).toEqual([]);

    let values = defaults;
    for (const file of install.valueFiles) {
      values = merge(values, parse(readFileSync(join(ROOT, file), 'utf8')) as Record<string, any>);
    }
    for (const [path, value] of install.sets) {
      const over = {};
      setPath(over, path, value);
      values = merge(values, over);
    }
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(
      JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as object,
    );
    expect(validate(values) ? [] : validate.errors).toEqual([]);

    expect(values['postgresql'].enabled).toBe(true);
    expect(`${values['image'].repository}:${values['image'].tag}`).toBe(job.env?.['IMAGE']);
    expect(values['image'].pullPolicy).toBe('Never');
    expect(runOf(findStep(/^make image /m))).toBe('make image IMAGE="$IMAGE"');
    expect(runOf(findStep(/^kind load docker-image /m))).toBe(
      'kind load docker-image "$IMAGE" --name "$CLUSTER"',
    );
  });

  it("renders with the project's helm to kiln's Deployments on that image, their build namespace none of the suites'", () => {
    requireKubeTools();
    const install = helmInstall(runOf(findStep(/^helm install /m)));
    const home = mkdtempSync(join(tmpdir(), 'kiln-cluster-workflow-helm-'));
    let rendered: string;
    try {
      rendered = execFileSync(
        HELM,
        [
          'template',
          install.release,
          install.chart,
          '--namespace',
          install.namespace ?? 'default',
          ...install.valueFiles.flatMap((file) => ['--values', file]),
          ...install.sets.flatMap(([path, value]) => [
            '--set',
            `${path.join('.')}=${String(value)}`,
          ]),
        ],
        {
          cwd: ROOT,
          encoding: 'utf8',
          timeout: 60_000,
          maxBuffer: 64 * 1024 * 1024,
          env: { ...process.env, HOME: home, HELM_CACHE_HOME: join(home, 'cache') },
        },
      );
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
    const deployments = parseAllDocuments(rendered)
      .map((document) => document.toJS() as Record<string, any> | null)
      .filter((object) => object?.['kind'] === 'Deployment');
    const containers = deployments.flatMap((d) => d!['spec'].template.spec.containers as any[]);

    expect(deployments.length).toBeGreaterThanOrEqual(2);
    for (const container of containers) {
      expect({ image: container.image, pull: container.imagePullPolicy }).toEqual({
        image: job.env?.['IMAGE'],
        pull: 'Never',
      });
    }
    const buildNamespaces = containers
      .flatMap((container) => (container.env ?? []) as Array<{ name: string; value?: string }>)
      .filter((env) => env.name.startsWith('KILN_BUILD_NAMESPACE'))
      .map((env) => env.value);
    expect(buildNamespaces.length).toBeGreaterThan(0);
    const crdSuite = readFileSync(join(ROOT, 'test', 'crd.spec.ts'), 'utf8');
    const clusterSuite = readFileSync(join(ROOT, 'test', 'operator-cluster.spec.ts'), 'utf8');
    const suiteNamespaces = [
      /^const NAMESPACE = '([^']+)'/m.exec(crdSuite)?.[1],
      /KILN_TEST_NAMESPACE'\] \?\? '([^']+)'/.exec(clusterSuite)?.[1],
    ];
    expect(suiteNamespaces).toEqual([expect.any(String), expect.any(String)]);
    expect(buildNamespaces.filter((ns) => suiteNamespaces.includes(ns))).toEqual([]);
  });
});

describe('make test-cluster', () => {
  const makefile = readFileSync(join(ROOT, 'Makefile'), 'utf8');
  /** The environment of a make run by hand: no KUBECONFIG, nothing of an enclosing make. */
  const bareEnv = (): NodeJS.ProcessEnv => {
    const env = { ...process.env };
    for (const name of ['KUBECONFIG', 'MAKEFLAGS', 'MAKELEVEL', 'MFLAGS']) delete env[name];
    return env;
  };
  // "At once": within spawnSync's timeout, far below what an install would take (status null then).
  const makeTestCluster = (env: NodeJS.ProcessEnv) =>
    spawnSync('make', ['-s', 'test-cluster'], {
      cwd: ROOT,
      env,
      encoding: 'utf8',
      timeout: 20_000,
    });

  it('is a target of the Development section with a help line, after helm-lint', () => {
    const development = makefile
      .split(/^##@ /m)
      .find((section) => section.startsWith('Development'));

    expect(development).toMatch(/^test-cluster:.*## \S/m);
    expect(development!.indexOf('\ntest-cluster:')).toBeGreaterThan(
      development!.indexOf('\nhelm-lint:'),
    );
    expect(makefile).toMatch(/^\.PHONY: test-cluster$/m);
  });

  it('fails at once, saying so, when KUBECONFIG is not set, and installs nothing', () => {
    const run = makeTestCluster(bareEnv());

    expect(run.status).toBe(2); // make's own failure, not spawnSync's timeout (status null)
    expect(run.stderr).toContain('make test-cluster: KUBECONFIG is not set');
    expect(run.stdout).toBe('');
    expect(run.stderr).not.toMatch(/kube-tools:|npm|jest/);
    // What make would run, in order (-n): the check before anything that installs.
    const planned = spawnSync('make', ['-n', 'test-cluster'], {
      cwd: ROOT,
      env: bareEnv(),
      encoding: 'utf8',
      timeout: 20_000,
    }).stdout.split('\n');
    expect(planned[0]).toBe('bash scripts/test-cluster.sh --check');
    expect(planned.findIndex((line) => /kube-tools|npm/.test(line))).toBeGreaterThan(0);
  });

  it('fails at once, saying so, when KUBECONFIG names no file', () => {
    const missing = join(tmpdir(), `kiln-no-kubeconfig-${process.pid}`);
    const run = makeTestCluster({ ...bareEnv(), KUBECONFIG: missing });

    expect(run.status).toBe(2);
    expect(run.stderr).toContain(`make test-cluster: KUBECONFIG=${missing} names no file`);
  });

  it('passes its check of a KUBECONFIG that names a file, and runs nothing for it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-cluster-workflow-'));
    try {
      writeFileSync(join(dir, 'kubeconfig'), 'apiVersion: v1\nkind: Config\n');
      const result = spawnSync('bash', [SCRIPT, '--check'], {
        env: { ...bareEnv(), KUBECONFIG: join(dir, 'kubeconfig') },
        encoding: 'utf8',
        timeout: 20_000,
      });

      expect({ status: result.status, stdout: result.stdout, stderr: result.stderr }).toEqual({
        status: 0,
        stdout: '',
        stderr: '',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs every suite of test/ that reads KUBECONFIG or calls clusterTarget, and no other', () => {
    const listed = /^SUITES=\(([^)]*)\)$/m.exec(readFileSync(SCRIPT, 'utf8'))?.[1]?.split(/\s+/);
    const reaching = readdirSync(join(ROOT, 'test'), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.spec.ts'))
      .map((name) => join(ROOT, 'test', name))
      .filter((file) => file !== __filename)
      .filter((file) =>
        /\bclusterTarget\(|\bREAL_CLUSTER_KUBECONFIG\b|process\.env(?:\.KUBECONFIG\b|\[['"]KUBECONFIG['"]\])/.test(
          readFileSync(file, 'utf8'),
        ),
      )
      .map((file) => relative(ROOT, file))
      .sort();

    expect(reaching.length).toBeGreaterThan(0);
    expect(listed?.sort()).toEqual(reaching);
  });
});
