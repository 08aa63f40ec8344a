/**
 * The `domain` a failure report names: the host of the site that showed the block, as the API
 * takes it (`shared/health/failure-kind.ts`, `normaliseDomain`): an A-label host name or an IPv4
 * address, lower-case, without a trailing dot. Hosts the API would refuse with 400 (an IPv6
 * literal, a name with an underscore, anything over 253 characters) are reported without a
 * domain instead, so the report still counts.
 */
const MAX_DOMAIN_LENGTH = 253;
const DOMAIN_LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

export function reportDomain(url: string | URL | undefined): string | undefined {
  if (url === undefined) return undefined;
  let host: string;
  try {
    // WHATWG URL parsing turns an IDN into its A-labels (xn--…).
    host = new URL(url).hostname;
  } catch {
    return undefined;
  }
  const d = host.toLowerCase().replace(/\.$/, '');
  if (d === '' || d.length > MAX_DOMAIN_LENGTH || d.startsWith('[')) return undefined;
  return d.split('.').every((label) => DOMAIN_LABEL.test(label)) ? d : undefined;
}
