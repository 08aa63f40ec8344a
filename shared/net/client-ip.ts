/**
 * The client address as the pool should see it (both workers read it: the proxies for
 * DEFAULT_SESSION=ip, the API for sign-in limits and AUTH_DISABLED reporters). A dual-stack
 * listener reports IPv4 clients as "::ffff:a.b.c.d"; they must count the same way as on an IPv4
 * listener.
 */
export function clientIpOf(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined) return 'unknown';
  if (remoteAddress.startsWith('::ffff:') && remoteAddress.includes('.')) return remoteAddress.slice(7);
  return remoteAddress;
}
