import { execFile } from 'node:child_process';
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
          'no-composition-root-imports: health/imports-main.ts → main.ts',
          'no-composition-root-imports: builds/imports-app-module.ts → app.module.ts',
          'no-main-imports: cli/imports-main.ts → main.ts',
          'api-not-from-operator-or-store: runners/imports-builds.ts → builds/build.ts',
          'api-not-from-operator-or-store: operator/imports-builds.ts → builds/build.ts',
          'api-not-from-operator-or-store: database/imports-feature.ts → builds/build.ts',
          'api-not-from-operator-or-store: logs/imports-auth.ts → auth/guard.ts',
          'api-not-from-operator-or-store: logs/imports-log-stream.ts → log-stream/gateway.ts',
          'log-store-no-auth: logs/imports-auth.ts → auth/guard.ts',
          'log-store-no-auth: logs/imports-log-stream.ts → log-stream/gateway.ts',
          'lifecycle-no-logs-or-runners: lifecycle/imports-logs.ts → logs/store.ts',
          'lifecycle-no-logs-or-runners: lifecycle/imports-runners.ts → runners/runner.ts',
          'database-imports-no-feature: database/imports-feature.ts → builds/build.ts',
          'database-imports-no-feature: database/imports-lifecycle.ts → lifecycle/state.ts',
          'config-is-the-ground: config/imports-common.ts → common/util.ts',
          'typeorm-only-in-data-layer: builds/uses-typeorm.ts → node_modules/typeorm/index.d.ts',
          'kubernetes-client-only-in-kubernetes: runners/uses-kube-client.ts → node_modules/@kubernetes/client-node/dist/index.js',
          'vendor-sdks-behind-ports: builds/uses-aws-sdk.ts → node_modules/@aws-sdk/client-s3/dist-es/index.js',
          'no-circular: common/cycle-a.ts → common/cycle-b.ts',
          'not-to-unresolvable: common/imports-missing.ts → ./missing.js',
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
