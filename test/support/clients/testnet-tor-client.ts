import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { TorProcess, type Testnet } from '../../../internal/testnet/index.js';
import { childLogger } from '../../../shared/logger.js';
import { TestnetControl } from '../fixtures/testnet-control.js';

const CONTROL_PORT_FILE_TIMEOUT_MS = 20_000;
const BOOTSTRAP_POLL_MS = 250;

/** A tor client of the test network started by a test, with its SOCKS and control ports. */
export interface TestnetClient {
  readonly name: string;
  readonly socksPort: number;
  readonly controlPort: number;
  readonly control: TestnetControl;
  readonly tor: TorProcess;
  readonly dir: string;
  /** Milliseconds from spawn to 100 % bootstrap (resolved value of waitBootstrapped). */
  waitBootstrapped(timeoutMs: number): Promise<number>;
  stop(): Promise<void>;
}

const COOKIE_LENGTH = 32;

function cookieWritten(file: string): boolean {
  try {
    return statSync(file).size === COOKIE_LENGTH;
  } catch {
    return false;
  }
}

function parseHostPort(value: string): number {
  const port = Number(value.replace(/"/g, '').split(':').pop());
  if (!Number.isInteger(port) || port <= 0) throw new Error(`unexpected listener address: ${value}`);
  return port;
}

/**
 * Starts a client exactly as a pool instance joins the network: the network's clientTorrcLines
 * plus its own DataDirectory and SOCKS/control ports (chosen by tor: "auto", so parallel test
 * runs never collide). Its files live inside the network's work dir, so stopping or reaping the
 * network also takes care of a client a failed test left behind.
 */
export async function startTestnetClient(net: Testnet, name: string, extraLines: readonly string[] = ['ConfluxEnabled 0']): Promise<TestnetClient> {
  const log = childLogger({ component: 'testnet-client', client: name });
  const dir = path.join(net.workDir, 'clients', name);
  mkdirSync(path.join(dir, 'data'), { recursive: true, mode: 0o700 });
  const controlPortFile = path.join(dir, 'control-port');
  const cookieFile = path.join(dir, 'control-cookie');
  const torrcPath = path.join(dir, 'torrc');
  const lines = [
    `# exitpool test client ${name}: joins the private test network only`,
    ...net.clientTorrcLines,
    `DataDirectory ${path.join(dir, 'data')}`,
    `PidFile ${path.join(dir, 'tor.pid')}`,
    `Log notice file ${path.join(dir, 'notice.log')}`,
    'SafeLogging 0',
    'SocksPort 127.0.0.1:auto',
    'ControlPort 127.0.0.1:auto',
    `ControlPortWriteToFile ${controlPortFile}`,
    'CookieAuthentication 1',
    `CookieAuthFile ${cookieFile}`,
    `__OwningControllerProcess ${process.pid}`,
    ...extraLines,
  ];
  await writeFile(torrcPath, lines.join('\n') + '\n');
  const spawnedAt = Date.now();
  const tor = TorProcess.spawn({
    name,
    torBinary: net.torBinary,
    torrcPath,
    defaultsTorrc: net.defaultsTorrc,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, LANG: 'C', ...net.clientEnvironment },
    outputFile: path.join(dir, 'stdout.log'),
    logFiles: [path.join(dir, 'notice.log')],
    log,
  });
  try {
    const deadline = Date.now() + CONTROL_PORT_FILE_TIMEOUT_MS;
    let controlPort: number | undefined;
    // tor writes the port file and the cookie at different moments: wait for both.
    while (controlPort === undefined || !cookieWritten(cookieFile)) {
      if (tor.exitStatus) throw tor.exitedError(tor.exitStatus);
      if (Date.now() > deadline) throw new Error(`client ${name} wrote no control port or cookie file:\n${tor.logTail()}`);
      try {
        const text = readFileSync(controlPortFile, 'utf8');
        const match = /^PORT=(\S+)$/m.exec(text);
        if (match?.[1]) controlPort = parseHostPort(match[1]);
      } catch {
        // not written yet
      }
      await delay(50);
    }
    const control = await TestnetControl.connect(controlPort, cookieFile);
    const socksPort = parseHostPort(await control.getInfo('net/listeners/socks'));
    return {
      name,
      socksPort,
      controlPort,
      control,
      tor,
      dir,
      async waitBootstrapped(timeoutMs: number): Promise<number> {
        const end = Date.now() + timeoutMs;
        let phase = '';
        while (Date.now() < end) {
          if (tor.exitStatus) throw tor.exitedError(tor.exitStatus);
          phase = await control.getInfo('status/bootstrap-phase');
          if (/PROGRESS=100\b/.test(phase)) return Date.now() - spawnedAt;
          await delay(BOOTSTRAP_POLL_MS);
        }
        throw new Error(`client ${name} not bootstrapped after ${timeoutMs} ms: ${phase}`);
      },
      async stop(): Promise<void> {
        control.close();
        await tor.stop();
      },
    };
  } catch (err) {
    await tor.stop();
    throw err;
  }
}
