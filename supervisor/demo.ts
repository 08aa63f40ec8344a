import path from 'node:path';
import winston from 'winston';
import { handOverSignals, PRIVATE_NETWORK_TOR_WARNINGS, startTestnet } from '../internal/testnet/index.js';
import { loadConfig, removeSecretsFromEnvironment, type Environment } from '../shared/config/index.js';
import { createRootLogger, type Logger } from '../shared/logger.js';
import { Service } from './service.js';

/** Pool size of the demo unless POOL_SIZE says otherwise: 4 of the 7 /24s the network's exits leave from, leaving room for the spares (WARM_SPARES). */
const DEMO_POOL_SIZE = '4';
/** The signals on which the demo stops the service, then its network (any other ends both at once). */
const DEMO_STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];
/** How long the demo waits for every instance's exit before printing the ones it has. */
const EXITS_PRINT_WAIT_MS = 60_000;
/** The pool's progress line without an `instance` field, which the exits' printout replaces. */
const POOL_PROGRESS_MESSAGES: ReadonlySet<string> = new Set(['instance bootstrapped']);
/** winston's own key for a line's level (triple-beam's LEVEL), which its transports filter on. */
const LEVEL = Symbol.for('level');

/**
 * From the banner on, each instance's progress (tor started, bootstrapped, its exit pinned,
 * its health) is logged at debug: the banner and the exits' printout say what a newcomer needs,
 * and LOG_LEVEL=debug still shows every line. Warnings and errors stay as they are.
 */
function quietInstanceChatter(log: Logger): void {
  const demote = winston.format((info) => {
    const line = info as winston.Logform.TransformableInfo & { [LEVEL]?: string };
    if (line[LEVEL] === 'info' && (typeof line.instance === 'number' || POOL_PROGRESS_MESSAGES.has(String(line.message)))) {
      line[LEVEL] = 'debug';
      line.level = 'debug';
    }
    return line;
  });
  log.format = winston.format.combine(demote(), log.format);
}

/**
 * `exitpool demo`: a private Tor network on loopback (no internet needed), exitpool on top of
 * it, a printout of where to connect, and a clean stop of everything on Ctrl-C.
 */
export async function runDemo(env: Environment): Promise<number> {
  const probe = loadConfig(env);
  const log = createRootLogger(probe.logLevel, probe.logFormat);
  log.info('demo: starting a private Tor network on loopback (this takes about half a minute)');
  const net = await startTestnet({ log: log.child({ component: 'testnet' }) });
  let service: Service | null = null;
  const stopAll = async (): Promise<void> => {
    if (service) await service.stop();
    await net.stop();
  };
  try {
    await net.waitUntilUsable();
    log.info('demo: private network usable', { seconds: Math.round((net.usableAfterMs ?? 0) / 1000), exits: net.exits.length });
    const config = loadConfig({
      POOL_SIZE: DEMO_POOL_SIZE,
      // The network's own IP echo measures the exits' addresses, as the default echo would on the public network.
      EGRESS_PROBE_URLS: net.whoami.echoUrl(),
      ...env,
      DATA_DIR: env.DATA_DIR ?? path.join(net.workDir, 'exitpool-data'),
      TOR_BINARY: net.torBinary,
      TOR_EXTRA_CONFIG: [...net.clientTorrcLines, ...(env.TOR_EXTRA_CONFIG ? [env.TOR_EXTRA_CONFIG] : [])].join('\n'),
    });
    // Workers and tor processes inherit the environment: keep the secrets in the supervisor only.
    removeSecretsFromEnvironment(process.env);
    // From here a signal stops the service, then the network, in that order (stopAll below).
    handOverSignals(DEMO_STOP_SIGNALS);
    const stopped = new Promise<void>((resolve) => {
      for (const signal of DEMO_STOP_SIGNALS) process.once(signal, () => resolve());
    });
    const started = await Service.start(config, {
      allowPublicNetwork: false,
      torEnv: { ...process.env, ...net.clientEnvironment },
      defaultsTorrc: net.defaultsTorrc,
      expectedTorWarnings: PRIVATE_NETWORK_TOR_WARNINGS,
    });
    service = started;
    // The banner's curl lines work once the proxies serve (MIN_READY instances bootstrapped).
    const serving = started.pool.isServing ? Promise.resolve() : new Promise<void>((resolve) => started.pool.once('serving', () => resolve()));
    if ((await Promise.race([serving.then(() => 'serving' as const), stopped.then(() => 'stopped' as const)])) === 'stopped') return 0;
    const token = service.generated.proxyToken?.secret ?? config.proxyToken ?? '<your proxy token>';
    const password = service.generated.adminPassword ?? (config.adminPassword ? '(ADMIN_PASSWORD)' : '(as generated on first boot)');
    const whoami = `http://whoami.testnet:${net.whoami.port}/`;
    process.stdout.write(
      [
        '',
        '  exitpool demo is running on a private Tor network (loopback only).',
        '',
        `  SOCKS5 proxy   127.0.0.1:${config.socksPort}   (username = session key, password = token)`,
        `  HTTP proxy     127.0.0.1:${config.httpPort}`,
        `  dashboard      http://127.0.0.1:${config.apiPort}/   user ${config.adminUser}, password ${password}`,
        `  proxy token    ${token}`,
        `  destination    ${whoami}  (answers with the exit's address: 127.20.0.1 and up)`,
        '',
        '  Try the same session twice, then rotate it:',
        `    curl --socks5-hostname 'alice:${token}@127.0.0.1:${config.socksPort}' ${whoami}`,
        `    curl -x 'http://alice:${token}@127.0.0.1:${config.httpPort}' ${whoami}`,
        `    curl -X POST -H 'Authorization: Bearer ${token}' http://127.0.0.1:${config.apiPort}/api/sessions/alice/rotate`,
        '',
        '  Ctrl-C stops the service and the network.',
        '',
      ].join('\n'),
    );
    quietInstanceChatter(log);
    await Promise.race([printExits(started), stopped]);
    await stopped;
  } finally {
    await stopAll();
  }
  return 0;
}

/**
 * Once every instance serves, which exit each leaves through: one line per instance, so the demo
 * shows the pool's distinct exit IPs (supervisor/exits).
 */
async function printExits(service: Service): Promise<void> {
  const deadline = Date.now() + EXITS_PRINT_WAIT_MS;
  const views = (): ReturnType<Service['pool']['views']['instanceViews']> => service.pool.views.instanceViews();
  while (Date.now() < deadline && !views().every((v) => v.ready && v.exit_ip !== '')) await new Promise((r) => setTimeout(r, 250));
  const lines = views().map((v) => {
    const exit = v.assigned_exit;
    const measured = exit && exit.address_source !== 'published' && exit.published_address !== exit.address ? `, publishes ${exit.published_address}` : '';
    const where = exit ? `${exit.nickname}${measured}, ${exit.country || '??'}, block ${exit.block}${exit.distinct ? '' : ' (shared: too few exits)'}` : 'chosen by tor';
    // A spare (WARM_SPARES) serves no session until a rotation moves one onto it.
    return `    ${v.spare ? 'spare   ' : 'instance'} ${v.id}  ${v.exit_ip || '(not yet known)'}  (${where})`;
  });
  process.stdout.write(['  Each instance leaves through its own exit (spares wait for rotations):', ...lines, ''].join('\n') + '\n');
}
