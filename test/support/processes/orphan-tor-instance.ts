/**
 * Child process for the "no orphans" test: starts one TorInstance from the options given as a
 * JSON argument, prints {"torPid":N} once tor is spawned, then idles until it is killed, so the
 * test can check that tor follows its supervisor (__OwningControllerProcess).
 */
import { TorInstance, type TorInstanceOptions } from '../../../supervisor/tor/instance.js';

export interface OrphanInstanceReport {
  readonly torPid: number;
}

const options = JSON.parse(process.argv[2] ?? '{}') as TorInstanceOptions;
const instance = new TorInstance(options);
await instance.start();
const report: OrphanInstanceReport = { torPid: instance.pid ?? 0 };
process.stdout.write(JSON.stringify(report) + '\n');
// Keeps the process alive: it is meant to be ended from outside.
setInterval(() => undefined, 60_000);
