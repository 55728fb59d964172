// dependency-cruiser rules: the layering from the design doc as a lint rule (`make lint`).
// Layers, high to low: transport (controllers, gateways) → services → lifecycle / log store /
// build methods → database → config. An import that runs back up the layers fails the build.
//
// Every path pattern starts with SRC rather than `^src/`. The same rules run on the real tree
// (`depcruise src`, paths like `src/logs/log-hub.ts`) and on the deliberate-violation fixture
// that test/architecture.spec.ts cruises (paths like `test/fixtures/architecture/src/logs/...`).
// The prefix is anchored and names that one fixture root, so a folder called `src/` anywhere else
// (node_modules, test/support) can never match by accident.
const SRC = '^(?:test/fixtures/architecture/)?src/';

const folders = (...names) => `${SRC}(?:${names.join('|')})/`;

// The folders a role serves; `health/` is shared by every role and so is not "API".
const API = folders('auth', 'projects', 'builds', 'log-stream', 'ratelimit');
// Layers below the API, and the operator side: none of them may reach up into it.
const BELOW_API = folders(
  'operator',
  'runners',
  'kubernetes',
  'logs',
  'lifecycle',
  'build-methods',
  'database',
  'config',
);
// The composition root: wires every module together, so importing it from a feature is a cycle.
const COMPOSITION_ROOT = `${SRC}(?:main|app\\.[^/]+)\\.ts$`;
const MAIN = `${SRC}main\\.ts$`;
// Specs beside the code compose whatever they need to set a test up (ESLint exempts them too).
const SPEC = '\\.spec\\.ts$';
const NODE_MODULES = '(?:^|/)node_modules/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-composition-root-imports',
      severity: 'error',
      comment:
        'src/main.ts and src/app.* (app.module, app.factory, app.entities) assemble the whole ' +
        'application. Only the composition root itself and src/cli/ (a second entry point) may ' +
        'import them; a feature that does creates a cycle through every module.',
      from: { path: SRC, pathNot: [COMPOSITION_ROOT, folders('cli'), SPEC] },
      to: { path: COMPOSITION_ROOT },
    },
    {
      name: 'no-main-imports',
      severity: 'error',
      comment:
        'src/main.ts starts the server when loaded. The CLI and the app.* files may import the ' +
        'other composition-root files, never main.ts (completes no-composition-root-imports).',
      from: { path: [folders('cli'), COMPOSITION_ROOT], pathNot: [MAIN, SPEC] },
      to: { path: MAIN },
    },
    {
      name: 'api-not-from-operator-or-store',
      severity: 'error',
      comment:
        'The API folders (auth, projects, builds, log-stream, ratelimit) sit on top. The ' +
        'operator, runners, kubernetes, the log store, lifecycle, build methods, database and ' +
        'config run without them (in other roles) and must not import them. Pass what they ' +
        'need down through a port or a value instead.',
      from: { path: BELOW_API, pathNot: SPEC },
      to: { path: API },
    },
    {
      name: 'log-store-no-auth',
      severity: 'error',
      comment:
        'src/logs/ is the log store. Authorization and the HTTP/WebSocket transport ' +
        '(src/log-stream/) sit above it: log-stream imports logs, never the reverse.',
      from: { path: folders('logs'), pathNot: SPEC },
      to: { path: folders('auth', 'log-stream') },
    },
    {
      name: 'lifecycle-no-logs-or-runners',
      severity: 'error',
      comment:
        'src/lifecycle/ owns the build state machine. Log storage, log transport, runners and ' +
        'the operator drive it; it must not know about them.',
      from: { path: folders('lifecycle'), pathNot: SPEC },
      to: { path: folders('logs', 'log-stream', 'runners', 'operator') },
    },
    {
      name: 'database-imports-no-feature',
      severity: 'error',
      comment:
        'src/database/ is the layer under every feature: it may import only database/, ' +
        'config/, common/ and packages. Features register their entities with it (the ' +
        'composition root lists them), not the other way round.',
      from: { path: folders('database'), pathNot: SPEC },
      to: {
        pathNot: [folders('database', 'config', 'common'), NODE_MODULES],
        dependencyTypesNot: ['core'],
        couldNotResolve: false, // reported by not-to-unresolvable
      },
    },
    {
      name: 'config-is-the-ground',
      severity: 'error',
      comment:
        'src/config/ reads the environment once and is imported by everything, so it imports ' +
        'only itself, Node built-ins and packages.',
      from: { path: folders('config'), pathNot: SPEC },
      to: {
        pathNot: [folders('config'), NODE_MODULES],
        dependencyTypesNot: ['core'],
        couldNotResolve: false, // reported by not-to-unresolvable
      },
    },
    {
      name: 'typeorm-only-in-data-layer',
      severity: 'error',
      comment:
        'TypeORM belongs in src/database/, *.repository.ts and *.entity.ts. Type-only imports ' +
        '(e.g. `import type { DataSource }`) are allowed anywhere, as in eslint.config.js.',
      from: {
        path: SRC,
        pathNot: [folders('database'), '\\.repository\\.ts$', '\\.entity\\.ts$', SPEC],
      },
      to: {
        path: `(?:${NODE_MODULES}|^)(?:typeorm|@nestjs/typeorm)(?:/|$)`,
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'kubernetes-client-only-in-kubernetes',
      severity: 'error',
      comment:
        '@kubernetes/client-node belongs in src/kubernetes/, the one door to the API server. ' +
        'Type-only imports are allowed anywhere, as in eslint.config.js.',
      from: { path: SRC, pathNot: [folders('kubernetes'), SPEC] },
      to: {
        path: `(?:${NODE_MODULES}|^)@kubernetes/client-node(?:/|$)`,
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'vendor-sdks-behind-ports',
      severity: 'error',
      comment:
        "The secret managers' and S3's SDKs belong in their adapters (src/secret-managers/, " +
        'src/registries/), behind the SecretManager and Registry ports (ADR 0021, 0022).',
      from: { path: SRC, pathNot: [folders('secret-managers', 'registries'), SPEC] },
      to: {
        path: `(?:${NODE_MODULES}|^)(?:@aws-sdk|@azure|@smithy)/`,
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'This import closes a cycle between src/ modules. Cycles make module load order matter ' +
        '(undefined classes in Nest DI) and usually mean two layers know each other. Type-only ' +
        'imports are erased by tsc and do not count.',
      from: { path: SRC },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment:
        'A relative import that resolves to no file (a typo, or a `.js` suffix without its `.ts` ' +
        'source).',
      from: { path: SRC },
      to: { couldNotResolve: true, path: '^[.]{1,2}/' },
    },
  ],
  options: {
    doNotFollow: { path: NODE_MODULES },
    // The web console is a browser program with its own tsconfig and build (Vite); ESLint keeps it
    // to its own modules (eslint.config.js), and it meets the server only through the API.
    exclude: { path: '^src/console/' },
    // Also see `import type` edges (dropped by tsc) so the type-only exemptions above are real.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // ESM sources import './x.js' and the file on disk is './x.ts'. dependency-cruiser retries an
    // unresolved .js import as .ts the way tsc does; enhanced-resolve's `extensionAlias` is not
    // accepted by this version's schema and is not needed (test/architecture.spec.ts checks it).
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    skipAnalysisNotInRules: true,
  },
};
