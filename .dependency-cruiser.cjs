// dependency-cruiser rules: the layering of the house as a lint rule (`make lint`). Every folder of
// src/ has a floor (FLOORS below) that says what it may import; an import that runs back up the
// floors fails the build, and so do the rules on packages, cycles and the composition root.
//
// Every path pattern starts with SRC rather than `^src/`. The same rules run on the real tree
// (`depcruise src`, paths like `src/logs/log-hub.ts`) and on the deliberate-violation fixture
// that test/architecture.spec.ts cruises (paths like `test/fixtures/architecture/src/logs/...`).
// The prefix is anchored and names that one fixture root, so a folder called `src/` anywhere else
// (node_modules, test/support) can never match by accident.
const SRC = '^(?:test/fixtures/architecture/)?src/';

const folders = (...names) => `${SRC}(?:${names.join('|')})/`;

// The floors of the house (docs/adr/0036-floors.md): for each folder of src/, what it may import
// besides itself, Node built-ins and packages. Lowest first; nothing imports a folder above it.
// A folder of src/ that is not listed here fails test/architecture.spec.ts.
const FLOORS = {
  // The ground: read once, imported by everything.
  config: { may: [], why: 'reads the environment once; everything imports it' },
  cluster: { may: [], why: 'holds the ports the operator runtime uses and kubernetes/ implements' },
  common: { may: ['config'], why: 'errors, the Error body, trace ids: shared by every feature' },
  metrics: {
    may: ['common', 'config'],
    why: 'is the one metrics registry; every feature records where its work happens',
  },
  tracing: {
    may: ['common', 'config', 'metrics'],
    why: 'loads the OpenTelemetry SDK when configured and spans requests; only the root imports it',
  },
  manifest: {
    may: ['common'],
    why: 'is the vocabulary of builds (methods, tools, reasons, formats) every feature shares',
  },
  database: {
    may: ['common', 'config', 'metrics'],
    why: 'is under every feature; features register with it',
  },
  secrets: { may: ['config'], why: 'seals build secrets and keeps kiln-made keys, for every role' },
  // Adapters behind ports, and the in-pod step program.
  'secret-managers': { may: ['common', 'manifest'], why: 'adapts vendor secret managers' },
  registries: { may: ['common', 'manifest', 'secret-managers'], why: 'adapts registries and S3' },
  steps: { may: ['config', 'manifest', 'registries'], why: 'runs inside a build pod, not in kiln' },
  // The features every role composes.
  'build-methods': { may: ['common', 'manifest'], why: 'translates a spec into a Job, purely' },
  lifecycle: {
    may: ['common', 'config', 'database', 'manifest', 'metrics'],
    why: 'owns the build state machine; log stores, runners and the operator drive it',
  },
  admission: {
    may: ['common', 'config', 'database', 'lifecycle', 'logs', 'manifest', 'metrics'],
    why: 'decides which started builds run (limits, fair share); runners and the operator ask it',
  },
  logs: {
    may: ['common', 'config', 'database', 'lifecycle', 'manifest', 'metrics'],
    why: 'is the log store; its HTTP and WebSocket transport (log-stream) sits above it',
  },
  artifacts: {
    may: ['common', 'config', 'database', 'lifecycle', 'logs', 'manifest', 'metrics'],
    why: 'stores SBOMs and scans; its routes (artifacts-http) sit above it',
  },
  integrations: {
    may: ['common', 'config', 'database', 'manifest', 'registries', 'secret-managers', 'secrets'],
    why: "prepares a starting build's access (BuildAccess) for both runners",
  },
  provenance: {
    may: [
      'artifacts',
      'common',
      'config',
      'database',
      'integrations',
      'lifecycle',
      'logs',
      'manifest',
      'metrics',
      'registries',
      'secret-managers',
      'secrets',
    ],
    why: "signs each successful build's provenance and attaches it; both runners ask it",
  },
  kubernetes: {
    may: ['cluster', 'common', 'config', 'metrics'],
    why: 'is the one door to the API server; what uses it sits above it',
  },
  operator: {
    may: [
      'admission',
      'artifacts',
      'build-methods',
      'cluster',
      'common',
      'config',
      'integrations',
      'kubernetes',
      'lifecycle',
      'logs',
      'manifest',
      'metrics',
      'provenance',
      'secrets',
      'steps',
    ],
    why: 'reconciles Builds in any role but api; the API is not in it',
  },
  runners: {
    may: [
      'admission',
      'artifacts',
      'build-methods',
      'common',
      'config',
      'integrations',
      'kubernetes',
      'lifecycle',
      'logs',
      'manifest',
      'metrics',
      'operator',
      'provenance',
      'registries',
      'steps',
    ],
    why: 'runs builds for the API; the API folders sit above it',
  },
  audit: {
    may: ['common', 'config', 'database', 'metrics'],
    why: 'records and keeps the audit log; the API and kiln-admin write to it',
  },
  // The API (the api role): transport on top.
  ratelimit: { may: ['common', 'config', 'database'], why: 'counts requests for the API' },
  auth: {
    may: ['common', 'config', 'database', 'metrics', 'ratelimit', 'secrets'],
    why: 'signs users in and checks permissions',
  },
  projects: {
    may: ['auth', 'common', 'config', 'database', 'manifest', 'metrics'],
    why: 'keeps projects and serves their routes',
  },
  builds: {
    may: [
      'admission',
      'auth',
      'build-methods',
      'common',
      'config',
      'lifecycle',
      'manifest',
      'metrics',
      'projects',
      'runners',
      'secrets',
    ],
    why: 'serves the builds API',
  },
  'log-stream': {
    may: ['auth', 'common', 'config', 'lifecycle', 'logs', 'metrics'],
    why: 'serves log pages and the log WebSocket',
  },
  'artifacts-http': {
    may: ['artifacts', 'auth', 'common', 'config', 'lifecycle', 'manifest', 'metrics'],
    why: 'serves the SBOM and scan routes',
  },
  'settings-http': {
    may: ['admission', 'auth', 'common', 'config', 'integrations', 'manifest', 'metrics'],
    why: "serves a tenant's settings (secret managers, registries, admission)",
  },
  retention: {
    may: ['auth', 'common', 'config', 'database', 'manifest', 'metrics', 'runners'],
    why: 'deletes finished builds by policy and serves its routes',
  },
  health: { may: ['auth', 'common', 'config', 'database', 'metrics'], why: 'answers the probes' },
  'audit-http': {
    may: ['audit', 'auth', 'common', 'config', 'metrics'],
    why: 'records every state-changing API call and serves the audit routes',
  },
  triggers: {
    may: [
      'auth',
      'build-methods',
      'builds',
      'common',
      'config',
      'database',
      'integrations',
      'lifecycle',
      'logs',
      'manifest',
      'metrics',
      'projects',
      'ratelimit',
      'runners',
      'secrets',
    ],
    why: 'turns git pushes into builds (webhooks, polling) and posts their statuses back',
  },
  'provenance-http': {
    may: ['auth', 'common', 'config', 'lifecycle', 'metrics', 'provenance'],
    why: 'serves provenance, the signing keys and their settings',
  },
  'console-host': { may: ['common', 'config'], why: 'serves the web console' },
  // A second entry point: it may compose what main.ts composes (not main.ts itself). Its http/
  // folder, the `kiln` command, is a client of the API and may not (rule cli-http-only-http).
  cli: {
    may: ['admission', 'audit', 'auth', 'common', 'config', 'database', 'integrations', 'projects'],
    why: 'administers kiln through its services (kiln-admin)',
  },
};
// Single files a folder may import from a folder above it: a repository, not its routes.
const ALSO = {
  // The one helper that prints a URL without its credentials: a leaf, importing nothing.
  config: ['common/url-credentials\\.ts$'],
  // Project git credentials, without the projects routes (the operator role has none).
  integrations: ['projects/projects\\.repository\\.ts$', 'projects/project\\.entity\\.ts$'],
};

// The composition root: wires every module together, so importing it from a feature is a cycle.
const COMPOSITION_ROOT = `${SRC}(?:main|app\\.[^/]+)\\.ts$`;
const MAIN = `${SRC}main\\.ts$`;
// Specs beside the code compose whatever they need to set a test up (ESLint exempts them too).
const SPEC = '\\.spec\\.ts$';
const NODE_MODULES = '(?:^|/)node_modules/';

const floorRules = Object.entries(FLOORS).map(([folder, { may, why }]) => ({
  name: `floor-${folder}`,
  severity: 'error',
  comment:
    `src/${folder}/ ${why}: it may import only ` +
    `${may.length === 0 ? 'itself' : `${may.join(', ')} and itself`}, Node built-ins and packages.`,
  from: { path: folders(folder), pathNot: SPEC },
  to: {
    path: SRC,
    pathNot: [
      folders(folder, ...may),
      ...(ALSO[folder] ?? []).map((file) => `${SRC}${file}`),
      ...(folder === 'cli' ? [COMPOSITION_ROOT] : []),
    ],
  },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...floorRules,
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
      name: 'cli-http-only-http',
      severity: 'error',
      comment:
        'src/cli/http/ is the `kiln` command, an HTTP client of the public API (DESIGN.md, ' +
        '"Teams, tokens and the CLI"): it imports only its own modules and packages, and meets ' +
        'the server through the API (its types come from the OpenAPI document, schema.gen.ts).',
      from: { path: `${SRC}cli/http/` },
      to: { path: SRC, pathNot: `${SRC}cli/http/` },
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
        'imports count too: erased by tsc, they still tie two modules into one.',
      from: { path: SRC },
      to: { circular: true },
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
    // to its own modules (eslint.config.js), and it meets the server only through the API. The
    // HTTP CLI's schema.gen.ts is generated at build (scripts/build-cli.sh): types only, and
    // absent from a fresh checkout, so it is left out rather than reported as unresolvable.
    exclude: { path: ['^src/console/', 'schema[.]gen[.](?:js|ts)$'] },
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
