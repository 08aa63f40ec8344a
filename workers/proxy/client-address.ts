import type net from 'node:net';
import type { RouteRequest } from './proxy-types.js';

/**
 * The client address as the pool should see it. A dual-stack listener reports IPv4 clients as
 * "::ffff:a.b.c.d"; DEFAULT_SESSION=ip must pin them the same way as on an IPv4 listener.
 */
export function clientIpOf(remoteAddress: string | undefined): string {
  if (remoteAddress === undefined) return 'unknown';
  if (remoteAddress.startsWith('::ffff:') && remoteAddress.includes('.')) return remoteAddress.slice(7);
  return remoteAddress;
}

/**
 * A route request whose `clientIp` is read from the socket only when the route needs it
 * (DEFAULT_SESSION=ip, or a route asked of the supervisor): the first read of remoteAddress is a
 * getpeername system call, which a named session's leased connections never need. Node keeps the
 * address once read, so later reads agree even after the client left.
 */
export function routeRequestFrom(socket: net.Socket, fields: Omit<RouteRequest, 'clientIp'>): RouteRequest {
  return {
    ...fields,
    get clientIp() {
      return clientIpOf(socket.remoteAddress);
    },
  };
}
