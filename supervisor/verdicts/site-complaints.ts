/** Captcha and blocked reports an instance remembers with their sites (for a per-site ban). */
export const MAX_COMPLAINTS = 20;

export interface Complaint {
  /** The site the report named ('' for none). */
  domain: string;
  at: number;
}

/**
 * The one site every captcha and blocked report since `since` named, or '' (none named one, or
 * several sites complained: the exit is then burnt for everyone).
 */
export function soleComplainingDomain(complaints: readonly Complaint[], since: number): string {
  const domains = new Set(complaints.filter((c) => c.at >= since).map((c) => c.domain));
  const [only] = domains;
  return domains.size === 1 && only !== undefined ? only : '';
}

/** Recent scored captcha and blocked reports per instance, newest last (MAX_COMPLAINTS each). */
export class SiteComplaints {
  private readonly byInstance = new Map<number, Complaint[]>();

  add(instance: number, complaint: Complaint): void {
    this.byInstance.set(instance, [...(this.byInstance.get(instance) ?? []), complaint].slice(-MAX_COMPLAINTS));
  }

  /** The one site every complaint about `instance` since `since` named, or ''. */
  soleDomain(instance: number, since: number): string {
    return soleComplainingDomain(this.byInstance.get(instance) ?? [], since);
  }

  /** The complaints were answered (a ban, a release) or the instance left. */
  clear(instance: number): void {
    this.byInstance.delete(instance);
  }
}
