/** One router entry of a (microdescriptor or full) consensus. */
export interface ConsensusRouter {
  readonly nickname: string;
  /** RSA identity fingerprint, hex upper case. */
  readonly fingerprint: string;
  readonly address: string;
  readonly orPort: number;
  readonly flags: ReadonlySet<string>;
  /** The `w Bandwidth=` weight (the measured value when a bandwidth file is in use). */
  readonly bandwidth: number | undefined;
  /** The `m` line of a microdescriptor consensus: base64 digest of the router's microdescriptor. */
  readonly microdescDigest: string | undefined;
}

export interface ParsedConsensus {
  readonly validAfter: Date | undefined;
  readonly routers: readonly ConsensusRouter[];
}

function identityToHex(base64: string): string {
  return Buffer.from(base64, 'base64').toString('hex').toUpperCase();
}

/**
 * Reads the router status entries of a consensus (dir-spec: `r`, `s`, `w` lines). The `r` line
 * has 8 fields in a microdescriptor consensus and 9 (with the descriptor digest) in a full one.
 */
export function parseConsensus(text: string): ParsedConsensus {
  let validAfter: Date | undefined;
  const routers: ConsensusRouter[] = [];
  type Draft = {
    nickname: string;
    fingerprint: string;
    address: string;
    orPort: number;
    flags: Set<string>;
    bandwidth: number | undefined;
    microdescDigest: string | undefined;
  };
  let current: Draft | undefined;
  const flush = (): void => {
    if (current) routers.push(current);
    current = undefined;
  };
  for (const line of text.split('\n')) {
    const fields = line.trim().split(' ');
    switch (fields[0]) {
      case 'valid-after':
        validAfter = new Date(`${fields[1] ?? ''}T${fields[2] ?? ''}Z`);
        break;
      case 'r': {
        flush();
        const full = fields.length >= 9;
        const address = fields[full ? 6 : 5] ?? '';
        const orPort = Number(fields[full ? 7 : 6]);
        current = { nickname: fields[1] ?? '', fingerprint: identityToHex(fields[2] ?? ''), address, orPort, flags: new Set(), bandwidth: undefined, microdescDigest: undefined };
        break;
      }
      case 's':
        if (current) current.flags = new Set(fields.slice(1));
        break;
      case 'm':
        if (current && fields[1]) current.microdescDigest = fields[1];
        break;
      case 'w':
        if (current) {
          const bw = fields.find((f) => f.startsWith('Bandwidth='));
          if (bw) current.bandwidth = Number(bw.slice('Bandwidth='.length));
        }
        break;
      case 'directory-footer':
        flush();
        break;
      default:
        break;
    }
  }
  flush();
  return { validAfter, routers };
}

/** Which relays must be listed, and with which flags, before clients can use the network. */
export interface UsabilityExpectation {
  readonly required: ReadonlyArray<{ readonly nickname: string; readonly fingerprint: string; readonly flags: readonly string[] }>;
}

/** Reasons the consensus is not yet usable; empty when it is. */
export function usabilityProblems(consensus: ParsedConsensus, expectation: UsabilityExpectation): string[] {
  const byFingerprint = new Map(consensus.routers.map((r) => [r.fingerprint, r]));
  const problems: string[] = [];
  for (const want of expectation.required) {
    const router = byFingerprint.get(want.fingerprint);
    if (!router) {
      problems.push(`${want.nickname} not listed`);
      continue;
    }
    const missing = want.flags.filter((flag) => !router.flags.has(flag));
    if (missing.length > 0) problems.push(`${want.nickname} lacks ${missing.join(',')}`);
  }
  return problems;
}

/** Number of microdescriptors in a `/tor/micro/d/…` answer (each begins with its onion-key line). */
export function countMicrodescriptors(body: string): number {
  return body.split('\n').filter((line) => line === 'onion-key').length;
}
