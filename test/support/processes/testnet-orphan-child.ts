/**
 * Child process for the teardown tests: starts a test network, prints one JSON line
 * ({"pids":[…],"workDir":"…"}) on stdout, then idles until a signal (or SIGKILL) ends it, so a
 * test can check what happens to the tors of a Node process that dies.
 */
import { startTestnet } from '../../../internal/testnet/index.js';
import { FOREIGN_SIGTERM_LISTENER_ARG } from './orphan-child-flags.js';

export interface OrphanChildReport {
  readonly pids: readonly number[];
  readonly workDir: string;
}

// As a library in the same process may (playwright closes its browsers on SIGTERM): a listener
// that does not end the process, and promises nothing about the network.
if (process.argv.includes(FOREIGN_SIGTERM_LISTENER_ARG)) process.on('SIGTERM', () => undefined);
const net = await startTestnet();
const report: OrphanChildReport = { pids: net.pids, workDir: net.workDir };
process.stdout.write(JSON.stringify(report) + '\n');
// Keeps the process alive: it is meant to be ended from outside.
setInterval(() => undefined, 60_000);
