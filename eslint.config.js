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
 * In a flat config the last block that matches a file sets the rule for it, so a narrower block
 * repeats its parent's patterns and adds its own.
 */
function layoutRules() {
  const dirs = (...names) => names.flatMap((n) => [`../${n}/*`, `../../${n}/*`, `../../../${n}/*`, `../../../../${n}/*`, `../${n}`, `../../${n}`]);
  // Only a file directly under supervisor/X/ reaches a sibling folder as `../Y/…`, or the
  // supervisor's own files (service.ts, worker-ipc.ts, …) as `../file.js`.
  const sibling = (...names) => names.map((n) => `../${n}/*`);
  const SUPERVISOR_ROOT_FILES = ['../*.js'];
  const SUPERVISOR_FOLDERS = ['audit', 'auth', 'cluster', 'exits', 'fleet', 'health', 'metrics', 'pool', 'routing', 'sessions', 'startup', 'state', 'stats', 'tor', 'verdicts'];
  const block = (files, groups) => ({
    files,
    rules: { 'no-restricted-imports': ['error', { patterns: groups.map(([group, message]) => ({ group, message })) }] },
  });
  const shared = [dirs('supervisor', 'workers', 'internal', 'dashboard', 'test', 'bench'), 'shared/ imports nothing of ours outside shared/.'];
  const workers = [dirs('supervisor', 'internal', 'dashboard', 'test', 'bench'), 'workers/ import only shared/: the supervisor is reached over the IPC protocol.'];
  const supervisor = [dirs('workers', 'dashboard', 'test', 'bench'), 'supervisor/ imports shared/, never a worker.'];
  const internalOnlyFromDemo = [dirs('internal'), 'internal/ (the private test network) is for the demo only (supervisor/demo.ts).'];
  const leaf = (folder) => [
    [...sibling(...SUPERVISOR_FOLDERS.filter((f) => f !== folder)), ...SUPERVISOR_ROOT_FILES],
    `supervisor/${folder}/ is a leaf of the supervisor: it imports no sibling folder (docs/architecture.md, "Layout").`,
  ];
  const only = (folder, allowed) => [
    [...sibling(...SUPERVISOR_FOLDERS.filter((f) => f !== folder && !allowed.includes(f))), ...SUPERVISOR_ROOT_FILES],
    `supervisor/${folder}/ imports only ${allowed.join(', ')} of the supervisor (docs/architecture.md, "Layout").`,
  ];
  const neverPool = (folder) => [
    [...sibling('pool'), ...SUPERVISOR_ROOT_FILES],
    `supervisor/${folder}/ never imports the pool: it defines the interface the pool implements.`,
  ];
  return [
    block(['shared/**/*.ts'], [shared]),
    block(['workers/**/*.ts'], [workers]),
    block(['workers/api/**/*.ts'], [workers, [dirs('proxy', 'proxy-worker'), 'The API worker never imports the proxy worker: what both need lives in shared/.']]),
    block(['workers/proxy/**/*.ts', 'workers/proxy-worker/**/*.ts'], [workers, [dirs('api'), 'The proxy worker never imports the API worker: what both need lives in shared/.']]),
    block(['supervisor/**/*.ts'], [supervisor, internalOnlyFromDemo]),
    block(['supervisor/demo.ts'], [supervisor]),
    ...['audit', 'tor', 'health', 'sessions', 'stats', 'routing', 'startup', 'metrics'].map((f) => block([`supervisor/${f}/**/*.ts`], [supervisor, internalOnlyFromDemo, leaf(f)])),
    block(['supervisor/exits/**/*.ts'], [supervisor, internalOnlyFromDemo, only('exits', ['tor', 'audit'])]),
    ...['state', 'fleet', 'verdicts'].map((f) => block([`supervisor/${f}/**/*.ts`], [supervisor, internalOnlyFromDemo, neverPool(f)])),
    block(['release/**/*.ts'], [[dirs('supervisor', 'workers', 'internal', 'dashboard', 'test', 'bench', 'clients'), 'release/ builds and cuts releases from the outside: it imports only shared/.']]),
    block(['internal/**/*.ts'], [[dirs('supervisor', 'workers', 'dashboard', 'test', 'bench'), 'internal/ imports only shared/.']]),
    block(['clients/**/*.ts'], [[dirs('shared', 'supervisor', 'workers', 'internal', 'dashboard', 'test', 'bench'), 'clients/ are packages of their own: they speak to exitpool over its protocols only.']]),
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
