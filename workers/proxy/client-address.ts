import type net from 'node:net';
import { clientIpOf } from '../../shared/net/client-ip.js';
import type { ListenerKind, RouteRequest } from './proxy-types.js';

/**
 * A route request whose `clientIp` is read from the socket only when the route needs it
 * (DEFAULT_SESSION=ip, or a route asked of the supervisor): the first read of remoteAddress is a
 * getpeername system call, which a named session's leased connections never need. Node keeps the
 * address once read, so later reads agree even after the client left. A class rather than an
 * object literal with a getter: one is made per connection, and a literal with a getter and
 * spread fields is built property by property.
 */
class SocketRouteRequest implements RouteRequest {
  readonly sessionKey: string | null;
  readonly listener: ListenerKind;
  readonly instanceId?: number;

  readonly #socket: net.Socket;

  constructor(socket: net.Socket, sessionKey: string | null, listener: ListenerKind, instanceId: number | undefined) {
    this.#socket = socket;
    this.sessionKey = sessionKey;
    this.listener = listener;
    if (instanceId !== undefined) this.instanceId = instanceId;
  }

  get clientIp(): string {
    return clientIpOf(this.#socket.remoteAddress);
  }
}

/** The route request of a connection on `socket`; `instanceId` for a session port. */
export function routeRequestFrom(socket: net.Socket, sessionKey: string | null, listener: ListenerKind, instanceId?: number): RouteRequest {
  return new SocketRouteRequest(socket, sessionKey, listener, instanceId);
}
