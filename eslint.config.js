import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

const typeormOnlyIn = ['src/database/**', '**/*.repository.ts', '**/*.entity.ts'];
const kubernetesOnlyIn = ['src/kubernetes/**'];
const swaggerOnlyIn = ['src/common/openapi-document.ts'];

const restricted = (paths) => [
  'error',
  { paths: paths.map((p) => ({ ...p, allowTypeImports: true })), patterns: [] },
];
const typeorm = [
  {
    name: 'typeorm',
    message: 'TypeORM belongs in src/database/, *.repository.ts and *.entity.ts.',
  },
  {
    name: '@nestjs/typeorm',
    message: 'TypeORM belongs in src/database/, *.repository.ts and *.entity.ts.',
  },
];
const kubernetes = [
  {
    name: '@kubernetes/client-node',
    message: '@kubernetes/client-node belongs in src/kubernetes/.',
  },
];

// The running kiln never loads @nestjs/swagger: its decorators are src/common/openapi-decorators.ts
// and the document is generated at build time (docs/adr/0051-api-role-memory.md).
const swagger = [
  {
    name: '@nestjs/swagger',
    message:
      'Use src/common/openapi-decorators.ts; only the build-time generator (common/openapi-document.ts) loads @nestjs/swagger.',
  },
];

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'node_modules/',
      'coverage/',
      '.kiln/',
      'test-results/',
      '**/*.cjs',
      '*.config.js',
      // Generated at build from kiln's OpenAPI document (scripts/build-console.sh, build-cli.sh).
      'src/console/src/api/schema.gen.ts',
      'src/cli/http/api/schema.gen.ts',
    ],
  },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      eqeqeq: ['error', 'always'],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      // Decorated Nest classes are referenced by DI metadata; type-only imports would erase them.
      '@typescript-eslint/no-extraneous-class': 'off',
      'no-restricted-imports': restricted([...typeorm, ...kubernetes, ...swagger]),
    },
  },
  // Each adapter may import its own library (and only its own).
  {
    files: typeormOnlyIn,
    rules: { 'no-restricted-imports': restricted([...kubernetes, ...swagger]) },
  },
  {
    files: kubernetesOnlyIn,
    rules: { 'no-restricted-imports': restricted([...typeorm, ...swagger]) },
  },
  {
    files: swaggerOnlyIn,
    rules: { 'no-restricted-imports': restricted([...typeorm, ...kubernetes]) },
  },
  {
    // The web console (src/console/, its own tsconfig: DOM, Preact JSX). Its own rules keep the
    // token out of storage that outlives the tab or that other code reads, and keep markup made
    // from log text or API data out of innerHTML (docs/adr/0028-web-console.md).
    files: ['src/console/**/*.{ts,tsx}'],
    languageOptions: {
      globals: {
        window: 'readonly',
        document: 'readonly',
        location: 'readonly',
        history: 'readonly',
        sessionStorage: 'readonly',
        navigator: 'readonly',
        WebSocket: 'readonly',
        fetch: 'readonly',
        URL: 'readonly',
        URLSearchParams: 'readonly',
      },
    },
    rules: {
      'no-restricted-globals': [
        'error',
        { name: 'localStorage', message: 'Tokens and drafts stay in sessionStorage (ADR 0028).' },
        { name: 'eval', message: 'The console runs without unsafe-eval.' },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'window', property: 'localStorage', message: 'Use sessionStorage (ADR 0028).' },
        { object: 'document', property: 'cookie', message: 'kiln sets no cookie (ADR 0028).' },
      ],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./){2,}',
              message:
                'The console imports only its own modules and packages: it meets the server through the API (schema.gen.ts).',
            },
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "JSXAttribute[name.name='dangerouslySetInnerHTML']",
          message: 'Render text as text: log lines and API data are never markup.',
        },
        {
          selector: 'AssignmentExpression[left.property.name=/^(innerHTML|outerHTML)$/]',
          message: 'Render text as text: log lines and API data are never markup.',
        },
      ],
    },
  },
  {
    // Tests assert on untyped JSON bodies and build fixtures freely.
    files: ['**/*.spec.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      'no-restricted-imports': 'off',
    },
  },
  {
    // Benchmarks and test helpers run as their own processes are plain Node ESM, outside the TypeScript project.
    files: ['bench/**/*.mjs', 'test/**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        URL: 'readonly',
        fetch: 'readonly',
        performance: 'readonly',
        AbortController: 'readonly',
        TextDecoder: 'readonly',
      },
    },
  },
  {
    // Pages split into a folder (src/console/src/pages/<page>/) are one level deeper: they may
    // reach src/console/src (../../), never outside the console.
    files: ['src/console/src/pages/*/**/*.{ts,tsx}'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./){3,}',
              message:
                'The console imports only its own modules and packages: it meets the server through the API (schema.gen.ts).',
            },
          ],
        },
      ],
    },
  },
  {
    // Small rooms (issue 28; docs/adr/0035, 0037, 0038): no file of src/ over 600 lines, no
    // function over 120. Tests and generated files excepted.
    files: ['src/**/*.{ts,tsx}'],
    ignores: ['**/*.spec.ts', '**/*.generated.ts', '**/*.gen.ts'],
    rules: { 'max-lines': ['error', 600], 'max-lines-per-function': ['error', 120] },
  },
  prettier,
);
