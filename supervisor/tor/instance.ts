import { EventEmitter } from 'node:events';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { childLogger, type Logger } from '../../shared/logger.js';
import { Backoff } from './backoff.js';
import { TorControlClient } from './control-client.js';
import { parseBootstrapPhase, parseCircuitLine, parseStreamLine, type TorEvent } from './control-events.js';
import { DelayScope } from './delay-scope.js';
import { ControlCommandError, InstanceLayoutError, NotBootstrappedError } from './errors.js';
import { ExitTracker } from './exit-tracker.js';
import type {
  BootstrapProgress,
  ExitState,
  InstanceLifecycle,
  InstanceSnapshot,
  NewnymOutcome,
  RotationFailure,
  RotationOutcome,
  RotationTicket,
  TorInstanceEvents,
  TorInstanceOptions,
} from './instance-types.js';
import { NewnymCooldown } from './newnym-cooldown.js';
import { assertPrivateNetworkTorrc } from './private-network-guard.js';
import { RelayDirectory } from './relay-directory.js';
import { logLineSeverity, parseBootstrapLogLine } from './tor-log-line.js';
import { TorProcess, type ProcessExit } from './tor-process.js';
import { MAX_UNIX_SOCKET_PATH_BYTES, renderTorrc, type ControlEndpoint, type SocksEndpoint } from './torrc.js';

export type * from './instance-types.js';

/**
 * One supervised tor: spawn, control connection, bootstrap tracking, stall and crash recovery,
 * exit knowledge, rotation and exit pinning. Everything the pool reads (snapshot(), getters) is
 * cached state: nothing on a request path waits on the control port.
 */

const SUBSCRIBED_EVENTS = ['STATUS_CLIENT', 'CIRC', 'STREAM'] as const;
const DEFAULTS = {
  maxCircuitDirtinessSecs: 3600,
  stallTimeoutMs: 120_000,
  rotationTimeoutMs: 60_000,
  stopGraceMs: 10_000,
  restartBackoffInitialMs: 1_000,
  restartBackoffMaxMs: 60_000,
  commandTimeoutMs: 10_000,
  livenessIntervalMs: 2_000,
  livenessTimeoutMs: 3_000,
  unresponsiveRestartMs: 60_000,
};
/**
 * Missed liveness probes in a row before a ready tor counts as unresponsive: one slow answer on a
 * loaded machine is not a frozen tor.
 */
export const LIVENESS_MISSES = 2;
/** Retry interval for connecting to a fresh tor's control socket (it appears within ms of start). */
const CONTROL_CONNECT_RETRY_MS = 100;
const CONTROL_CONNECT_RETRY_MAX_MS = 1_000;
const PIN_RETRY_MS = 5_000;

const EMPTY_EXIT: ExitState = {
  exitIp: '',
  exitCountry: '',
  exitNickname: '',
  exitFingerprint: '',
  exitConfirmed: false,
  retiredExitIp: '',
  pinnedExit: '',
  rotating: false,
};

interface ActiveRotation {
  id: number;
  ticket: RotationTicket;
  startedAt: number;
  sent: boolean;
  finished: boolean;
  timer: NodeJS.Timeout | undefined;
  resolveSent: (outcome: NewnymOutcome) => void;
  resolveDone: (outcome: RotationOutcome) => void;
}

/** Node-selection options as configured (torrc incl. extra lines), restored when a pin is released. */
interface NodeBaseline {
  exitNodes: string | undefined;
  excludeExitNodes: string | undefined;
  strictNodes: string | undefined;
}

export class TorInstance extends EventEmitter<TorInstanceEvents> {
  readonly index: number;
  readonly dataDirectory: string;
  readonly torrcPath: string;
  readonly cookieFile: string;
  readonly controlEndpoint: ControlEndpoint;
  /** `unix:<path>` for the Unix-socket SocksPort (the normal case), else `127.0.0.1:<port>`. */
  readonly socksAddr: string;
  readonly socksEndpoint: SocksEndpoint;
  private readonly log: Logger;
  private readonly opts: TorInstanceOptions;

  private lifecycleState: InstanceLifecycle = 'idle';
  /** Identifies the current tor process; callbacks of an older process are ignored. */
  private generation = 0;
  private proc: TorProcess | undefined;
  private client: TorControlClient | undefined;
  private connectingClient: TorControlClient | undefined;
  private directory: RelayDirectory;
  private readonly tracker = new ExitTracker();
  private readonly cooldown: NewnymCooldown;
  private readonly delays = new DelayScope();
  private readonly crashBackoff: Backoff;

  private bootstrapPercent = 0;
  private readyFlag = false;
  /** false while a ready tor leaves its liveness probes unanswered. */
  private responsiveFlag = true;
  private stallTimer: NodeJS.Timeout | undefined;
  private consecutiveStalls = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private restartCount = 0;

  private rotation: ActiveRotation | undefined;
  private rotationIds = 0;
  private pinnedFingerprint: string | undefined;
  private pinInFlight = false;
  private pinRetryAt = 0;
  private baseline: NodeBaseline | undefined;
  private lastExit: ExitState = EMPTY_EXIT;
  private opChain: Promise<unknown> = Promise.resolve();

  constructor(options: TorInstanceOptions) {
    super();
    this.opts = options;
    this.index = options.index;
    this.log = options.log ?? childLogger({ instance: options.index, component: 'tor' });
    this.dataDirectory = join(resolve(options.dataDir), 'tor', String(options.index));
    this.torrcPath = join(this.dataDirectory, 'torrc');
    this.cookieFile = join(this.dataDirectory, 'control_auth_cookie');
    const socketPath = join(this.dataDirectory, 'control.sock');
    if (Buffer.byteLength(socketPath) <= MAX_UNIX_SOCKET_PATH_BYTES) {
      this.controlEndpoint = { kind: 'unix', path: socketPath };
    } else if (options.controlPort !== undefined) {
      this.controlEndpoint = { kind: 'tcp', port: options.controlPort };
    } else {
      throw new InstanceLayoutError(options.index, `control socket path ${socketPath} is too long and no controlPort was given`);
    }
    const socksSocket = join(this.dataDirectory, 'socks.sock');
    if (Buffer.byteLength(socksSocket) <= MAX_UNIX_SOCKET_PATH_BYTES) {
      this.socksEndpoint = { kind: 'unix', path: socksSocket };
    } else if (options.socksPort !== undefined) {
      this.socksEndpoint = { kind: 'tcp', port: options.socksPort };
      this.log.warn('DATA_DIR is too deep for a Unix-socket SocksPort: using TCP on loopback, which any local user can reach', { path: socksSocket, port: options.socksPort });
    } else {
      throw new InstanceLayoutError(options.index, `SocksPort socket path ${socksSocket} is too long and no socksPort was given`);
    }
    this.socksAddr = this.socksEndpoint.kind === 'unix' ? `unix:${this.socksEndpoint.path}` : `127.0.0.1:${this.socksEndpoint.port}`;
    this.cooldown = new NewnymCooldown(options.newnymCooldownMs);
    this.crashBackoff = new Backoff(
      options.restartBackoffInitialMs ?? DEFAULTS.restartBackoffInitialMs,
      options.restartBackoffMaxMs ?? DEFAULTS.restartBackoffMaxMs,
    );
    this.directory = this.newDirectory();
  }

  // ---- read side (cached; safe on the request path) ----

  get lifecycle(): InstanceLifecycle {
    return this.lifecycleState;
  }

  get pid(): number | undefined {
    return this.proc?.running ? this.proc.pid : undefined;
  }

  get running(): boolean {
    return this.proc?.running ?? false;
  }

  get ready(): boolean {
    return this.readyFlag;
  }

  get bootstrap(): number {
    return this.bootstrapPercent;
  }

  get uptimeSecs(): number {
    const started = this.proc?.running ? this.proc.startedAt : undefined;
    return started === undefined ? 0 : Math.floor((Date.now() - started) / 1000);
  }

  get rotating(): boolean {
    return this.rotation !== undefined;
  }

  /** false while the tor is ready but does not answer its control port (see probeLiveness). */
  get responsive(): boolean {
    return this.responsiveFlag;
  }

  get exit(): ExitState {
    return this.lastExit;
  }

  get restarts(): number {
    return this.restartCount;
  }

  snapshot(): InstanceSnapshot {
    return {
      id: this.index,
      lifecycle: this.lifecycleState,
      running: this.running,
      ready: this.readyFlag,
      bootstrap: this.bootstrapPercent,
      pid: this.pid ?? 0,
      uptimeSecs: this.uptimeSecs,
      socksAddr: this.socksAddr,
      newnymCooldownMs: this.cooldown.msUntilAllowed(Date.now()),
      restarts: this.restartCount,
      ...this.lastExit,
    };
  }

  // ---- lifecycle ----

  /** Spawns tor; resolves once the process is spawned (bootstrap continues in the background). */
  start(): Promise<void> {
    return this.enqueue(async () => {
      if (this.lifecycleState !== 'idle' && this.lifecycleState !== 'stopped') return;
      this.consecutiveStalls = 0;
      this.crashBackoff.reset();
      await this.launch();
    });
  }

  /**
   * Stops tor and waits for the process to exit (SIGTERM, grace, SIGKILL). Pending rotations end
   * with reason 'stopped'. Idempotent.
   */
  stop(): Promise<void> {
    return this.enqueue(async () => {
      if (this.lifecycleState === 'stopped' || this.lifecycleState === 'idle') return;
      this.clearRestartTimer();
      this.setLifecycle('stopping');
      await this.teardown('stopped');
      this.setLifecycle('stopped');
    });
  }

  /**
   * Restarts tor. wipe=true waits for the old process to exit, deletes the DataDirectory and
   * starts with a new identity (guards, state, consensus cache, pin all gone); wipe=false keeps
   * them and bootstraps faster. Resolves once the new process is spawned.
   */
  restart(options: { wipe: boolean }): Promise<void> {
    return this.enqueue(async () => {
      this.consecutiveStalls = 0;
      await this.restartNow(options.wipe, 'restart requested');
    });
  }

  /** Resolves when ready; rejects after timeoutMs or if the instance is stopped meanwhile. */
  whenReady(timeoutMs: number): Promise<void> {
    if (this.readyFlag) return Promise.resolve();
    return new Promise<void>((resolvePromise, reject) => {
      const cleanup = (): void => {
        clearTimeout(timer);
        this.off('ready', onReady);
        this.off('state', onState);
      };
      const onReady = (): void => {
        cleanup();
        resolvePromise();
      };
      const onState = ({ lifecycle }: { lifecycle: InstanceLifecycle }): void => {
        if (lifecycle !== 'stopped') return;
        cleanup();
        reject(new Error(`instance ${this.index} stopped before it was ready`));
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`instance ${this.index} not ready within ${timeoutMs} ms (bootstrap ${this.bootstrapPercent}%)`));
      }, timeoutMs);
      this.on('ready', onReady);
      this.on('state', onState);
    });
  }

  // ---- rotation ----

  /**
   * New circuits and a new exit. Throws NotBootstrappedError before bootstrap completes. Takes
   * effect at once for the pool: `rotating` is true, exitIp empty and retiredExitIp set until a
   * new exit is known. NEWNYM itself waits out tor's cooldown in the background; the ticket's
   * promises report when it was sent and when the new exit is known.
   */
  rotate(): RotationTicket {
    if (!this.readyFlag || !this.client) throw new NotBootstrappedError(this.index, this.bootstrapPercent);
    if (this.rotation) return this.rotation.ticket;
    let resolveSent!: (outcome: NewnymOutcome) => void;
    let resolveDone!: (outcome: RotationOutcome) => void;
    const ticket: RotationTicket = {
      id: ++this.rotationIds,
      newnymSent: new Promise<NewnymOutcome>((r) => (resolveSent = r)),
      done: new Promise<RotationOutcome>((r) => (resolveDone = r)),
    };
    const rotation: ActiveRotation = {
      id: ticket.id,
      ticket,
      startedAt: Date.now(),
      sent: false,
      finished: false,
      timer: undefined,
      resolveSent,
      resolveDone,
    };
    this.rotation = rotation;
    this.tracker.beginRotation();
    this.log.info('rotation started', { rotation: rotation.id, cooldownMs: this.cooldown.msUntilAllowed(Date.now()) });
    this.refreshExit();
    void this.performRotation(rotation, this.generation);
    return ticket;
  }

  /**
   * Diagnostic GETINFO passthrough (entry-guards, circuit-status, …). Never for the request
   * path. Rejects when no control connection exists.
   */
  async getInfo(keys: readonly string[]): Promise<Map<string, string>> {
    const client = this.client;
    if (!client) throw new NotBootstrappedError(this.index, this.bootstrapPercent);
    return client.getInfo(keys);
  }

  // ---- internals: process lifecycle ----

  private enqueue<T>(operation: () => Promise<T>): Promise<T> {
    const run = this.opChain.then(operation, operation);
    this.opChain = run.catch(() => undefined);
    return run;
  }

  private setLifecycle(next: InstanceLifecycle): void {
    const previous = this.lifecycleState;
    if (previous === next) return;
    this.lifecycleState = next;
    this.log.debug('lifecycle', { lifecycle: next, previous });
    this.emit('state', { lifecycle: next, previous });
  }

  private newDirectory(): RelayDirectory {
    return new RelayDirectory((keys) => {
      const client = this.client;
      if (!client) return Promise.reject(new Error('no control connection'));
      return client.getInfo(keys);
    });
  }

  private async launch(): Promise<void> {
    const generation = ++this.generation;
    try {
      await mkdir(this.dataDirectory, { recursive: true, mode: 0o700 });
      // tor refuses a DataDirectory (and a control socket directory) readable by others.
      await chmod(this.dataDirectory, 0o700);
      if (this.controlEndpoint.kind === 'unix') await rm(this.controlEndpoint.path, { force: true });
      if (this.socksEndpoint.kind === 'unix') await rm(this.socksEndpoint.path, { force: true });
      const torrc = renderTorrc({
        dataDirectory: this.dataDirectory,
        socks: this.socksEndpoint,
        control: this.controlEndpoint,
        cookieAuthFile: this.cookieFile,
        owningControllerPid: this.opts.supervisorPid ?? process.pid,
        conflux: this.opts.conflux ?? false,
        maxCircuitDirtinessSecs: this.opts.maxCircuitDirtinessSecs ?? DEFAULTS.maxCircuitDirtinessSecs,
        ...(this.opts.exitNodes ? { exitNodes: this.opts.exitNodes } : {}),
        ...(this.opts.strictNodes !== undefined ? { strictNodes: this.opts.strictNodes } : {}),
        ...(this.opts.extraTorrcLines ? { extraLines: this.opts.extraTorrcLines } : {}),
      });
      if (!this.opts.allowPublicNetwork) assertPrivateNetworkTorrc(torrc);
      await writeFile(this.torrcPath, torrc, { mode: 0o600 });
    } catch (error) {
      this.setLifecycle('stopped');
      throw error;
    }
    this.tracker.reset();
    this.directory.clear();
    this.directory = this.newDirectory();
    this.cooldown.reset();
    this.baseline = undefined;
    this.bootstrapPercent = 0;
    this.readyFlag = false;

    const proc = new TorProcess({
      torBinary: this.opts.torBinary ?? 'tor',
      torrcPath: this.torrcPath,
      ...(this.opts.defaultsTorrc ? { defaultsTorrc: this.opts.defaultsTorrc } : {}),
      ...(this.opts.env ? { env: this.opts.env } : {}),
    });
    this.proc = proc;
    proc.on('line', ({ text }) => this.onTorLine(generation, text));
    proc.on('exit', (exit) => this.onProcessExit(generation, exit));
    proc.start();
    this.log.info('tor started', { pid: proc.pid, dataDirectory: this.dataDirectory });
    this.setLifecycle('starting');
    this.armStallTimer(generation);
    this.refreshExit();
    void this.connectControl(generation);
  }

  /**
   * Forgets the current process: its callbacks are ignored from here on, state derived from it is
   * cleared and a running rotation ends with `reason`. Returns the control clients to close.
   */
  private detach(reason: RotationFailure): TorControlClient[] {
    this.generation++;
    this.clearStallTimer();
    this.delays.cancelAll();
    const clients = [this.client, this.connectingClient].filter((c): c is TorControlClient => c !== undefined);
    this.client = undefined;
    this.connectingClient = undefined;
    this.readyFlag = false;
    this.bootstrapPercent = 0;
    this.tracker.reset();
    if (this.rotation) this.finishRotation(this.rotation, { ok: false, reason });
    // A new process starts unsuspected. No 'responsive' event: this one never answered again,
    // and the instance is out of service anyway until the new one is ready.
    this.responsiveFlag = true;
    return clients;
  }

  /** Stops the current process and waits for its exit. */
  private async teardown(reason: RotationFailure): Promise<void> {
    const clients = this.detach(reason);
    await Promise.all(clients.map((c) => c.close()));
    const proc = this.proc;
    if (proc) {
      const wasRunning = proc.running;
      const exit = await proc.stop(this.opts.stopGraceMs ?? DEFAULTS.stopGraceMs);
      if (wasRunning) this.log.info('tor stopped', { pid: proc.pid, code: exit.code, signal: exit.signal });
    }
    this.refreshExit();
  }

  private async restartNow(wipe: boolean, why: string): Promise<void> {
    if (this.lifecycleState === 'stopped' || this.lifecycleState === 'idle' || this.lifecycleState === 'stopping') {
      // Nothing runs: a restart is simply a start (after an optional wipe).
      if (wipe) await this.wipeDataDirectory();
      this.crashBackoff.reset();
      await this.launch();
      return;
    }
    this.clearRestartTimer();
    this.restartCount++;
    this.log.info('restarting tor', { wipe, reason: why });
    this.setLifecycle('restarting');
    await this.teardown('restarted');
    if (wipe) await this.wipeDataDirectory();
    await this.launch();
  }

  private async wipeDataDirectory(): Promise<void> {
    this.pinnedFingerprint = undefined;
    await rm(this.dataDirectory, { recursive: true, force: true });
  }

  private onProcessExit(generation: number, exit: ProcessExit): void {
    if (generation !== this.generation) return;
    // Unexpected: nobody asked this process to stop.
    for (const c of this.detach('died')) void c.close();
    this.refreshExit();
    const delay = this.crashBackoff.next();
    this.log.warn('tor exited unexpectedly', { code: exit.code, signal: exit.signal, spawnError: exit.spawnError, restartInMs: delay });
    this.setLifecycle('backoff');
    this.emit('died', { code: exit.code, signal: exit.signal, restartInMs: delay });
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.enqueue(async () => {
        if (this.lifecycleState !== 'backoff') return;
        this.restartCount++;
        await this.launch();
      }).catch((error: Error) => this.log.error('restart after death failed', { error: error.message }));
    }, delay);
  }

  private clearRestartTimer(): void {
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
  }

  // ---- internals: bootstrap and stalls ----

  private onTorLine(generation: number, text: string): void {
    const severity = logLineSeverity(text);
    const expected = this.opts.expectedWarnings?.some((pattern) => pattern.test(text)) ?? false;
    if ((severity === 'warn' || severity === 'err') && !expected) this.log.warn(text);
    else this.log.debug(text);
    if (generation !== this.generation) return;
    const phase = parseBootstrapLogLine(text);
    if (phase) this.onBootstrap(generation, { percent: phase.progress, ...(phase.tag ? { tag: phase.tag } : {}), ...(phase.summary ? { summary: phase.summary } : {}) });
  }

  private onBootstrap(generation: number, progress: BootstrapProgress): void {
    if (generation !== this.generation) return;
    if (progress.percent > this.bootstrapPercent) {
      this.bootstrapPercent = progress.percent;
      this.log.debug('bootstrap', { percent: progress.percent, tag: progress.tag });
      this.emit('bootstrap', progress);
      if (!this.readyFlag) this.armStallTimer(generation);
    }
    this.maybeReady(generation);
  }

  /** Ready needs both 100 % and a control connection (rotation and exits depend on it). */
  private maybeReady(generation: number): void {
    if (generation !== this.generation || this.readyFlag) return;
    if (this.bootstrapPercent < 100 || !this.client?.connected) return;
    this.readyFlag = true;
    this.clearStallTimer();
    this.consecutiveStalls = 0;
    this.crashBackoff.reset();
    this.log.info('bootstrapped', { percent: 100, pid: this.pid, secs: this.uptimeSecs });
    this.setLifecycle('ready');
    this.emit('ready');
    this.refreshExit();
    void this.probeLiveness(generation);
  }

  /**
   * While this process lives: asks tor something trivial on the control port at an interval. A
   * frozen tor (SIGSTOP, a hung main loop) still accepts TCP connections on its SocksPort, so
   * without this every request routed to it would wait out the dial deadline. Runs off the
   * request path; its waits belong to `delays`, so detach() (stop, restart, death) ends it.
   */
  private async probeLiveness(generation: number): Promise<void> {
    const intervalMs = this.opts.livenessIntervalMs ?? DEFAULTS.livenessIntervalMs;
    const timeoutMs = this.opts.livenessTimeoutMs ?? DEFAULTS.livenessTimeoutMs;
    const restartMs = this.opts.unresponsiveRestartMs ?? DEFAULTS.unresponsiveRestartMs;
    let misses = 0;
    let lastAnswerAt = Date.now();
    while (await this.delays.wait(intervalMs)) {
      if (generation !== this.generation) return;
      const client = this.client;
      let answered = false;
      if (client?.connected) {
        try {
          // Any reply, even an error status, proves the main loop runs.
          await client.request('GETINFO version', timeoutMs);
          answered = true;
        } catch {
          // Silent or disconnected: a miss. (A command timeout also resets the control connection.)
        }
      } else {
        // No control connection to ask: waiting for a reconnection is a miss too.
        await this.delays.wait(timeoutMs);
      }
      if (generation !== this.generation) return;
      if (answered) {
        misses = 0;
        lastAnswerAt = Date.now();
        if (!this.responsiveFlag) {
          this.responsiveFlag = true;
          this.log.info('tor answers its control port again; back in rotation');
          this.emit('responsive');
        }
        continue;
      }
      misses++;
      const silentForMs = Date.now() - lastAnswerAt;
      if (misses === LIVENESS_MISSES) {
        this.responsiveFlag = false;
        this.log.warn('tor does not answer its control port; out of rotation', { silentForMs, pid: this.pid });
        this.emit('unresponsive', { silentForMs });
      }
      if (!this.responsiveFlag && silentForMs >= restartMs) {
        this.log.warn('tor unresponsive for too long; restarting it', { silentForMs, unresponsiveRestartMs: restartMs });
        this.enqueue(async () => {
          if (generation !== this.generation) return;
          await this.restartNow(false, 'control port unresponsive');
        }).catch((error: Error) => this.log.error('restart of an unresponsive tor failed', { error: error.message }));
        return;
      }
    }
  }

  private armStallTimer(generation: number): void {
    this.clearStallTimer();
    const timeoutMs = this.opts.stallTimeoutMs ?? DEFAULTS.stallTimeoutMs;
    this.stallTimer = setTimeout(() => this.onStall(generation), timeoutMs);
  }

  private clearStallTimer(): void {
    clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
  }

  private onStall(generation: number): void {
    this.stallTimer = undefined;
    if (generation !== this.generation || this.readyFlag) return;
    this.consecutiveStalls++;
    // The first restart after a stall keeps state, the next ones wipe it.
    const wipe = this.consecutiveStalls >= 2;
    this.log.warn('bootstrap stalled; restarting', {
      percent: this.bootstrapPercent,
      stallTimeoutMs: this.opts.stallTimeoutMs ?? DEFAULTS.stallTimeoutMs,
      wipe,
      stalls: this.consecutiveStalls,
    });
    this.emit('stalled', { percent: this.bootstrapPercent, wipe });
    this.enqueue(async () => {
      if (generation !== this.generation) return;
      await this.restartNow(wipe, 'bootstrap stalled');
    }).catch((error: Error) => this.log.error('restart after stall failed', { error: error.message }));
  }

  // ---- internals: control connection ----

  private async connectControl(generation: number): Promise<void> {
    let retryMs = CONTROL_CONNECT_RETRY_MS;
    while (generation === this.generation && this.proc?.running) {
      const client = new TorControlClient({
        endpoint: this.controlEndpoint,
        cookieFile: this.cookieFile,
        events: SUBSCRIBED_EVENTS,
        commandTimeoutMs: this.opts.commandTimeoutMs ?? DEFAULTS.commandTimeoutMs,
        shouldReconnect: () => generation === this.generation && (this.proc?.running ?? false),
        log: this.log,
      });
      this.connectingClient = client;
      try {
        await client.connect();
      } catch (error) {
        if (this.connectingClient === client) this.connectingClient = undefined;
        await client.close();
        this.log.debug('control port not reachable yet', { error: (error as Error).message });
        if (!(await this.delays.wait(retryMs))) return;
        retryMs = Math.min(retryMs * 2, CONTROL_CONNECT_RETRY_MAX_MS);
        continue;
      }
      if (this.connectingClient === client) this.connectingClient = undefined;
      if (generation !== this.generation) {
        await client.close();
        return;
      }
      this.client = client;
      client.on('event', (event) => this.onTorEvent(generation, event));
      client.on('connected', ({ reconnect }) => {
        if (reconnect) void this.syncAfterConnect(generation, client);
      });
      client.on('disconnected', ({ willReconnect }) => this.log.info('control connection lost', { willReconnect }));
      if (this.lifecycleState === 'starting') this.setLifecycle('bootstrapping');
      await this.syncAfterConnect(generation, client);
      return;
    }
  }

  /** After every (re)connection: catch up on state that events may have missed. */
  private async syncAfterConnect(generation: number, client: TorControlClient): Promise<void> {
    try {
      const phaseText = (await client.getInfo(['status/bootstrap-phase'])).get('status/bootstrap-phase') ?? '';
      const phase = parseBootstrapPhase(phaseText);
      if (phase) this.onBootstrap(generation, { percent: phase.progress, ...(phase.tag ? { tag: phase.tag } : {}), ...(phase.summary ? { summary: phase.summary } : {}) });
      if (!this.baseline) {
        const conf = await client.getConf(['ExitNodes', 'ExcludeExitNodes', 'StrictNodes']);
        if (generation !== this.generation) return;
        this.baseline = {
          exitNodes: conf.get('ExitNodes'),
          excludeExitNodes: conf.get('ExcludeExitNodes'),
          strictNodes: conf.get('StrictNodes'),
        };
      }
      const lists = await client.getInfo(['circuit-status', 'stream-status']);
      if (generation !== this.generation) return;
      this.tracker.reseed(
        parseLines(lists.get('circuit-status') ?? '', parseCircuitLine),
        parseLines(lists.get('stream-status') ?? '', parseStreamLine),
      );
      if (this.opts.pinExitRelay && this.pinnedFingerprint) await this.applyPin(client, this.pinnedFingerprint);
      this.maybeReady(generation);
      this.refreshExit();
    } catch (error) {
      this.log.warn('control sync failed', { error: (error as Error).message });
    }
  }

  private onTorEvent(generation: number, event: TorEvent): void {
    if (generation !== this.generation) return;
    switch (event.type) {
      case 'STATUS_CLIENT':
        if (event.bootstrap) {
          const b = event.bootstrap;
          this.onBootstrap(generation, { percent: b.progress, ...(b.tag ? { tag: b.tag } : {}), ...(b.summary ? { summary: b.summary } : {}) });
        }
        return;
      case 'CIRC':
        this.tracker.onCircuit(event);
        this.closeIdleCircuits();
        this.refreshExit();
        return;
      case 'STREAM':
        this.tracker.onStream(event);
        if (event.status === 'CLOSED' || event.status === 'FAILED') this.closeIdleCircuits();
        this.refreshExit();
        return;
      default:
        return;
    }
  }

  // ---- internals: exits, rotation, pinning ----

  private closeIdleCircuits(): void {
    const client = this.client;
    if (!client) return;
    const ids = this.tracker.takeRetiredIdleCircuits();
    if (this.pinnedFingerprint) ids.push(...this.tracker.takeIdleCircuitsNotThrough(this.pinnedFingerprint));
    for (const id of ids) {
      client.closeCircuit(id).catch((error: Error) => {
        // 552 Unknown circuit: it closed by itself meanwhile.
        if (!(error instanceof ControlCommandError)) this.log.debug('CLOSECIRCUIT failed', { circuit: id, error: error.message });
      });
    }
  }

  private async performRotation(rotation: ActiveRotation, generation: number): Promise<void> {
    try {
      const waitMs = this.cooldown.msUntilAllowed(Date.now());
      if (waitMs > 0 && !(await this.delays.wait(waitMs))) return;
      if (rotation.finished || generation !== this.generation) return;
      const client = this.client;
      if (!client) throw new Error('no control connection');
      if (this.pinnedFingerprint) await this.releasePin(client, this.pinnedFingerprint);
      if (rotation.finished || generation !== this.generation) return;
      this.tracker.markNewnym();
      await client.signal('NEWNYM');
      const at = Date.now();
      this.cooldown.markSent(at);
      if (rotation.finished || generation !== this.generation) return;
      rotation.sent = true;
      rotation.resolveSent({ ok: true, at, waitedMs: at - rotation.startedAt });
      rotation.timer = setTimeout(
        () => this.finishRotation(rotation, { ok: false, reason: 'timeout' }),
        this.opts.rotationTimeoutMs ?? DEFAULTS.rotationTimeoutMs,
      );
      this.closeIdleCircuits();
      this.refreshExit();
    } catch (error) {
      this.log.warn('rotation failed', { rotation: rotation.id, error: (error as Error).message });
      this.finishRotation(rotation, { ok: false, reason: 'failed', error: error as Error });
    }
  }

  private finishRotation(rotation: ActiveRotation, outcome: RotationOutcome): void {
    if (rotation.finished) return;
    rotation.finished = true;
    clearTimeout(rotation.timer);
    if (this.rotation === rotation) this.rotation = undefined;
    if (!outcome.ok) this.tracker.abandonRotation();
    if (!rotation.sent) rotation.resolveSent(outcome.ok ? { ok: true, at: Date.now(), waitedMs: 0 } : outcome);
    this.log.info('rotation finished', {
      rotation: rotation.id,
      ok: outcome.ok,
      ...(outcome.ok ? { exit: outcome.exit.exitIp } : { reason: outcome.reason }),
      ms: Date.now() - rotation.startedAt,
    });
    rotation.resolveDone(outcome);
    this.refreshExit();
  }

  /** SETCONF that locks tor to one exit and restores the configured exclusions. */
  private async applyPin(client: TorControlClient, fingerprint: string): Promise<void> {
    await client.setConf([
      ['ExitNodes', `$${fingerprint}`],
      ['StrictNodes', '1'],
      ['ExcludeExitNodes', this.baseline?.excludeExitNodes ?? ''],
    ]);
    this.pinnedFingerprint = fingerprint;
    this.tracker.setPinned(fingerprint);
    this.log.info('exit pinned', { fingerprint });
    this.closeIdleCircuits();
    this.refreshExit();
  }

  /** Back to the configured exit selection, with the old relay excluded so a new exit is chosen. */
  private async releasePin(client: TorControlClient, fingerprint: string): Promise<void> {
    const exclude = [this.baseline?.excludeExitNodes, `$${fingerprint}`].filter((v): v is string => !!v).join(',');
    await client.setConf([
      ['ExitNodes', this.baseline?.exitNodes ?? ''],
      ['StrictNodes', this.baseline?.strictNodes ?? ''],
      ['ExcludeExitNodes', exclude],
    ]);
    this.pinnedFingerprint = undefined;
    this.tracker.setPinned(undefined);
    this.log.info('exit pin released', { fingerprint });
  }

  private maybePin(current: ExitState): void {
    if (!this.opts.pinExitRelay || this.pinnedFingerprint || this.rotation || this.pinInFlight) return;
    if (!this.readyFlag || current.exitFingerprint === '' || Date.now() < this.pinRetryAt) return;
    const client = this.client;
    if (!client?.connected) return;
    const generation = this.generation;
    this.pinInFlight = true;
    this.applyPin(client, current.exitFingerprint)
      .catch((error: Error) => {
        this.pinRetryAt = Date.now() + PIN_RETRY_MS;
        this.log.warn('pinning the exit failed', { error: error.message });
      })
      .finally(() => {
        this.pinInFlight = false;
        if (generation === this.generation) this.refreshExit();
      });
  }

  /** Recomputes the exit fields from the tracker and the relay cache; emits exit-changed on change. */
  private refreshExit(): void {
    const next = this.computeExit();
    const rotation = this.rotation;
    if (rotation && rotation.sent && next.exitIp !== '') {
      this.finishRotation(rotation, { ok: true, exit: { ...next, rotating: false } });
      return; // finishRotation refreshed with the rotation cleared
    }
    if (!sameExit(next, this.lastExit)) {
      this.lastExit = next;
      this.emit('exit-changed', next);
    }
    this.maybePin(next);
  }

  private computeExit(): ExitState {
    if (!this.proc?.running) return { ...EMPTY_EXIT, pinnedExit: '' };
    const current = this.tracker.current();
    const info = current ? this.resolveRelay(current.fingerprint) : undefined;
    const state: ExitState = { ...EMPTY_EXIT, pinnedExit: this.pinnedFingerprint ?? '', rotating: this.rotation !== undefined };
    if (current && info) {
      state.exitIp = info.address;
      state.exitCountry = info.country;
      state.exitNickname = info.nickname;
      state.exitFingerprint = current.fingerprint;
      state.exitConfirmed = current.confirmed;
    }
    const retired = this.rotation ? this.tracker.retiredFingerprint : undefined;
    if (state.exitIp === '' && retired) {
      const retiredInfo = this.resolveRelay(retired);
      if (retiredInfo) state.retiredExitIp = retiredInfo.address;
    }
    return state;
  }

  /** Cached relay info, or undefined while a lookup runs (it refreshes the exit when done). */
  private resolveRelay(fingerprint: string): { address: string; country: string; nickname: string } | undefined {
    const hit = this.directory.cached(fingerprint);
    if (hit) return hit;
    if (!this.client?.connected) return undefined;
    const generation = this.generation;
    this.directory
      .resolve(fingerprint)
      .then(() => {
        if (generation === this.generation) this.refreshExit();
      })
      .catch((error: Error) => this.log.debug('relay lookup failed', { fingerprint, error: error.message }));
    return undefined;
  }
}

function parseLines<T>(text: string, parse: (line: string) => T): T[] {
  const out: T[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      out.push(parse(line));
    } catch {
      // One odd line must not hide the others.
    }
  }
  return out;
}

function sameExit(a: ExitState, b: ExitState): boolean {
  return (
    a.exitIp === b.exitIp &&
    a.exitCountry === b.exitCountry &&
    a.exitNickname === b.exitNickname &&
    a.exitFingerprint === b.exitFingerprint &&
    a.exitConfirmed === b.exitConfirmed &&
    a.retiredExitIp === b.retiredExitIp &&
    a.pinnedExit === b.pinnedExit &&
    a.rotating === b.rotating
  );
}

