/**
 * A stand-in for the tor binary in component tests: `node fake-tor.js -f <torrc>`.
 * It reads the torrc the instance wrote (DataDirectory, ControlPort, CookieAuthFile, ExitNodes,
 * __OwningControllerProcess) and speaks enough of the control protocol for TorInstance: cookie
 * authentication, SETEVENTS, GETINFO, GETCONF, SETCONF, SIGNAL NEWNYM, CLOSECIRCUIT; it
 * prints "Bootstrapped N%" lines, emits STATUS_CLIENT/CIRC/STREAM events and keeps a small
 * circuit model with tor's rules (NEWNYM retires dirty circuits only; changing ExitNodes closes
 * unused circuits). Behaviour on cue comes from `# FAKE_TOR key=value` torrc lines:
 *
 *   step-ms=N        delay between bootstrap steps (default 30)
 *   stall-at=N       stop making progress at N %
 *   crash-at=N       exit(3) on reaching N %
 *   ignore-sigterm=1 survive SIGTERM (only SIGKILL ends it)
 *   exits=FP:IP:CC:NICK,...   exit relays (default: three)
 *
 * A test-only command `FAKE-STREAM` (on any authenticated connection) opens a stream the way a
 * SOCKS request would: attach to the newest usable circuit (or build one) and succeed.
 * `FAKE-STREAM-HOLD` does the same and leaves the stream open (no CLOSED event).
 * `FAKE-KILL-EXIT <fp>` kills an exit relay as kill -9 does on the private network: its built
 * circuits are destroyed (REASON=DESTROYED REMOTE_REASON=DESTROYED) and every circuit extended to
 * it from then on fails at the third hop (REMOTE_REASON=CONNECTFAILED). `EXTENDCIRCUIT 0` builds
 * a circuit as tor does (under ExitNodes); circuits take their middle from three in turn.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync, unlinkSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';

interface Relay {
  fp: string;
  ip: string;
  cc: string;
  nick: string;
}

interface Circuit {
  id: number;
  exit: Relay;
  middle: string;
  dirty: boolean;
  unusable: boolean;
  streams: number;
}

const torrcPath = process.argv[process.argv.indexOf('-f') + 1]!;
const torrc = readFileSync(torrcPath, 'utf8');

function unquote(value: string): string {
  const v = value.trim();
  if (!v.startsWith('"')) return v;
  return v.slice(1, -1).replace(/\\(.)/g, '$1');
}

function option(name: string): string | undefined {
  let found: string | undefined;
  for (const line of torrc.split('\n')) {
    const m = /^(\S+)\s+(.*)$/.exec(line.trim());
    if (m && m[1]!.toLowerCase() === name.toLowerCase()) found = m[2]!;
  }
  return found;
}

const fake = new Map<string, string>();
for (const line of torrc.split('\n')) {
  const m = /^#\s*FAKE_TOR\s+([a-z-]+)=(\S+)/.exec(line.trim());
  if (m) fake.set(m[1]!, m[2]!);
}

const stepMs = Number(fake.get('step-ms') ?? 30);
const stallAt = fake.has('stall-at') ? Number(fake.get('stall-at')) : undefined;
const crashAt = fake.has('crash-at') ? Number(fake.get('crash-at')) : undefined;
const relays: Relay[] = (fake.get('exits') ?? `${'A'.repeat(40)}:127.0.0.11:de:exitA,${'B'.repeat(40)}:127.0.0.12:nl:exitB,${'C'.repeat(40)}:127.0.0.13:us:exitC`)
  .split(',')
  .map((s) => {
    const [fp, ip, cc, nick] = s.split(':');
    return { fp: fp!, ip: ip!, cc: cc!, nick: nick! };
  });
const GUARD = 'D'.repeat(40);
const MIDDLES = ['E'.repeat(40), '9'.repeat(40), '8'.repeat(40)];
let nextMiddle = 0;
/** Exit relays killed by FAKE-KILL-EXIT. */
const dead = new Set<string>();

const cookieFile = unquote(option('CookieAuthFile') ?? '');
const controlValue = option('ControlPort') ?? '';
const owner = Number(option('__OwningControllerProcess') ?? 0);
const conf = new Map<string, string | undefined>([
  ['ExitNodes', option('ExitNodes')],
  ['ExcludeExitNodes', option('ExcludeExitNodes')],
  ['StrictNodes', option('StrictNodes')],
]);

const cookie = randomBytes(32);
writeFileSync(cookieFile, cookie, { mode: 0o600 });

let progress = 0;
const circuits = new Map<number, Circuit>();
let nextCircuit = 1;
let nextStream = 1;
const subscribers = new Set<Socket>();

function say(line: string): void {
  process.stdout.write(`Nov 22 05:00:00.000 [notice] ${line}\n`);
}

function emit(line: string): void {
  for (const s of subscribers) if (!s.destroyed) s.write(`650 ${line}\r\n`);
}

function phase(): string {
  return `NOTICE BOOTSTRAP PROGRESS=${progress} TAG=${progress === 100 ? 'done' : 'step'} SUMMARY="${progress === 100 ? 'Done' : `Step ${progress}`}"`;
}

function allowedExits(): Relay[] {
  const pick = (v: string | undefined): string[] => (v ? v.split(',').map((x) => x.replace(/^\$/, '').replace(/[~=].*$/, '')) : []);
  const only = pick(conf.get('ExitNodes'));
  const excluded = pick(conf.get('ExcludeExitNodes'));
  return relays.filter((r) => (only.length === 0 || only.includes(r.fp) || only.includes(`{${r.cc}}`)) && !excluded.includes(r.fp));
}

function path(c: Circuit): string {
  return `$${GUARD}~guard,$${c.middle}~middle,$${c.exit.fp}~${c.exit.nick}`;
}

/** A circuit to an allowed exit; one to a dead exit fails at the third hop (undefined then, and when none is allowed). */
function buildCircuit(): Circuit | undefined {
  const choices = allowedExits();
  if (choices.length === 0) return undefined;
  const exit = choices[Math.floor(Math.random() * choices.length)]!;
  const middle = MIDDLES[nextMiddle++ % MIDDLES.length]!;
  const id = nextCircuit++;
  emit(`CIRC ${id} LAUNCHED BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL`);
  emit(`CIRC ${id} EXTENDED $${GUARD}~guard BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL`);
  emit(`CIRC ${id} EXTENDED $${GUARD}~guard,$${middle}~middle BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL`);
  if (dead.has(exit.fp)) {
    emit(`CIRC ${id} FAILED $${GUARD}~guard,$${middle}~middle BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL REASON=DESTROYED REMOTE_REASON=CONNECTFAILED`);
    return undefined;
  }
  const c: Circuit = { id, exit, middle, dirty: false, unusable: false, streams: 0 };
  circuits.set(c.id, c);
  emit(`CIRC ${c.id} BUILT ${path(c)} BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL`);
  return c;
}

function closeCircuit(c: Circuit, reason: string): void {
  circuits.delete(c.id);
  emit(`CIRC ${c.id} CLOSED ${path(c)} PURPOSE=GENERAL REASON=${reason}`);
}

function killExit(fp: string): void {
  dead.add(fp);
  for (const c of [...circuits.values()]) if (c.exit.fp === fp) closeCircuit(c, 'DESTROYED REMOTE_REASON=DESTROYED');
}

function usableCircuit(): Circuit | undefined {
  const allowed = new Set(allowedExits().map((r) => r.fp));
  return [...circuits.values()].filter((c) => !c.unusable && allowed.has(c.exit.fp)).sort((a, b) => b.id - a.id)[0];
}

function openStream(hold: boolean): string {
  const c = usableCircuit() ?? buildCircuit();
  if (!c) return '551 no exit\r\n';
  const id = nextStream++;
  c.dirty = true;
  c.streams++;
  emit(`STREAM ${id} NEW 0 127.0.0.1:8080 SOURCE_ADDR=127.0.0.1:5555 PURPOSE=USER`);
  emit(`STREAM ${id} SENTCONNECT ${c.id} 127.0.0.1:8080`);
  emit(`STREAM ${id} SUCCEEDED ${c.id} 127.0.0.1:8080`);
  if (!hold) {
    setTimeout(() => {
      c.streams--;
      emit(`STREAM ${id} CLOSED ${c.id} 127.0.0.1:8080 REASON=DONE`);
    }, 20);
  }
  return `250-stream=${id}\r\n250-circuit=${c.id}\r\n250 OK\r\n`;
}

function step(): void {
  if (stallAt !== undefined && progress >= stallAt) return;
  progress = Math.min(100, progress + 10);
  say(`Bootstrapped ${progress}% (step): Step ${progress}`);
  emit(`STATUS_CLIENT ${phase()}`);
  if (crashAt !== undefined && progress >= crashAt) {
    say('crashing on cue');
    process.exit(3);
  }
  if (progress === 100) {
    buildCircuit();
    buildCircuit();
    return;
  }
  setTimeout(step, stepMs);
}

function answer(line: string, socket: Socket, state: { authed: boolean }): string {
  const [verb, ...args] = line.split(' ');
  if (verb === 'AUTHENTICATE') {
    if (args[0] === cookie.toString('hex')) {
      state.authed = true;
      return '250 OK\r\n';
    }
    return '515 Authentication failed\r\n';
  }
  if (!state.authed) return '514 Authentication required.\r\n';
  switch (verb) {
    case 'SETEVENTS':
      subscribers.add(socket);
      return '250 OK\r\n';
    case 'GETINFO': {
      let out = '';
      for (const key of args) {
        if (key === 'status/bootstrap-phase') out += `250-${key}=${phase()}\r\n`;
        else if (key === 'circuit-status') {
          const lines = [...circuits.values()].map((c) => `${c.id} BUILT ${path(c)} BUILD_FLAGS=NEED_CAPACITY PURPOSE=GENERAL`);
          out += `250+${key}=\r\n${lines.map((l) => `${l}\r\n`).join('')}.\r\n`;
        } else if (key === 'stream-status') out += `250+${key}=\r\n.\r\n`;
        else if (key === 'entry-guards') out += `250-${key}=$${GUARD}~guard up\r\n`;
        else if (key.startsWith('ns/id/')) {
          const relay = relays.find((r) => r.fp === key.slice(6));
          if (!relay) return `552 Unrecognized key "${key}"\r\n`;
          const identity = Buffer.from(relay.fp, 'hex').toString('base64').replace(/=+$/, '');
          out += `250+${key}=\r\nr ${relay.nick} ${identity} 2026-11-22 05:00:00 ${relay.ip} 5000 0\r\ns Exit Fast Running Valid\r\n.\r\n`;
        } else if (key.startsWith('ip-to-country/')) {
          const relay = relays.find((r) => r.ip === key.slice(14));
          out += `250-${key}=${relay?.cc ?? '??'}\r\n`;
        } else return `552 Unrecognized key "${key}"\r\n`;
      }
      return `${out}250 OK\r\n`;
    }
    case 'GETCONF':
      return args.map((k, i) => `250${i === args.length - 1 ? ' ' : '-'}${k}${conf.get(k) ? `=${conf.get(k)}` : ''}\r\n`).join('');
    case 'SETCONF': {
      for (const m of line.slice(8).matchAll(/(\w+)(?:="((?:[^"\\]|\\.)*)")?/g)) conf.set(m[1]!, m[2] === undefined || m[2] === '' ? undefined : m[2]);
      // As tor does when node selection changes: abandon previous circuits.
      for (const c of [...circuits.values()]) {
        if (!c.dirty) closeCircuit(c, 'REQUESTED');
        else c.unusable = true;
      }
      setTimeout(() => buildCircuit(), 10);
      return '250 OK\r\n';
    }
    case 'SIGNAL':
      if (args[0] === 'NEWNYM') {
        for (const c of circuits.values()) if (c.dirty) c.unusable = true;
        setTimeout(() => buildCircuit(), 30);
        return '250 OK\r\n';
      }
      return '552 Unrecognized signal\r\n';
    case 'CLOSECIRCUIT': {
      const c = circuits.get(Number(args[0]));
      if (!c) return `552 Unknown circuit "${args[0]}"\r\n`;
      closeCircuit(c, 'REQUESTED');
      return '250 OK\r\n';
    }
    case 'EXTENDCIRCUIT': {
      if (args[0] !== '0') return '552 Unknown circuit\r\n';
      const id = nextCircuit;
      setTimeout(() => buildCircuit(), 5);
      return `250 EXTENDED ${id}\r\n`;
    }
    case 'FAKE-KILL-EXIT':
      killExit(args[0] ?? '');
      return '250 OK\r\n';
    case 'FAKE-STREAM':
      return openStream(false);
    case 'FAKE-STREAM-HOLD':
      return openStream(true);
    default:
      return `510 Unrecognized command "${verb}"\r\n`;
  }
}

const server = createServer((socket) => {
  const state = { authed: false };
  let buffered = '';
  socket.on('error', () => undefined);
  socket.on('close', () => subscribers.delete(socket));
  socket.on('data', (chunk) => {
    buffered += chunk.toString();
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl).replace(/\r$/, '');
      buffered = buffered.slice(nl + 1);
      socket.write(answer(line, socket, state));
    }
  });
});

const unixMatch = /^unix:(.*)$/.exec(controlValue);
const socketPath = unixMatch ? unquote(unixMatch[1]!) : undefined;
if (socketPath) server.listen(socketPath);
else server.listen(Number(controlValue.split(':').pop()), '127.0.0.1');

say('Tor 0.4.9.11 (fake) running');
setTimeout(step, stepMs);

if (fake.get('ignore-sigterm') === '1') process.on('SIGTERM', () => say('ignoring SIGTERM'));
else {
  process.on('SIGTERM', () => {
    say('Catching signal TERM, exiting cleanly.');
    if (socketPath) {
      try {
        unlinkSync(socketPath);
      } catch {
        // already gone
      }
    }
    process.exit(0);
  });
}

// Like __OwningControllerProcess: never outlive the test process.
const ownerCheck = setInterval(() => {
  try {
    if (owner > 0) process.kill(owner, 0);
  } catch {
    process.exit(0);
  }
}, 500);
ownerCheck.unref();
