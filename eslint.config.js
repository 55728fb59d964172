import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

const typeormOnlyIn = ['src/database/**', '**/*.repository.ts', '**/*.entity.ts'];
const kubernetesOnlyIn = ['src/kubernetes/**'];

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

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', '.kiln/', '**/*.cjs', '*.config.js'] },
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
      'no-restricted-imports': restricted([...typeorm, ...kubernetes]),
    },
  },
  // Each adapter may import its own library (and only its own).
  { files: typeormOnlyIn, rules: { 'no-restricted-imports': restricted(kubernetes) } },
  { files: kubernetesOnlyIn, rules: { 'no-restricted-imports': restricted(typeorm) } },
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
      },
    },
  },
  prettier,
);
