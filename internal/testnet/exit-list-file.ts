/** One exit as a Tor exit list records it: the relay and the address its traffic was seen leaving from. */
export interface ExitListEntry {
  readonly fingerprint: string;
  readonly exitAddress: string;
}

/**
 * The network's exit list in the bulk `exit-addresses` format the Tor Project publishes
 * (TorDNSEL: `ExitNode`, `Published`, `LastStatus`, then one `ExitAddress <ip> <time>` per
 * address seen), so a pool can be given `EXIT_LIST=<file>` as it would be given the public list.
 * Times are UTC, `YYYY-MM-DD HH:MM:SS`.
 */
export function exitListFileContent(entries: readonly ExitListEntry[], at: Date): string {
  const time = at.toISOString().slice(0, 19).replace('T', ' ');
  return entries.map((e) => [`ExitNode ${e.fingerprint}`, `Published ${time}`, `LastStatus ${time}`, `ExitAddress ${e.exitAddress} ${time}`, ''].join('\n')).join('');
}
