import { EventEmitter } from 'node:events';
import { TorInstance } from '../tor/instance.js';
import type { TorInstanceOptions } from '../tor/instance-types.js';
import type { ExitState, PoolInstance, PoolInstanceEvents } from './pool-instance.js';

/**
 * The pool's view of one supervised tor (supervisor/tor/instance.ts): cached reads, and the
 * lifecycle events the pool and health need ('ready', 'unready', 'rotated').
 */
export class TorPoolInstance extends EventEmitter<PoolInstanceEvents> implements PoolInstance {
  readonly id: number;
  readonly socksHost = '127.0.0.1';
  readonly socksPort: number;
  readonly socksPath: string | null;
  readonly tor: TorInstance;

  constructor(options: TorInstanceOptions) {
    super();
    this.id = options.index;
    this.tor = new TorInstance(options);
    const socks = this.tor.socksEndpoint;
    this.socksPath = socks.kind === 'unix' ? socks.path : null;
    this.socksPort = socks.kind === 'tcp' ? socks.port : (options.socksPort ?? 0);
    this.tor.on('ready', () => this.emit('ready'));
    this.tor.on('state', ({ lifecycle, previous }) => {
      if (previous === 'ready' && lifecycle !== 'ready') this.emit('unready');
    });
    this.tor.on('exit-changed', () => this.emit('exit'));
    this.tor.on('unresponsive', ({ silentForMs }) => this.emit('unresponsive', silentForMs));
    this.tor.on('responsive', () => this.emit('responsive'));
  }

  pid(): number | null {
    return this.tor.pid ?? null;
  }
  running(): boolean {
    return this.tor.running;
  }
  ready(): boolean {
    return this.tor.ready;
  }
  bootstrap(): number {
    return this.tor.bootstrap;
  }
  uptimeSecs(): number {
    return this.tor.uptimeSecs;
  }
  rotating(): boolean {
    return this.tor.rotating;
  }
  responsive(): boolean {
    return this.tor.responsive;
  }
  exit(): ExitState {
    return this.tor.exit;
  }
  start(): Promise<void> {
    return this.tor.start();
  }
  stop(): Promise<void> {
    return this.tor.stop();
  }
  async rotate(): Promise<void> {
    const ticket = this.tor.rotate(); // throws NotBootstrappedError before bootstrap
    void ticket.done.then(() => this.emit('rotated'));
  }
  async newCircuit(): Promise<void> {
    const outcome = await this.tor.rotate().done;
    this.emit('rotated');
    if (!outcome.ok) throw new Error(`rotation ${outcome.reason}`);
  }
  restart(wipe: boolean): Promise<void> {
    return this.tor.restart({ wipe });
  }
  whenReady(timeoutMs: number): Promise<void> {
    return this.tor.whenReady(timeoutMs);
  }
}
