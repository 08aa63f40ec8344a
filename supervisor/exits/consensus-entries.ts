import { parseRouterStatus, type RouterStatus } from '../tor/control-events.js';

/** One router-status entry of `GETINFO ns/all`, with the consensus weight. */
export interface ConsensusEntry extends RouterStatus {
  bandwidth: number;
}

/**
 * The entries of `GETINFO ns/all` (dir-spec §3.4.1, one `r` line starting each). A malformed
 * entry is skipped, not fatal: one odd relay must not empty the catalog.
 */
export function parseConsensusEntries(text: string): ConsensusEntry[] {
  const entries: ConsensusEntry[] = [];
  let chunk: string[] = [];
  const flush = (): void => {
    if (chunk.length === 0) return;
    try {
      const status = parseRouterStatus(chunk.join('\n'));
      const w = chunk.find((l) => l.startsWith('w '));
      const match = w ? /(?:^|\s)Bandwidth=(\d+)/.exec(w) : null;
      entries.push({ ...status, bandwidth: match ? Number(match[1]) : 0 });
    } catch {
      // skipped: see above
    }
    chunk = [];
  };
  for (const line of text.split('\n')) {
    if (line.startsWith('r ')) flush();
    if (line.trim() !== '') chunk.push(line.trim());
  }
  flush();
  return entries;
}

/** What a microdescriptor says of its relay's family. */
export interface FamilyDeclaration {
  /** Fingerprints listed on its `family` line (upper-case hex, without `$`); nicknames are ignored. */
  members: string[];
  /** Family ids listed on its `family-ids` line (tor 0.4.9's family keys). */
  ids: string[];
}

export function parseFamilyDeclaration(microdescriptor: string): FamilyDeclaration {
  const members: string[] = [];
  const ids: string[] = [];
  for (const line of microdescriptor.split('\n')) {
    const [keyword, ...rest] = line.trim().split(/\s+/);
    if (keyword === 'family') {
      for (const item of rest) {
        const fp = /^\$([0-9A-Fa-f]{40})(?:[=~].*)?$/.exec(item)?.[1];
        if (fp) members.push(fp.toUpperCase());
      }
    } else if (keyword === 'family-ids') {
      ids.push(...rest.filter((id) => id !== ''));
    }
  }
  return { members, ids };
}
