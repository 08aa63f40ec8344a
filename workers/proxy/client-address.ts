import type net from 'node:net';
import { clientIpOf } from '../../shared/net/client-ip.js';
import type { RouteRequest } from './proxy-types.js';

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
