/**
 * The TCP side shared by the proxy listeners: one net.Server plus the set of live connections
 * it owns, so that close() stops accepting and tears down every connection it started.
 */
import net from 'node:net';
import type { Logger } from '../../shared/logger.js';
import type { ConnectionBudget } from './connection-budget.js';

export interface OwnedConnection {
  /** Begins reading from the socket; called once the connection is registered. */
  start(): void;
  /** Tears the connection down now (end of the shutdown grace); must be idempotent. */
  destroy(): void;
  /**
   * Shutdown has begun: a connection with nothing in flight (idle keep-alive, a handshake not yet
   * at its request) closes now; one carrying a request or tunnel finishes it, then closes.
   */
  shutdown(): void;
}

/**
 * What a connection tells the listener that owns it: that it proved a credential (from then on
 * the worker's budget never evicts it), and that it ended. Each is idempotent.
 */
export interface ConnectionLifecycle {
  authenticated(connection: OwnedConnection): void;
  /** The connection is over; idempotent, so every way a connection ends may call it. */
  release(connection: OwnedConnection): void;
}

/** How a listener turns away a connection over its worker's budget (its protocol's clearest refusal). */
export type OverBudgetRefusal = (socket: net.Socket) => void;

export interface ListenerLimits {
  /** Shared by the worker's listeners; absent: no bound (component tests). */
  budget?: ConnectionBudget | undefined;
  /** Name used in the refusal log line. */
  listener: string;
  refuse: OverBudgetRefusal;
}

export class ListeningServer {
  readonly server: net.Server;
  private readonly live = new Set<OwnedConnection>();
  /** Set while close() waits for the last connection to end. */
  private onEmpty: (() => void) | null = null;

  constructor(
    log: Logger,
    private readonly accept: (socket: net.Socket, lifecycle: ConnectionLifecycle) => OwnedConnection,
    private readonly limits?: ListenerLimits,
  ) {
    // allowHalfOpen: a client's FIN must reach the destination without closing the other direction.
    this.server = net.createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.acceptConnection(socket));
    // Accept failures (EMFILE and the like) must not crash the worker; the listener keeps going.
    this.server.on('error', (error: NodeJS.ErrnoException) => {
      if (this.server.listening) log.error('proxy listener error', { code: error.code, error: error.message });
    });
  }

  /** Takes over an accepted socket (also usable with sockets obtained elsewhere, e.g. handed over by a parent). */
  acceptConnection(socket: net.Socket): void {
    const limits = this.limits;
    if (limits?.budget && !limits.budget.tryAcquire(limits.listener)) {
      socket.on('error', () => undefined);
      limits.refuse(socket);
      return;
    }
    const connection = this.accept(socket, this.lifecycle);
    this.live.add(connection);
    limits?.budget?.holdUnauthenticated(connection, limits.listener);
    connection.start();
  }

  get connectionCount(): number {
    return this.live.size;
  }

  listen(port: number, host = '127.0.0.1'): Promise<net.AddressInfo> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error): void => reject(error);
      this.server.once('error', onError);
      this.server.listen(port, host, () => {
        this.server.removeListener('error', onError);
        resolve(this.server.address() as net.AddressInfo);
      });
    });
  }

  /**
   * Stops accepting, lets open requests and tunnels finish for up to `graceMs`, then destroys what
   * is left. With no grace every live connection is destroyed at once.
   */
  async close(graceMs = 0): Promise<void> {
    const closed = new Promise<void>((resolve) => {
      if (!this.server.listening) {
        resolve();
        return;
      }
      this.server.close(() => resolve());
    });
    if (graceMs > 0) {
      for (const connection of [...this.live]) connection.shutdown();
      await this.drained(graceMs);
    }
    for (const connection of [...this.live]) connection.destroy();
    await closed;
  }

  /** Resolves when no connection is left, or after `graceMs`. */
  private drained(graceMs: number): Promise<void> {
    if (this.live.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.onEmpty = null;
        resolve();
      };
      const timer = setTimeout(done, graceMs);
      this.onEmpty = done;
    });
  }

  private readonly lifecycle: ConnectionLifecycle = {
    authenticated: (connection) => this.limits?.budget?.authenticated(connection),
    // Every way a connection ends may call this; only the first gives its budget back.
    release: (connection) => {
      if (!this.live.delete(connection)) return;
      this.limits?.budget?.release(connection);
      if (this.live.size === 0) this.onEmpty?.();
    },
  };
}
