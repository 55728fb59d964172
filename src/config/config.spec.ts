import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from './config.js';

describe(loadConfig.name, () => {
  const home = mkdtempSync(join(tmpdir(), 'kiln-home-'));
  const cwd = '/srv/kiln';

  function problemsOf(env: Record<string, string>): string[] {
    try {
      loadConfig(env, cwd, home);
    } catch (error) {
      if (error instanceof ConfigError) return error.problems.map((p) => p.variable);
      throw error;
    }
    throw new Error('expected a ConfigError');
  }

  it('applies the documented defaults to an empty environment', () => {
    const config = loadConfig({}, cwd, home);

    expect(config).toMatchObject({
      role: 'all',
      runner: 'local',
      host: '0.0.0.0',
      port: 8080,
      databaseUrl: undefined,
      dataDir: '/srv/kiln/.kiln',
      logLevel: 'info',
      jwtSecret: { kind: 'generated', path: '/srv/kiln/.kiln/jwt-secret' },
    });
  });

  it('stops on PORT=abc with a message naming PORT and what it expects', () => {
    expect(() => loadConfig({ PORT: 'abc' }, cwd, home)).toThrow(
      /PORT: an integer from 1 to 65535, got "abc"/,
    );
  });

  it('lists every bad variable in one error', () => {
    expect(
      problemsOf({
        PORT: '70000',
        KILN_ROLE: 'worker',
        KILN_RUNNER: 'docker',
        KILN_LOG_LEVEL: 'loud',
        DATABASE_URL: 'mysql://db/kiln',
        KILN_JWT_SECRET: 'short',
      }),
    ).toEqual([
      'KILN_ROLE',
      'KILN_RUNNER',
      'PORT',
      'KILN_LOG_LEVEL',
      'DATABASE_URL',
      'KILN_JWT_SECRET',
    ]);
  });

  it('accepts every documented value of KILN_ROLE and KILN_RUNNER', () => {
    for (const role of ['api', 'operator', 'all']) {
      expect(loadConfig({ KILN_ROLE: role }, cwd, home).role).toBe(role);
    }
    const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kiln-kube-')), 'config');
    writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');
    for (const runner of ['local', 'kubernetes']) {
      expect(loadConfig({ KILN_RUNNER: runner, KUBECONFIG: kubeconfig }, cwd, home).runner).toBe(
        runner,
      );
    }
  });

  it('refuses KILN_RUNNER=kubernetes without a kubeconfig or a service account', () => {
    expect(() => loadConfig({ KILN_RUNNER: 'kubernetes' }, cwd, home)).toThrow(
      /KILN_RUNNER: local, or kubernetes with a kubeconfig/,
    );
  });

  it('reads the kubeconfig location and the build namespace', () => {
    const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kiln-kube-')), 'config');
    writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');

    const config = loadConfig({ KUBECONFIG: `/nonexistent:${kubeconfig}` }, cwd, home);

    expect(config.kube).toEqual({ kind: 'file', path: kubeconfig });
    expect(config.buildNamespaces).toEqual({
      restricted: 'kiln-builds',
      baseline: 'kiln-builds',
      privileged: 'kiln-builds',
    });
    expect(loadConfig({ KILN_BUILD_NAMESPACE: 'ci' }, cwd, home).buildNamespaces).toEqual({
      restricted: 'ci',
      baseline: 'ci',
      privileged: 'ci',
    });
    expect(() => loadConfig({ KILN_BUILD_NAMESPACE: 'Not_A_Namespace' }, cwd, home)).toThrow(
      /KILN_BUILD_NAMESPACE/,
    );
  });

  it('gives each Pod Security level its own namespace where one is named, KILN_BUILD_NAMESPACE elsewhere', () => {
    expect(
      loadConfig(
        {
          KILN_BUILD_NAMESPACE: 'ci',
          KILN_BUILD_NAMESPACE_RESTRICTED: 'ci-restricted',
          KILN_BUILD_NAMESPACE_PRIVILEGED: 'ci-privileged',
        },
        cwd,
        home,
      ).buildNamespaces,
    ).toEqual({ restricted: 'ci-restricted', baseline: 'ci', privileged: 'ci-privileged' });
    expect(
      loadConfig({ KILN_BUILD_NAMESPACE_BASELINE: 'kaniko' }, cwd, home).buildNamespaces,
    ).toEqual({ restricted: 'kiln-builds', baseline: 'kaniko', privileged: 'kiln-builds' });
    // The lease stays in the default namespace: no level owns it.
    expect(
      loadConfig({ KILN_BUILD_NAMESPACE_BASELINE: 'kaniko' }, cwd, home).operatorRuntime
        .leaseNamespace,
    ).toBe('kiln-builds');
  });

  it('has no privileged namespace when KILN_BUILD_ALLOW_PRIVILEGED=false, and refuses one named then', () => {
    expect(
      loadConfig(
        { KILN_BUILD_NAMESPACE_BASELINE: 'kaniko', KILN_BUILD_ALLOW_PRIVILEGED: 'false' },
        cwd,
        home,
      ).buildNamespaces,
    ).toEqual({ restricted: 'kiln-builds', baseline: 'kaniko', privileged: undefined });
    expect(
      loadConfig({ KILN_BUILD_ALLOW_PRIVILEGED: 'true' }, cwd, home).buildNamespaces.privileged,
    ).toBe('kiln-builds');
    expect(
      problemsOf({ KILN_BUILD_ALLOW_PRIVILEGED: 'false', KILN_BUILD_NAMESPACE_PRIVILEGED: 'x' }),
    ).toEqual(['KILN_BUILD_NAMESPACE_PRIVILEGED']);
    expect(problemsOf({ KILN_BUILD_ALLOW_PRIVILEGED: 'no' })).toEqual([
      'KILN_BUILD_ALLOW_PRIVILEGED',
    ]);
  });

  it('refuses a per-level namespace that is not a DNS label, naming its variable', () => {
    expect(
      problemsOf({
        KILN_BUILD_NAMESPACE_RESTRICTED: 'Restricted',
        KILN_BUILD_NAMESPACE_BASELINE: 'a'.repeat(64),
        KILN_BUILD_NAMESPACE_PRIVILEGED: 'ci.privileged',
      }),
    ).toEqual([
      'KILN_BUILD_NAMESPACE_RESTRICTED',
      'KILN_BUILD_NAMESPACE_BASELINE',
      'KILN_BUILD_NAMESPACE_PRIVILEGED',
    ]);
  });

  it('runs build pods in user namespaces only when KILN_BUILD_USER_NAMESPACES=true', () => {
    expect(loadConfig({}, cwd, home).buildUserNamespaces).toBe(false);
    expect(loadConfig({ KILN_BUILD_USER_NAMESPACES: 'true' }, cwd, home).buildUserNamespaces).toBe(
      true,
    );
    expect(loadConfig({ KILN_BUILD_USER_NAMESPACES: 'false' }, cwd, home).buildUserNamespaces).toBe(
      false,
    );
    expect(() => loadConfig({ KILN_BUILD_USER_NAMESPACES: 'yes' }, cwd, home)).toThrow(
      /KILN_BUILD_USER_NAMESPACES: one of true\|false, got "yes"/,
    );
  });

  it('defaults to the kubernetes runner when a kubeconfig is found', () => {
    const kubeconfig = join(mkdtempSync(join(tmpdir(), 'kiln-kube-')), 'config');
    writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');
    const withHomeConfig = mkdtempSync(join(tmpdir(), 'kiln-home-'));
    mkdirSync(join(withHomeConfig, '.kube'));
    writeFileSync(join(withHomeConfig, '.kube', 'config'), 'apiVersion: v1\n');

    expect(loadConfig({ KUBECONFIG: kubeconfig }, cwd, home).runner).toBe('kubernetes');
    expect(loadConfig({}, cwd, withHomeConfig).runner).toBe('kubernetes');
    expect(loadConfig({ KUBECONFIG: '/nonexistent/config' }, cwd, home).runner).toBe('local');
    expect(loadConfig({ KUBECONFIG: kubeconfig, KILN_RUNNER: 'local' }, cwd, home).runner).toBe(
      'local',
    );
  });

  it('reads the operator runtime settings, with the leader-election defaults of client-go', () => {
    expect(loadConfig({}, cwd, home).operatorRuntime).toEqual({
      workers: 4,
      leaseName: 'kiln-operator',
      leaseNamespace: 'kiln-builds',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      watchTimeoutMs: 300_000,
      resyncPeriodMs: 600_000,
    });
    expect(
      loadConfig(
        {
          KILN_OPERATOR_WORKERS: '8',
          KILN_OPERATOR_LEASE_NAME: 'kiln-operator.blue',
          KILN_OPERATOR_LEASE_NAMESPACE: 'kiln-system',
          KILN_OPERATOR_LEASE_DURATION_SECONDS: '4',
          KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS: '3',
          KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS: '1',
          KILN_OPERATOR_WATCH_TIMEOUT_SECONDS: '30',
          KILN_OPERATOR_RESYNC_SECONDS: '0',
        },
        cwd,
        home,
      ).operatorRuntime,
    ).toEqual({
      workers: 8,
      leaseName: 'kiln-operator.blue',
      leaseNamespace: 'kiln-system',
      leaseDurationMs: 4_000,
      renewDeadlineMs: 3_000,
      retryPeriodMs: 1_000,
      watchTimeoutMs: 30_000,
      resyncPeriodMs: 0,
    });
  });

  it('refuses lease timings where a leader could act after its Lease expired, and bad Lease names', () => {
    expect(
      problemsOf({
        KILN_OPERATOR_LEASE_DURATION_SECONDS: '10',
        KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS: '10',
      }),
    ).toEqual(['KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS']);
    expect(problemsOf({ KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS: '10' })).toEqual([
      'KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS',
    ]);
    expect(problemsOf({ KILN_OPERATOR_LEASE_NAME: 'Kiln_Operator' })).toEqual([
      'KILN_OPERATOR_LEASE_NAME',
    ]);
    expect(problemsOf({ KILN_OPERATOR_LEASE_NAMESPACE: 'Kiln.System' })).toEqual([
      'KILN_OPERATOR_LEASE_NAMESPACE',
    ]);
    expect(problemsOf({ KILN_OPERATOR_WORKERS: '0' })).toEqual(['KILN_OPERATOR_WORKERS']);
  });

  it('resolves a relative KILN_DATA_DIR against the working directory', () => {
    expect(loadConfig({ KILN_DATA_DIR: 'state' }, cwd, home).dataDir).toBe('/srv/kiln/state');
    expect(loadConfig({ KILN_DATA_DIR: '/var/lib/kiln' }, cwd, home).dataDir).toBe('/var/lib/kiln');
  });

  it('reads KILN_LIST_EXACT_COUNT_LIMIT from 0 to 1,000,000, 10,000 by default', () => {
    const limit = (value?: string) =>
      loadConfig(value === undefined ? {} : { KILN_LIST_EXACT_COUNT_LIMIT: value }, cwd, home)
        .listExactCountLimit;

    expect([limit(), limit('0'), limit('1000000')]).toEqual([10_000, 0, 1_000_000]);
    for (const bad of ['1000001', '-1', 'many']) {
      expect(problemsOf({ KILN_LIST_EXACT_COUNT_LIMIT: bad })).toEqual([
        'KILN_LIST_EXACT_COUNT_LIMIT',
      ]);
    }
  });

  it('accepts a postgres DATABASE_URL', () => {
    const url = 'postgres://kiln:pw@db.internal:5432/kiln';
    expect(loadConfig({ DATABASE_URL: url }, cwd, home).databaseUrl).toBe(url);
  });

  it('reads the JWT secret from KILN_JWT_SECRET_FILE and rejects an unreadable or short one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-secret-'));
    writeFileSync(join(dir, 'good'), `${'s'.repeat(40)}\n`);
    writeFileSync(join(dir, 'short'), 'tiny');

    expect(loadConfig({ KILN_JWT_SECRET_FILE: join(dir, 'good') }, cwd, home).jwtSecret).toEqual({
      kind: 'file',
      path: join(dir, 'good'),
      secret: 's'.repeat(40),
    });
    expect(() => loadConfig({ KILN_JWT_SECRET_FILE: join(dir, 'short') }, cwd, home)).toThrow(
      /KILN_JWT_SECRET_FILE: a file holding at least 32 bytes/,
    );
    expect(() => loadConfig({ KILN_JWT_SECRET_FILE: join(dir, 'missing') }, cwd, home)).toThrow(
      /KILN_JWT_SECRET_FILE: a readable file/,
    );
    expect(
      problemsOf({ KILN_JWT_SECRET: 'x'.repeat(40), KILN_JWT_SECRET_FILE: join(dir, 'good') }),
    ).toEqual(['KILN_JWT_SECRET']);
  });

  it('refuses URLs with credentials, a password alone included, and quotes them without', () => {
    const refused = (env: Record<string, string>) => {
      try {
        loadConfig(env, cwd, home);
      } catch (error) {
        return (error as Error).message;
      }
      throw new Error('expected a ConfigError');
    };

    const message = refused({
      KILN_UPLOAD_URL: 'http://:s3cret-pass@kiln.example.com',
      KILN_CLAIR_URL: 'https://user:s3cret-pass@clair.example.com',
    });

    expect(message).toContain(
      'KILN_UPLOAD_URL: an http(s) URL without credentials, got "http://kiln.example.com" (its credentials left out)',
    );
    expect(message).toContain('KILN_CLAIR_URL: an http(s) URL without credentials');
    expect(message).not.toContain('s3cret-pass');
    expect(message).toContain('docs/configuration.md');
  });

  it('treats blank values as unset', () => {
    expect(loadConfig({ PORT: '  ', KILN_ROLE: '' }, cwd, home)).toMatchObject({
      port: 8080,
      role: 'all',
    });
  });

  it('keeps only allowlisted variables for child processes, never kiln state', () => {
    const config = loadConfig(
      {
        PATH: '/opt/tools/bin:/usr/bin',
        HOME: '/home/kiln',
        LC_MESSAGES: 'C',
        https_proxy: 'http://proxy.internal:3128',
        PACKER_PLUGIN_PATH: '/opt/packer/plugins',
        CONTAINERS_REGISTRIES_CONF: '/etc/kiln/registries.conf',
        DOCKER_HOST: 'unix:///run/docker.sock',
        KILN_JWT_SECRET: 'j'.repeat(40),
        KILN_BOOTSTRAP_ADMIN_EMAIL: 'admin@example.com',
        KILN_BOOTSTRAP_ADMIN_PASSWORD: 'admin-password-1',
        DATABASE_URL: 'postgres://kiln:pw@db.internal/kiln',
        PGPASSWORD: 'pw',
        AWS_SECRET_ACCESS_KEY: 'aws',
        SHELL: '/bin/bash',
      },
      cwd,
      home,
    );

    expect(config.childEnvironment).toEqual({
      PATH: '/opt/tools/bin:/usr/bin',
      HOME: '/home/kiln',
      LC_MESSAGES: 'C',
      https_proxy: 'http://proxy.internal:3128',
      PACKER_PLUGIN_PATH: '/opt/packer/plugins',
      CONTAINERS_REGISTRIES_CONF: '/etc/kiln/registries.conf',
      DOCKER_HOST: 'unix:///run/docker.sock',
    });
  });

  it('gives child processes the system PATH when kiln has none', () => {
    expect(loadConfig({}, cwd, home).childEnvironment).toEqual({
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    });
  });
});
