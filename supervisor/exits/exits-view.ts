import type { ExitBanView, ExitCountrySupply, ExitEgressView, ExitsView } from '../../shared/api/views.js';
import { relayFingerprint } from '../../shared/api/relay-fingerprint.js';
import { ExitpoolError } from '../../shared/errors/catalogue.js';
import { addressFieldsOf, type ExitAssignments } from './exit-assignments.js';
import type { ExitBan } from './exit-bans.js';

/** GET /api/exits: the catalog with assignments and bans; an empty, non-assigning view when PIN_EXIT_RELAY is off. */
export function exitsViewOf(
  exits: ExitAssignments | undefined,
  instanceIds: readonly number[],
  now: number,
  fleet: { node: string; nodes: string[] } | null = null,
): ExitsView {
  if (!exits) {
    return { distinct_by: 'relay', assigning: false, updated_at: null, eligible: 0, capacity: 0, in_use: 0, shortages: [], countries: [], exits: [], bans: [], down: [], egress: { probing: false, exit_list: false, probes: 0, failed: 0, probes_last_hour: 0, mean_ms: 0, max_ms: 0 }, fleet };
  }
  const bans = exits.bans.list(now);
  // An exit's `banned` is its ban for everyone; per-site bans are listed under `bans` only.
  const banOf = new Map(bans.filter((b) => b.domain === '').map((b) => [b.fingerprint, b]));
  const shortages = instanceIds.flatMap((id) => {
    const reason = exits.shortageOf(id);
    return reason === '' ? [] : [{ instance: id, reason }];
  });
  return {
    distinct_by: exits.unit,
    assigning: true,
    updated_at: exits.catalog.updatedAt > 0 ? new Date(exits.catalog.updatedAt).toISOString() : null,
    eligible: exits.eligibleCount(),
    capacity: exits.distinctCapacity(),
    in_use: exits.assignedCount(),
    shortages,
    countries: countrySupply(exits, bans),
    exits: exits.catalog
      .all()
      .map((e) => {
        const ban = banOf.get(e.fingerprint) ?? bans.find((b) => b.domain === '' && (b.address === e.address || b.seen?.includes(e.address)));
        const { fingerprint, nickname, address, country, bandwidth, block, family } = e;
        return {
          fingerprint,
          nickname,
          address,
          country,
          bandwidth,
          block,
          family,
          ...addressFieldsOf(e),
          instances: exits.assignedInstances(e.fingerprint),
          banned: ban ? banViewOf(ban) : null,
          down: exits.downViewOf(e.fingerprint),
          held_by: exits.holderOf(e.fingerprint) ?? null,
        };
      })
      .sort((a, b) => b.instances.length - a.instances.length || a.nickname.localeCompare(b.nickname)),
    bans: bans.map(banViewOf),
    down: exits.downViews(),
    egress: egressViewOf(exits),
    fleet,
  };
}

/** Exits per country: in the catalog, eligible (not banned for everyone, not down), and assigned to an instance. */
function countrySupply(exits: ExitAssignments, bans: readonly ExitBan[]): ExitCountrySupply[] {
  const banned = new Set(bans.filter((b) => b.domain === '').flatMap((b) => [b.fingerprint, b.address, ...(b.seen ?? [])]));
  const byCountry = new Map<string, ExitCountrySupply>();
  for (const e of exits.catalog.all()) {
    const country = e.country || '??';
    const row = byCountry.get(country) ?? { country, exits: 0, eligible: 0, in_use: 0 };
    row.exits += 1;
    if (!banned.has(e.fingerprint) && !banned.has(e.address) && !exits.isDown(e.fingerprint)) row.eligible += 1;
    if (exits.assignedInstances(e.fingerprint).length > 0) row.in_use += 1;
    byCountry.set(country, row);
  }
  return [...byCountry.values()].sort((a, b) => a.country.localeCompare(b.country));
}

function egressViewOf(exits: ExitAssignments): ExitEgressView {
  const s = exits.egressStats();
  return { probing: s.probing, exit_list: s.exitList, probes: s.probes, failed: s.failed, probes_last_hour: s.lastHour, mean_ms: s.meanMs, max_ms: s.maxMs };
}

function banViewOf(b: ExitBan): ExitBanView {
  return {
    fingerprint: b.fingerprint,
    address: b.address,
    seen_addresses: [...(b.seen ?? [])],
    nickname: b.nickname,
    domain: b.domain,
    cause: b.cause,
    reason: b.reason,
    since: new Date(b.since).toISOString(),
    until: new Date(b.until).toISOString(),
  };
}

/** DELETE /api/exits/{fingerprint}/ban. The fingerprint is checked here too: the supervisor trusts no worker's input. */
export function liftBan(exits: ExitAssignments | undefined, fingerprint: string): null {
  const fp = relayFingerprint(fingerprint);
  if (!fp) throw new ExitpoolError('EXITPOOL_INVALID_REQUEST', 'fingerprint must be 40 hexadecimal digits');
  if (!exits || !exits.liftBan(fp)) throw new ExitpoolError('EXITPOOL_NO_SUCH_BAN', `exit ${fp} is not banned`);
  return null;
}
