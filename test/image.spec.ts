import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { dockerIgnore, parseDockerfile, type Stage } from './support/dockerfile.js';

/**
 * The container image's invariants (issue 13), checked on the Dockerfile itself because no
 * container engine runs here: `make image` builds it where one does.
 */
const ROOT = join(__dirname, '..');
const dockerfile = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
const runtime = dockerfile.stages.at(-1)!;
const build = dockerfile.stages[0]!;
const packageJson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

const args = (stage: Stage, keyword: string): string[] =>
  stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);

/** `COPY [--flags] src... dest`: the sources, and the stage they come from (--from). */
function copies(stage: Stage): Array<{ from: string | undefined; sources: string[] }> {
  return args(stage, 'COPY').map((line) => {
    const words = line.split(/\s+/);
    const flags = words.filter((w) => w.startsWith('--'));
    const paths = words.filter((w) => !w.startsWith('--'));
    const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
    return { from, sources: paths.slice(0, -1) };
  });
}

/** The server's sources: the web console (src/console/) is bundled at build and ships none. */
function* sourceFiles(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (path === join(ROOT, 'src', 'console')) continue;
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (path.endsWith('.ts') && !path.endsWith('.spec.ts')) yield path;
  }
}

describe('the container image (Dockerfile)', () => {
  it('has a build stage and a runtime stage, each base pinned by digest', () => {
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of dockerfile.stages) expect(stage.image).toMatch(/@sha256:[0-9a-f]{64}$/);
  });

  it('runs a current Node LTS (an even major, 22 or later), the same in both stages', () => {
    const majors = dockerfile.stages.map((stage) => {
      const match = /(?:\/node:|nodejs)(\d+)/.exec(stage.image);
      expect(match).not.toBeNull();
      return Number(match![1]);
    });
    expect(new Set(majors).size).toBe(1);
    expect(majors[0]! % 2).toBe(0);
    expect(majors[0]).toBeGreaterThanOrEqual(22);
  });

  it('installs from the lockfile before it copies any source (the dependency layer is cached)', () => {
    const steps = build.instructions.filter((i) => i.keyword === 'COPY' || i.keyword === 'RUN');
    const install = steps.findIndex((i) => i.keyword === 'RUN' && /\bnpm ci\b/.test(i.args));
    expect(install).toBeGreaterThan(0);
    const before = steps.slice(0, install).filter((i) => i.keyword === 'COPY');
    expect(before).toHaveLength(1);
    expect(before[0]!.args.split(/\s+/).slice(0, -1).sort()).toEqual([
      '.npmrc',
      'package-lock.json',
      'package.json',
    ]);
  });

  it('ships no dev dependency, and src/ needs none at run time', () => {
    const prune = args(build, 'RUN').find((line) => /npm prune\b/.test(line)) ?? '';
    expect(prune).toMatch(/--omit=dev/);
    // The runtime's node_modules is the pruned one.
    const modules = copies(runtime).find((c) => c.sources.some((s) => s.includes('node_modules')));
    expect(modules?.from).toBe(build.name);

    const runtimeImports = new Set<string>();
    for (const file of sourceFiles(join(ROOT, 'src'))) {
      const text = readFileSync(file, 'utf8');
      for (const match of text.matchAll(/^import\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms)) {
        const spec = match[1]!;
        if (spec.startsWith('.') || spec.startsWith('node:')) continue;
        const name = spec.startsWith('@')
          ? spec.split('/').slice(0, 2).join('/')
          : spec.split('/')[0]!;
        runtimeImports.add(`${name} (${relative(ROOT, file)})`);
        expect({
          name,
          file: relative(ROOT, file),
          runtime: name in packageJson.dependencies,
        }).toEqual({ name, file: relative(ROOT, file), runtime: true });
      }
    }
    expect(runtimeImports.size).toBeGreaterThan(10);
  });

  it('runs as UID 65532 on a base with no shell, in exec form, with the role from KILN_ROLE', () => {
    expect(args(runtime, 'USER')).toEqual(['65532:65532']);
    expect(runtime.image).toMatch(/^gcr\.io\/distroless\/nodejs\d+-debian\d+:nonroot@/);
    // Nothing in the runtime stage needs a shell to build either.
    expect(args(runtime, 'RUN')).toEqual([]);
    const entrypoint = JSON.parse(args(runtime, 'ENTRYPOINT')[0]!) as string[];
    expect(entrypoint).toEqual(['/nodejs/bin/node', 'dist/main.js']);
    expect(args(runtime, 'ENV').join(' ')).toMatch(/\bKILN_ROLE=all\b/);
  });

  it('carries the OCI labels', () => {
    const labels = args(runtime, 'LABEL').join(' ');
    for (const key of ['title', 'description', 'licenses', 'version', 'revision', 'source'])
      expect(labels).toContain(`org.opencontainers.image.${key}=`);
  });

  it('copies no secret, no .kiln/ and nothing the .dockerignore keeps out of the context', () => {
    const ignored = dockerIgnore(readFileSync(join(ROOT, '.dockerignore'), 'utf8'));
    for (const path of [
      '.kiln/jwt-secret',
      '.kiln/postgres/PG_VERSION',
      '.env',
      '.git/config',
      'node_modules/pg/package.json',
      'dist/main.js',
      'test/support/auth.ts',
      'bench/operator.bench.mjs',
      'charts/kiln/values.yaml',
      'tls/server.key',
      'src/auth/auth.spec.ts',
      'src/logs/__fixtures__/kaniko.log',
    ])
      expect({ path, ignored: ignored(path) }).toEqual({ path, ignored: true });
    // Every file the Dockerfile copies from the context is in it, and exists.
    const fromContext = dockerfile.stages.flatMap((stage) =>
      copies(stage)
        .filter((c) => c.from === undefined)
        .flatMap((c) => c.sources),
    );
    expect(fromContext).not.toContain('.');
    for (const source of [...fromContext, 'src/main.ts']) {
      expect({ source, ignored: ignored(source) }).toEqual({ source, ignored: false });
      expect(existsSync(join(ROOT, source))).toBe(true);
    }
    // The runtime stage takes only the build's output.
    for (const copy of copies(runtime)) {
      expect(copy.from).toBe(build.name);
      for (const source of copy.sources)
        expect(source).toMatch(/^\/src\/(package\.json|node_modules|dist)$/);
    }
  });
});
