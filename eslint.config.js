import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'dist-*/**', 'clients/*/dist/**', 'node_modules/**', '.testnet/**', 'data/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // TypeScript resolves names itself; for the few .mjs/.cjs scripts Node's globals are implied.
      'no-undef': 'off',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Parsers and validators match control characters on purpose.
      'no-control-regex': 'off',
    },
  },
  // The layout table of docs/architecture.md, enforced: what each directory may import.
  ...layoutRules(),
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);

/**
 * One `no-restricted-imports` block per directory of docs/architecture.md's layout table. The
 * patterns match the relative specifiers the code uses (`../../supervisor/...`), at any depth.
 */
function layoutRules() {
  const dirs = (...names) => names.flatMap((n) => [`../${n}/*`, `../../${n}/*`, `../../../${n}/*`, `../../../../${n}/*`, `../${n}`, `../../${n}`]);
  const rule = (files, forbidden, message) => ({
    files,
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: dirs(...forbidden), message }] }] },
  });
  return [
    rule(['shared/**/*.ts'], ['supervisor', 'workers', 'internal', 'dashboard', 'test', 'bench'], 'shared/ imports nothing of ours outside shared/.'),
    rule(['workers/**/*.ts'], ['supervisor', 'internal', 'dashboard', 'test', 'bench'], 'workers/ import only shared/: the supervisor is reached over the IPC protocol.'),
    rule(['supervisor/**/*.ts'], ['workers', 'dashboard', 'test', 'bench'], 'supervisor/ imports shared/ (and internal/ for the demo), never a worker.'),
    rule(['internal/**/*.ts'], ['supervisor', 'workers', 'dashboard', 'test', 'bench'], 'internal/ imports only shared/.'),
    rule(['release/**/*.ts'], ['supervisor', 'workers', 'internal', 'dashboard', 'test', 'bench', 'clients'], 'release/ builds and cuts releases from the outside: it imports only shared/.'),
    rule(['clients/**/*.ts'], ['shared', 'supervisor', 'workers', 'internal', 'dashboard', 'test', 'bench'], 'clients/ are packages of their own: they speak to exitpool over its protocols only.'),
    {
      files: ['dashboard/src/**/*.ts', 'dashboard/src/**/*.tsx'],
      rules: {
        'no-restricted-imports': [
          'error',
          {
            patterns: [
              { group: dirs('supervisor', 'workers', 'internal', 'test', 'bench'), message: 'The dashboard imports nothing of the server.' },
              {
                regex: '^(\\.\\./)+shared/(?!api/|config/limits\\.js$|auth/token-record\\.js$)',
                message: 'The dashboard imports only the shared API types (shared/api, shared/auth/token-record.ts) and shared/config/limits.ts, which need no Node.',
              },
            ],
          },
        ],
      },
    },
  ];
}
