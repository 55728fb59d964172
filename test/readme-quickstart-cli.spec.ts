import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalRegistry } from './support/registry.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const ROOT = join(__dirname, '..');
const CLI = join(ROOT, 'dist', 'cli', 'http', 'kiln.js');
const ADMIN = { email: 'admin@example.com', password: 'change me, please' };

/** The README's bash block between the cli-quickstart markers, as written. */
function quickStart(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const block =
    /<!-- cli-quickstart:begin[^>]*-->\s*```bash\n([\s\S]*?)```\s*<!-- cli-quickstart:end -->/.exec(
      readme,
    );
  if (block === null) throw new Error('README.md has no cli-quickstart block');
  return block[1]!;
}

/**
 * The README's quick start with the `kiln` command, run as written by bash against kiln as
 * `make run` starts it (the local runner, a bootstrap admin, a local registry): log in, build and
 * push a Dockerfile, onboard a team, make its CI a token and build with nothing but that token.
 * Only kiln's URL, the registry's address and `npx kiln` (the compiled CLI) are substituted.
 */
describe('the README quick start with the kiln command', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-readme-cli-');
  const home = mkdtempSync(join(tmpdir(), 'kiln-readme-home-'));
  const work = mkdtempSync(join(tmpdir(), 'kiln-readme-work-'));
  let registry: LocalRegistry;
  let kiln: TestApp;

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`make build\` (make test does)`);
    registry = await LocalRegistry.start();
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_LOCAL_REGISTRY: `${registry.address}/kiln`,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
        KILN_BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
        KILN_BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      },
    });
  }, 60_000);

  afterAll(async () => {
    await kiln?.close();
    await registry?.stop();
    for (const dir of [dataDir, home, work]) await rm(dir, { recursive: true, force: true });
  });

  it('runs as written: two builds pushed, the second with only the CI token', async () => {
    const script = quickStart()
      .replaceAll('npx kiln', `node '${CLI}'`)
      .replaceAll('http://localhost:8080', kiln.baseUrl)
      .replaceAll('127.0.0.1:5000', registry.address);
    const child = spawn('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: work,
      env: { PATH: process.env['PATH'] ?? '', HOME: home },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const status = await new Promise<number | null>((done) => child.on('close', done));

    expect({ status, stderr: status === 0 ? '' : stderr }).toEqual({ status: 0, stderr: '' });
    // Each image's tag, and the fallback tag listing its signed provenance (docs/provenance.md),
    // in the order the registry keeps them.
    const tagsOf = (repository: string): string[] => {
      const line = stdout.split('\n').find((l) => l.startsWith(`{"name":"${repository}"`));
      return ((line === undefined ? {} : JSON.parse(line)) as { tags?: string[] }).tags ?? [];
    };
    const withProvenance = (tag: string) => [tag, expect.stringMatching(/^sha256-[0-9a-f]{64}$/)];
    expect(tagsOf('kiln/hello').sort()).toEqual(withProvenance('v1').reverse());
    expect(tagsOf('platform/web').sort()).toEqual(withProvenance('ci-1'));
    expect(stdout).toMatch(/^Provenance: +verified: signed with the tenant's key/m);
    // The CI build was made by the token, in the team's tenant, by the admin who made the token.
    const [build] = await kiln.dataSource.query<Array<{ name: string; status: string }>>(
      `SELECT t.name, b.status FROM builds b JOIN tenants t ON t.id = b.tenant_id
        JOIN projects p ON p.id = b.project_id WHERE p.name = 'web'`,
    );
    expect(build).toEqual({ name: 'platform', status: 'success' });
    const tokens = await kiln.dataSource.query<Array<{ last_used_at: Date | null }>>(
      "SELECT last_used_at FROM api_tokens WHERE name = 'ci'",
    );
    expect(tokens).toEqual([{ last_used_at: expect.any(Date) }]);
  }, 240_000);
});
