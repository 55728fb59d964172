import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

// dependency-cruiser is ESM-only and Jest runs in CJS mode, so the spec runs its CLI and reads
// the JSON report, exactly as `make lint` runs it.
const ROOT = join(__dirname, '..');
const DEPCRUISE = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
const FIXTURE = 'test/fixtures/architecture/src';

interface Dependency {
  module: string;
  resolved: string;
  couldNotResolve: boolean;
  dependencyTypes: string[];
}
interface Report {
  modules: { source: string; dependencies: Dependency[] }[];
  summary: {
    violations: { from: string; to: string; rule: { name: string } }[];
    ruleSetUsed: { forbidden: { name: string }[] };
  };
}

async function cruise(directory: string): Promise<Report> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [DEPCRUISE, directory, '--config', '.dependency-cruiser.cjs', '--output-type', 'json'],
    { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 },
  );
  return JSON.parse(stdout) as Report;
}

/** `rule: from → to`, with the cruised directory cut off the front of both paths. */
function violations(report: Report, directory: string): string[] {
  const local = (path: string) => path.replace(`${directory}/`, '');
  return report.summary.violations
    .map(({ rule, from, to }) => `${rule.name}: ${local(from)} → ${local(to)}`)
    .sort();
}

function localDependencies(report: Report, directory: string): Dependency[] {
  return report.modules
    .filter(({ source }) => source.startsWith(`${directory}/`))
    .flatMap(({ dependencies }) => dependencies)
    .filter(({ dependencyTypes }) => dependencyTypes.includes('local'));
}

describe('the architecture rules (.dependency-cruiser.cjs)', () => {
  describe('on a fixture tree that breaks each rule once', () => {
    let report: Report;

    beforeAll(async () => {
      report = await cruise(FIXTURE);
    });

    it('reports exactly the deliberate violations and lets the allowed imports through', () => {
      expect(violations(report, FIXTURE)).toEqual(
        [
          'floor-admission: admission/breaks-floor.ts → builds/ok.ts',
          'floor-artifacts-http: artifacts-http/breaks-floor.ts → builds/ok.ts',
          'floor-artifacts: artifacts/breaks-floor.ts → builds/ok.ts',
          'floor-audit: audit/breaks-floor.ts → auth/ok.ts',
          'floor-audit-http: audit-http/breaks-floor.ts → builds/ok.ts',
          'floor-auth: auth/breaks-floor.ts → builds/ok.ts',
          'floor-build-methods: build-methods/breaks-floor.ts → builds/ok.ts',
          'floor-builds: builds/breaks-floor.ts → cli/ok.ts',
          'floor-builds: builds/imports-app-module.ts → app.module.ts',
          'floor-cli: cli/breaks-floor.ts → operator/ok.ts',
          'cli-http-only-http: cli/http/breaks-http-only.ts → cli/ok.ts',
          'cli-http-only-http: cli/http/breaks-http-only.ts → common/ok.ts',
          'floor-cluster: cluster/breaks-floor.ts → builds/ok.ts',
          'floor-common: common/breaks-floor.ts → builds/ok.ts',
          'floor-config: config/breaks-floor.ts → builds/ok.ts',
          'floor-console-host: console-host/breaks-floor.ts → builds/ok.ts',
          'floor-database: database/breaks-floor.ts → builds/ok.ts',
          'floor-health: health/breaks-floor.ts → builds/ok.ts',
          'floor-health: health/imports-main.ts → main.ts',
          'floor-integrations: integrations/breaks-floor.ts → builds/ok.ts',
          'floor-integrations: integrations/imports-projects-routes.ts → projects/ok.ts',
          'floor-kubernetes: kubernetes/breaks-floor.ts → builds/ok.ts',
          'floor-lifecycle: lifecycle/breaks-floor.ts → builds/ok.ts',
          'floor-log-stream: log-stream/breaks-floor.ts → builds/ok.ts',
          'floor-logs: logs/breaks-floor.ts → builds/ok.ts',
          'floor-manifest: manifest/breaks-floor.ts → builds/ok.ts',
          'floor-metrics: metrics/breaks-floor.ts → builds/ok.ts',
          'floor-operator: operator/breaks-floor.ts → builds/ok.ts',
          'floor-projects: projects/breaks-floor.ts → builds/ok.ts',
          'floor-provenance: provenance/breaks-floor.ts → builds/ok.ts',
          'floor-provenance-http: provenance-http/breaks-floor.ts → builds/ok.ts',
          'floor-ratelimit: ratelimit/breaks-floor.ts → builds/ok.ts',
          'floor-registries: registries/breaks-floor.ts → builds/ok.ts',
          'floor-retention: retention/breaks-floor.ts → builds/ok.ts',
          'floor-runners: runners/breaks-floor.ts → builds/ok.ts',
          'floor-secret-managers: secret-managers/breaks-floor.ts → builds/ok.ts',
          'floor-secrets: secrets/breaks-floor.ts → builds/ok.ts',
          'floor-settings-http: settings-http/breaks-floor.ts → builds/ok.ts',
          'floor-steps: steps/breaks-floor.ts → builds/ok.ts',
          'floor-tracing: tracing/breaks-floor.ts → builds/ok.ts',
          'floor-triggers: triggers/breaks-floor.ts → cli/ok.ts',
          'kubernetes-client-only-in-kubernetes: runners/uses-kube-client.ts → node_modules/@kubernetes/client-node/dist/index.js',
          'no-circular: common/cycle-a.ts → common/cycle-b.ts',
          'no-circular: common/type-cycle-a.ts → common/type-cycle-b.ts',
          'no-composition-root-imports: builds/imports-app-module.ts → app.module.ts',
          'no-composition-root-imports: health/imports-main.ts → main.ts',
          'no-main-imports: cli/imports-main.ts → main.ts',
          'not-to-unresolvable: common/imports-missing.ts → ./missing.js',
          'typeorm-only-in-data-layer: builds/uses-typeorm.ts → node_modules/typeorm/index.d.ts',
          'vendor-sdks-behind-ports: builds/uses-aws-sdk.ts → node_modules/@aws-sdk/client-s3/dist-es/index.js',
        ].sort(),
      );
    });

    it('has a violating fixture for every rule in the configuration', () => {
      const fired = new Set(report.summary.violations.map(({ rule }) => rule.name));

      expect(report.summary.ruleSetUsed.forbidden.map(({ name }) => name).sort()).toEqual(
        [...fired].sort(),
      );
    });

    it('resolves `.js` import suffixes to the `.ts` sources', () => {
      const resolved = localDependencies(report, FIXTURE).filter(
        ({ module }) => module !== './missing.js',
      );

      expect(resolved.length).toBeGreaterThan(20);
      for (const dependency of resolved) {
        expect(dependency).toMatchObject({
          couldNotResolve: false,
          resolved: expect.stringMatching(new RegExp(`^${FIXTURE}/.+\\.ts$`)),
        });
      }
    });
  });

  it('gives every folder of src/ a floor (the web console, a browser program, aside)', () => {
    const floors = readFileSync(join(ROOT, '.dependency-cruiser.cjs'), 'utf8').match(
      /^const FLOORS = \{[\s\S]*?^\};/m,
    )![0];
    const named = [...floors.matchAll(/^ {2}'?([a-z-]+)'?: \{/gm)].map((m) => m[1]!).sort();
    const folders = readdirSync(join(ROOT, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && entry.name !== 'console')
      .map((entry) => entry.name)
      .sort();

    expect(named).toEqual(folders);
  });

  describe('on src/', () => {
    let report: Report;

    beforeAll(async () => {
      report = await cruise('src');
    });

    it('resolves every relative import to a `.ts` source', () => {
      const dependencies = localDependencies(report, 'src');

      expect(dependencies.length).toBeGreaterThan(100);
      expect(
        dependencies
          .filter(({ resolved }) => !resolved.endsWith('.ts'))
          .map(({ module }) => module),
      ).toEqual([]);
    });

    it('follows every layering rule', () => {
      expect(violations(report, 'src')).toEqual([]);
    });
  });
});
