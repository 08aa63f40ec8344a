import { expect } from 'chai';
import { ESLint } from 'eslint';
import { findRepoRoot } from '../../internal/testnet/repo-root.js';

/**
 * The layout table of docs/architecture.md is enforced by eslint.config.js (`npm test` runs
 * `eslint .`): each forbidden import below must be reported, each allowed one must not.
 */
describe('layout import rules (eslint.config.js)', function () {
  this.timeout(60_000);
  const eslint = new ESLint({ cwd: findRepoRoot() });

  async function restricted(filePath: string, specifier: string): Promise<boolean> {
    const [result] = await eslint.lintText(`import { x } from '${specifier}';\nexport const y = x;\n`, { filePath });
    return (result?.messages ?? []).some((m) => m.ruleId === 'no-restricted-imports');
  }

  const cases: [string, string, boolean][] = [
    ['shared/config/x.ts', '../../supervisor/service.js', true],
    ['shared/config/x.ts', '../../workers/main.js', true],
    ['shared/x.ts', '../internal/testnet/index.js', true],
    ['shared/config/x.ts', '../ipc/protocol.js', false],
    ['workers/api/x.ts', '../../supervisor/pool/pool.js', true],
    ['workers/proxy/x.ts', '../../shared/ipc/protocol.js', false],
    ['supervisor/pool/x.ts', '../../workers/proxy/tunnel.js', true],
    ['supervisor/demo.ts', '../internal/testnet/index.js', false],
    ['supervisor/cli.ts', '../internal/testnet/index.js', true],
    ['supervisor/pool/x.ts', '../../internal/testnet/index.js', true],
    // The supervisor's inner order: leaves import no sibling, exits only tor and audit, and the
    // folders the pool implements interfaces of never import it.
    ['supervisor/health/x.ts', '../sessions/session-table.js', true],
    ['supervisor/health/x.ts', './health-machine.js', false],
    ['supervisor/tor/x.ts', '../exits/exit-relay.js', true],
    ['supervisor/sessions/x.ts', '../pool/pool.js', true],
    ['supervisor/audit/x.ts', '../service.js', true],
    ['supervisor/routing/x.ts', '../sessions/session.js', true],
    ['supervisor/stats/x.ts', '../health/weights.js', true],
    ['supervisor/startup/x.ts', '../state/state-store.js', true],
    ['supervisor/metrics/x.ts', '../pool/pool.js', true],
    ['supervisor/metrics/x.ts', '../../shared/logger.js', false],
    ['supervisor/exits/x.ts', '../tor/relay-directory.js', false],
    ['supervisor/exits/x.ts', '../audit/audit-log.js', false],
    ['supervisor/exits/x.ts', '../health/weights.js', true],
    ['supervisor/state/x.ts', '../pool/pool.js', true],
    ['supervisor/state/x.ts', '../sessions/session-table.js', false],
    ['supervisor/fleet/x.ts', '../pool/pool.js', true],
    ['supervisor/fleet/x.ts', '../exits/exit-assignments.js', false],
    ['supervisor/verdicts/x.ts', '../pool/instance-registry.js', true],
    ['supervisor/verdicts/x.ts', '../health/health-tracker.js', false],
    ['supervisor/pool/x.ts', '../verdicts/verdicts.js', false],
    // The two workers meet only in shared/.
    ['workers/api/x.ts', '../proxy/client-address.js', true],
    ['workers/api/x.ts', '../proxy-worker/leased-router.js', true],
    ['workers/proxy/x.ts', '../api/route-table.js', true],
    ['workers/proxy-worker/x.ts', '../api/api-app.js', true],
    ['workers/proxy-worker/x.ts', '../proxy/proxy-types.js', false],
    ['internal/testnet/x.ts', '../../supervisor/tor/torrc.js', true],
    ['internal/testnet/x.ts', '../../shared/logger.js', false],
    ['dashboard/src/views/x.tsx', '../../../shared/config/config.js', true],
    ['dashboard/src/views/x.tsx', '../../../shared/ipc/protocol.js', true],
    ['dashboard/src/views/x.tsx', '../../../supervisor/pool/pool.js', true],
    ['dashboard/src/views/x.tsx', '../../../shared/api/views.js', false],
    ['dashboard/src/views/x.tsx', '../../../shared/config/limits.js', false],
    ['test/unit/x.ts', '../../supervisor/pool/pool.js', false],
    ['clients/node/src/x.ts', '../../../shared/api/session-username.js', true],
    ['clients/node/src/x.ts', './username.js', false],
    ['release/x.ts', '../supervisor/service.js', true],
    ['release/x.ts', '../shared/errors/error-message.js', false],
  ];
  for (const [file, specifier, forbidden] of cases) {
    it(`${file}: ${specifier} is ${forbidden ? 'refused' : 'allowed'}`, async () => {
      expect(await restricted(file, specifier)).to.equal(forbidden);
    });
  }
});
