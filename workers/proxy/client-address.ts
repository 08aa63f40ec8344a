/**
 * The client address as the pool should see it. A dual-stack listener reports IPv4 clients as
 * "::ffff:a.b.c.d"; DEFAULT_SESSION=ip must pin them the same way as on an IPv4 listener.
 */
export function clientIpOf(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined) return 'unknown';
  if (remoteAddress.startsWith('::ffff:') && remoteAddress.includes('.')) return remoteAddress.slice(7);
  return remoteAddress;
}
