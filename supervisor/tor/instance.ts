import { EventEmitter } from 'node:events';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { childLogger, type Logger } from '../../shared/logger.js';
import { Backoff } from './backoff.js';
import { TorControlClient } from './control-client.js';
import { parseBootstrapPhase, type TorEvent } from './control-events.js';
import { DelayScope } from './delay-scope.js';
import { NotBootstrappedError } from './errors.js';
import { ExitControl } from './exit-control.js';
import { instanceLayout, resolveInstanceOptions, type ResolvedInstanceOptions } from './instance-options.js';
import type {
  BootstrapProgress,
  ExitState,
  InstanceLifecycle,
  InstanceSnapshot,
  RotationFailure,
  RotationTicket,
  TorInstanceEvents,
  TorInstanceOptions,
} from './instance-types.js';
import { probeLiveness } from './liveness-probe.js';
import { assertPrivateNetworkTorrc } from './private-network-guard.js';
import { logLineSeverity, parseBootstrapLogLine, parseStreamTimeoutLogLine } from './tor-log-line.js';
import { TorProcess, type ProcessExit } from './tor-process.js';
import { renderTorrc, type ControlEndpoint, type SocksEndpoint } from './torrc.js';
import { errorMessage } from '../../shared/errors/error-message.js';

export type * from './instance-types.js';

/**
 * One supervised tor: spawn, control connection, bootstrap tracking, stall and crash recovery.
 * Its exit, rotation and pinning are ExitControl's (exit-control.ts), its liveness probe is
 * liveness-probe.ts. Everything the pool reads (snapshot(), getters) is cached state: nothing on
 * a request path waits on the control port.
 */

const SUBSCRIBED_EVENTS = ['STATUS_CLIENT', 'CIRC', 'STREAM'] as const;
/** Retry interval for connecting to a fresh tor's control socket (it appears within ms of start). */
const CONTROL_CONNECT_RETRY_MS = 100;
const CONTROL_CONNECT_RETRY_MAX_MS = 1_000;

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
  private readonly opts: ResolvedInstanceOptions;

  private lifecycleState: InstanceLifecycle = 'idle';
  /** Identifies the current tor process; callbacks of an older process are ignored. */
  private generation = 0;
  private proc: TorProcess | undefined;
  private client: TorControlClient | undefined;
  private connectingClient: TorControlClient | undefined;
  private readonly exits: ExitControl;
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
  private opChain: Promise<unknown> = Promise.resolve();

  constructor(options: TorInstanceOptions) {
    super();
    this.opts = resolveInstanceOptions(options);
    this.index = options.index;
    this.log = options.log ?? childLogger({ instance: options.index, component: 'tor' });
    const layout = instanceLayout(options);
    this.dataDirectory = layout.dataDirectory;
    this.torrcPath = layout.torrcPath;
    this.cookieFile = layout.cookieFile;
    this.controlEndpoint = layout.controlEndpoint;
    this.socksEndpoint = layout.socksEndpoint;
    this.socksAddr = layout.socksAddr;
    if (layout.socksFallback) {
      this.log.warn('DATA_DIR is too deep for a Unix-socket SocksPort: using TCP on loopback, which any local user can reach', layout.socksFallback);
    }
    this.crashBackoff = new Backoff(this.opts.restartBackoffInitialMs, this.opts.restartBackoffMaxMs);
    this.exits = new ExitControl(
      {
        log: this.log,
        delays: this.delays,
        generation: () => this.generation,
        client: () => this.client,
        ready: () => this.readyFlag,
        running: () => this.proc?.running ?? false,
        exitChanged: (exit) => this.emit('exit-changed', exit),
        pinUnreachable: (fingerprint) => this.emit('exit-unreachable', { fingerprint }),
        exitDown: (verdict) => this.emit('exit-down', verdict),
      },
      {
        events: SUBSCRIBED_EVENTS,
        pinExitRelay: this.opts.pinExitRelay,
        rotationTimeoutMs: this.opts.rotationTimeoutMs,
        ...(this.opts.exitLivenessLimits ? { livenessLimits: this.opts.exitLivenessLimits } : {}),
        ...(this.opts.newnymCooldownMs !== undefined ? { newnymCooldownMs: this.opts.newnymCooldownMs } : {}),
      },
    );
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
    return this.exits.rotating;
  }

  /** false while the tor is ready but does not answer its control port (see probeLiveness). */
  get responsive(): boolean {
    return this.responsiveFlag;
  }

  /** Whether the instance follows tor's STREAM events now, and how many it received (diagnostics). */
  get streamEvents(): { following: boolean; received: number } {
    return this.exits.streamEventsState;
  }

  get exit(): ExitState {
    return this.exits.exit;
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
      newnymCooldownMs: this.exits.newnymCooldownMs(Date.now()),
      restarts: this.restartCount,
      ...this.exits.exit,
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
   *
   * With `exit` (a fingerprint: the supervisor's assignment) tor is pinned to that relay instead
   * (`SETCONF ExitNodes`, which makes tor abandon every circuit it has): no NEWNYM, so no
   * cooldown; the rotation ends once the pin is in force, or with `untilCircuit` once a circuit
   * through the exit is built (it is then known to work).
   */
  rotate(exit?: string, options: { untilCircuit?: boolean } = {}): RotationTicket {
    if (!this.readyFlag || !this.client) throw new NotBootstrappedError(this.index, this.bootstrapPercent);
    return this.exits.rotate(exit, options.untilCircuit ?? false);
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
        owningControllerPid: this.opts.supervisorPid,
        conflux: this.opts.conflux,
        maxCircuitDirtinessSecs: this.opts.maxCircuitDirtinessSecs,
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
    this.exits.newProcess();
    this.bootstrapPercent = 0;
    this.readyFlag = false;

    const proc = new TorProcess({
      torBinary: this.opts.torBinary,
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
    this.exits.refresh();
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
    this.exits.processGone(reason);
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
      const exit = await proc.stop(this.opts.stopGraceMs);
      if (wasRunning) this.log.info('tor stopped', { pid: proc.pid, code: exit.code, signal: exit.signal });
    }
    this.exits.refresh();
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
    this.exits.forgetPin();
    await rm(this.dataDirectory, { recursive: true, force: true });
  }

  private onProcessExit(generation: number, exit: ProcessExit): void {
    if (generation !== this.generation) return;
    // Unexpected: nobody asked this process to stop.
    for (const c of this.detach('died')) void c.close();
    this.exits.refresh();
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
    const streamTimeout = parseStreamTimeoutLogLine(text);
    if (streamTimeout) this.exits.onStreamTimeout(streamTimeout.exitFingerprint);
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
    this.exits.refresh();
    void this.probeLiveness(generation);
  }

  private probeLiveness(generation: number): Promise<void> {
    return probeLiveness(
      {
        delays: this.delays,
        isCurrent: () => generation === this.generation,
        client: () => this.client,
        unresponsive: (silentForMs) => {
          this.responsiveFlag = false;
          this.exits.suspendLiveness();
          this.log.warn('tor does not answer its control port; out of rotation', { silentForMs, pid: this.pid });
          this.emit('unresponsive', { silentForMs });
        },
        responsive: () => {
          this.responsiveFlag = true;
          this.exits.resumeLiveness();
          this.log.info('tor answers its control port again; back in rotation');
          this.emit('responsive');
        },
        unresponsiveTooLong: (silentForMs) => {
          this.log.warn('tor unresponsive for too long; restarting it', { silentForMs, unresponsiveRestartMs: this.opts.unresponsiveRestartMs });
          this.enqueue(async () => {
            if (generation !== this.generation) return;
            await this.restartNow(false, 'control port unresponsive');
          }).catch((error: Error) => this.log.error('restart of an unresponsive tor failed', { error: error.message }));
        },
      },
      { intervalMs: this.opts.livenessIntervalMs, timeoutMs: this.opts.livenessTimeoutMs, restartMs: this.opts.unresponsiveRestartMs },
    );
  }

  private armStallTimer(generation: number): void {
    this.clearStallTimer();
    this.stallTimer = setTimeout(() => this.onStall(generation), this.opts.stallTimeoutMs);
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
      stallTimeoutMs: this.opts.stallTimeoutMs,
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
        commandTimeoutMs: this.opts.commandTimeoutMs,
        shouldReconnect: () => generation === this.generation && (this.proc?.running ?? false),
        log: this.log,
      });
      this.connectingClient = client;
      try {
        await client.connect();
      } catch (error) {
        if (this.connectingClient === client) this.connectingClient = undefined;
        await client.close();
        this.log.debug('control port not reachable yet', { error: errorMessage(error) });
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
      await this.exits.syncAfterConnect(client, generation);
      if (generation !== this.generation) return;
      this.maybeReady(generation);
      this.exits.refresh();
    } catch (error) {
      this.log.warn('control sync failed', { error: errorMessage(error) });
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
        this.exits.onCircuit(event);
        return;
      case 'STREAM':
        this.exits.onStream(event);
        return;
      default:
        return;
    }
  }
}
