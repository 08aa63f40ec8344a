import { expect } from 'chai';
import fc from 'fast-check';
import { fuzzRuns } from '../support/fixtures/fuzz-runs.js';
import os from 'node:os';
import path from 'node:path';
import { nodeList, nodeName } from '../../shared/config/values.js';
import { ADMIN_PASSWORD_MIN_LENGTH, PROXY_TOKEN_MIN_LENGTH, REDIS_PASSWORD_MIN_LENGTH, SIGNING_SECRET_MIN_LENGTH } from '../../shared/config/secret-values.js';
import {
  CORES_PER_PROXY_WORKER,
  ConfigError,
  VARIABLES,
  configForWorkers,
  decodeWorkerConfig,
  encodeWorkerConfig,
  formatDuration,
  loadConfig,
  parseDuration,
  proxyWorkersFor,
  type Config,
} from '../../shared/config/index.js';

function problemsOf(env: Record<string, string>): { variable: string; message: string }[] {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).to.be.instanceOf(ConfigError);
    return [...(e as ConfigError).problems];
  }
  return [];
}

describe('configuration', () => {
  describe('durations', () => {
    const cases: [string, number][] = [
      ['10m', 600_000],
      ['90s', 90_000],
      ['1h30m', 5_400_000],
      ['1.5h', 5_400_000],
      ['300ms', 300],
      ['2h0m0s', 7_200_000],
      ['45', 45_000],
      ['0', 0],
    ];
    for (const [text, ms] of cases) {
      it(`parses ${text} as ${ms} ms`, () => expect(parseDuration(text)).to.equal(ms));
    }
    for (const bad of ['', 'ten', '10x', 'm', '10m5', '-5s', '1h 30m']) {
      it(`refuses ${JSON.stringify(bad)}`, () => expect(() => parseDuration(bad)).to.throw(/not a duration/));
    }
    it('prints Go style', () => {
      expect(formatDuration(600_000)).to.equal('10m0s');
      expect(formatDuration(3_600_000)).to.equal('1h0m0s');
      expect(formatDuration(5_400_000)).to.equal('1h30m0s');
      expect(formatDuration(90_000)).to.equal('1m30s');
      expect(formatDuration(5_000)).to.equal('5s');
      expect(formatDuration(250)).to.equal('250ms');
      expect(formatDuration(0)).to.equal('0s');
    });
    it('round-trips every whole-second duration (property)', () => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 10_000_000 }), (secs) => {
          expect(parseDuration(formatDuration(secs * 1000))).to.equal(secs * 1000);
        }),
      );
    });
    it('never throws anything but its own error on arbitrary text (property)', () => {
      fc.assert(
        fc.property(fc.string(), (s) => {
          try {
            const ms = parseDuration(s);
            expect(Number.isInteger(ms)).to.equal(true);
          } catch (e) {
            expect((e as Error).name).to.equal('DurationSyntaxError');
          }
        }),
      );
    });
  });

  describe('defaults', () => {
    const config = loadConfig({});
    // Written out by hand (not derived from the table) so a changed default fails here.
    const expected: Omit<Config, 'proxyWorkers' | 'dataDir'> = {
      poolSize: 5,
      minReady: 1,
      defaultSession: 'ip',
      sessionTtlMs: 600_000,
      maxSessions: 100_000,
      maxConnectionsPerWorker: 8192,
      maxUnauthenticatedPerWorker: 1024,
      proxyWarmUp: 500,
      shutdownGraceMs: 20_000,
      quarantineFailures: 5,
      quarantineConsecutive: 3,
      minRoutable: { kind: 'share', percent: 25 },
      clientReportBudget: { attempts: 30, windowMs: 60_000 },
      banReporters: 2,
      banReportWindowMs: 3_600_000,
      clientBanBudget: { attempts: 5, windowMs: 3_600_000 },
      minEligibleExits: { kind: 'share', percent: 25 },
      minEligibleExitsPerCountry: 1,
      banRateAlert: 10,
      failureWindowMs: 300_000,
      pinExitRelay: true,
      exitDistinct: 'subnet',
      exitHistory: 5,
      warmSpares: 2,
      exitBanTtlMs: 3 * 60 * 60 * 1000,
      egressProbeUrls: ['https://check.torproject.org/api/ip'],
      egressProbeTtlMs: 3_600_000,
      egressProbeTimeoutMs: 10_000,
      exitList: '',
      exitHeader: false,
      usernameParams: true,
      sessionTtlMaxMs: 86_400_000,
      torMaxCircuitDirtinessMs: 3_600_000,
      torConflux: false,
      torExitNodes: [],
      torStrictNodes: false,
      torBinary: 'tor',
      torExtraConfig: [],
      authDisabled: false,
      drainOnRotate: true,
      adminUser: 'admin',
      adminPassword: null,
      proxyToken: null,
      signingSecret: null,
      loginTtlMs: 12 * 3_600_000,
      loginRateLimit: { attempts: 10, windowMs: 300_000 },
      sessionPortBase: null,
      socksPort: 9250,
      httpPort: 9251,
      apiPort: 8080,
      bindHost: '127.0.0.1',
      apiAllowedHosts: [],
      instancePortBase: 19050,
      stateStore: 'sqlite',
      nodeName: os.hostname().replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 64) || 'node',
      nodeLeaseMs: 10_000,
      nodeAddress: '',
      hopPort: 9252,
      fleetReseed: '',
      logLevel: 'info',
      logFormat: 'text',
      bootstrapStallTimeoutMs: 120_000,
      spawnStaggerMs: 250,
      remediationBackoffBaseMs: 30_000,
      remediationBackoffMaxMs: 600_000,
      remediationRecurrenceWindowMs: 1_800_000,
      rotationGraceMs: 5_000,
    };
    for (const [key, value] of Object.entries(expected)) {
      it(`${key} defaults to ${JSON.stringify(value)}`, () => {
        expect(config[key as keyof Config]).to.deep.equal(value);
      });
    }
    it('proxyWorkers defaults to one worker per CORES_PER_PROXY_WORKER cores of this machine, at least one', () => {
      expect(config.proxyWorkers).to.equal(Math.max(1, Math.floor(os.availableParallelism() / CORES_PER_PROXY_WORKER)));
    });
    it('the default worker count, machine by machine: half the cores, at least one', () => {
      const table: [cores: number, workers: number][] = [
        [1, 1],
        [2, 1],
        [3, 1],
        [4, 2],
        [6, 3],
        [8, 4],
        [16, 8],
        [64, 32],
      ];
      for (const [cores, workers] of table) expect(proxyWorkersFor(cores), `${cores} cores`).to.equal(workers);
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 1024 }), (cores) => {
          const w = proxyWorkersFor(cores);
          // Never none, never more than a worker per core, and the proxy layer never more than half the cores (one core at least).
          return w >= 1 && w <= cores && (w === 1 || w * CORES_PER_PROXY_WORKER <= cores) && proxyWorkersFor(cores + 1) >= w;
        }),
      );
    });
    it('dataDir defaults to ./data, made absolute', () => {
      expect(config.dataDir).to.equal(path.resolve('data'));
    });
    it('every variable of the table has a default test above', () => {
      const covered = new Set([...Object.keys(expected), 'proxyWorkers', 'dataDir']);
      for (const v of VARIABLES) expect(covered.has(v.key), v.name).to.equal(true);
    });
  });

  describe('every variable parses a valid value and names itself on a bad one', () => {
    // [name, valid text, expected value, invalid text]
    const table: [string, string, unknown, string][] = [
      ['POOL_SIZE', '10', 10, '0'],
      ['MIN_READY', '2', 2, 'two'],
      ['DEFAULT_SESSION', 'shared', 'shared', 'sticky'],
      ['SESSION_TTL', '1h30m', 5_400_000, '10 minutes'],
      ['MAX_SESSIONS', '50', 50, '-1'],
      ['MAX_CONNECTIONS_PER_WORKER', '20000', 20_000, '0'],
      ['MAX_UNAUTHENTICATED_PER_WORKER', '64', 64, '0'],
      ['SHUTDOWN_GRACE', '45s', 45_000, '11m'],
      ['QUARANTINE_FAILURES', '1', 1, '0'],
      ['QUARANTINE_CONSECUTIVE', '8', 8, 'x'],
      ['FAILURE_WINDOW', '90s', 90_000, '0s'],
      ['PIN_EXIT_RELAY', 'yes', true, 'maybe'],
      ['TOR_MAX_CIRCUIT_DIRTINESS', '10m', 600_000, '1s'],
      ['TOR_CONFLUX', '1', true, '2'],
      ['TOR_EXIT_NODES', '{DE}, nl', ['{de}', '{nl}'], '{germany}'],
      ['TOR_STRICT_NODES', 'on', true, 'strict'],
      ['TOR_BINARY', '/usr/sbin/tor', '/usr/sbin/tor', 'tor\u0007'],
      ['TOR_EXTRA_CONFIG', 'UseBridges 1\\nBridge obfs4 x', ['UseBridges 1', 'Bridge obfs4 x'], 'A\u0000B'],
      ['AUTH_DISABLED', 'true', true, 'disabled'],
      ['DRAIN_ON_ROTATE', 'off', false, 'nope'],
      ['EXIT_DISTINCT', 'family', 'family', 'network'],
      ['EXIT_HISTORY', '0', 0, '51'],
      ['WARM_SPARES', '0', 0, '9'],
      ['EXIT_BAN_TTL', '30m', 1_800_000, '10s'],
      ['EGRESS_PROBE_URLS', 'http://whoami.testnet:20001/ip, https://api.ipify.org', ['http://whoami.testnet:20001/ip', 'https://api.ipify.org/'], 'ftp://echo.example/'],
      ['EGRESS_PROBE_TTL', '6h', 21_600_000, '10s'],
      ['EGRESS_PROBE_TIMEOUT', '15s', 15_000, '1h'],
      ['EXIT_LIST', '/var/lib/exitpool/exit-addresses', '/var/lib/exitpool/exit-addresses', 'exit-addresses'],
      ['EXIT_HEADER', '1', true, 'sometimes'],
      ['USERNAME_PARAMS', '0', false, 'maybe'],
      ['SESSION_TTL_MAX', '2h', 7_200_000, '10s'],
      ['ADMIN_USER', 'operator', 'operator', 'a\nb'],
      ['ADMIN_PASSWORD', 'correct horse', 'correct horse', 'x'.repeat(1025)],
      ['PROXY_TOKEN', 'tp_abcdefghijklmnopqrstuv', 'tp_abcdefghijklmnopqrstuv', 'secret'],
      ['LOGIN_TTL', '30m', 1_800_000, '5s'],
      ['LOGIN_RATE_LIMIT', '3/1m', { attempts: 3, windowMs: 60_000 }, 'many'],
      ['SESSION_PORT_BASE', '30000', 30000, '70000'],
      ['SOCKS_PORT', '1080', 1080, '65536'],
      ['HTTP_PORT', '3128', 3128, '0'],
      ['API_PORT', '8081', 8081, 'http'],
      ['BIND_HOST', '0.0.0.0', '0.0.0.0', ''],
      ['MIN_ROUTABLE', '40%', { kind: 'share', percent: 40 }, '0%'],
      ['CLIENT_REPORT_BUDGET', '100/10m', { attempts: 100, windowMs: 600_000 }, 'lots'],
      ['BAN_REPORTERS', '3', 3, '0'],
      ['BAN_REPORT_WINDOW', '30m', 1_800_000, '10s'],
      ['CLIENT_BAN_BUDGET', '2/1h', { attempts: 2, windowMs: 3_600_000 }, 'some'],
      ['MIN_ELIGIBLE_EXITS', '4', { kind: 'count', count: 4 }, '0%'],
      ['MIN_ELIGIBLE_EXITS_PER_COUNTRY', '0', 0, '-1'],
      ['BAN_RATE_ALERT', '50', 50, '0'],
      ['API_ALLOWED_HOSTS', 'Exitpool.Internal, dash.example.org.', ['exitpool.internal', 'dash.example.org'], 'http://evil.example:80'],
      ['SIGNING_SECRET', 'q'.repeat(32), 'q'.repeat(32), 'short'],
      ['INSTANCE_PORT_BASE', '40000', 40000, '80'],
      ['DATA_DIR', '/var/lib/exitpool', '/var/lib/exitpool', 'a\u0001'],
      ['STATE_STORE', 'none', 'none', 'redis'],
      ['NODE_NAME', 'pod-0.eu_1', 'pod-0.eu_1', 'a:b'],
      ['NODE_LEASE', '15s', 15_000, '1s'],
      ['NODE_ADDRESS', 'exitpool-0.exitpool.default.svc', 'exitpool-0.exitpool.default.svc', '10.0.0.1:1080'],
      ['HOP_PORT', '9300', 9300, '0'],
      ['FLEET_RESEED', '20261123T100000Z-AbCdEfGhIjKl', '20261123T100000Z-AbCdEfGhIjKl', 'an epoch?'],
      ['LOG_LEVEL', 'debug', 'debug', 'verbose'],
      ['LOG_FORMAT', 'json', 'json', 'xml'],
      ['BOOTSTRAP_STALL_TIMEOUT', '45s', 45_000, '2d'],
      ['SPAWN_STAGGER', '0', 0, '5min'],
      ['PROXY_WORKERS', '2', 2, '0'],
      ['PROXY_WARM_UP', '0', 0, '-1'],
      ['REMEDIATION_BACKOFF_BASE', '10s', 10_000, 'soon'],
      ['REMEDIATION_BACKOFF_MAX', '20m', 1_200_000, '0'],
      ['REMEDIATION_RECURRENCE_WINDOW', '1h', 3_600_000, 'later'],
      ['ROTATION_GRACE', '2s', 2_000, '1y'],
    ];
    it('the table names every variable', () => {
      expect(table.map((r) => r[0]).sort()).to.deep.equal(VARIABLES.map((v) => v.name).sort());
    });
    // Variables whose valid value needs a companion to pass the cross-checks.
    const companions: Record<string, Record<string, string>> = {
      SESSION_PORT_BASE: { AUTH_DISABLED: 'true' },
      MIN_READY: { POOL_SIZE: '5' },
      BIND_HOST: {},
    };
    for (const [name, valid, value, invalid] of table) {
      const def = VARIABLES.find((v) => v.name === name);
      it(`${name}: accepts ${JSON.stringify(valid)}`, () => {
        const config = loadConfig({ ...companions[name], [name]: valid });
        expect(config[def!.key]).to.deep.equal(value);
      });
      it(`${name}: refuses ${JSON.stringify(invalid)} naming the variable`, () => {
        // BIND_HOST='' means unset; test the refusal of a control character instead.
        const bad = name === 'BIND_HOST' ? 'local\u0000host' : invalid;
        const problems = problemsOf({ ...companions[name], [name]: bad });
        expect(problems.map((p) => p.variable)).to.include(name);
      });
    }
  });

  describe('cross-checks and aliases', () => {
    it('reports every problem at once', () => {
      const problems = problemsOf({ POOL_SIZE: 'x', SOCKS_PORT: '0', LOG_LEVEL: 'loud' });
      expect(problems.map((p) => p.variable).sort()).to.deep.equal(['LOG_LEVEL', 'POOL_SIZE', 'SOCKS_PORT']);
      try {
        loadConfig({ POOL_SIZE: 'x' });
      } catch (e) {
        expect((e as Error).message).to.match(/POOL_SIZE: not an integer/);
      }
    });
    it('refuses SESSION_PORT_BASE while AUTH_DISABLED is off', () => {
      const problems = problemsOf({ SESSION_PORT_BASE: '30000' });
      expect(problems).to.have.length(1);
      expect(problems[0]!.variable).to.equal('SESSION_PORT_BASE');
      expect(problems[0]!.message).to.match(/AUTH_DISABLED/);
    });
    it('refuses MIN_READY above POOL_SIZE', () => {
      expect(problemsOf({ POOL_SIZE: '2', MIN_READY: '3' })[0]!.variable).to.equal('MIN_READY');
    });
    it('refuses a backoff base above its maximum', () => {
      const p = problemsOf({ REMEDIATION_BACKOFF_BASE: '20m', REMEDIATION_BACKOFF_MAX: '10m' });
      expect(p[0]!.variable).to.equal('REMEDIATION_BACKOFF_BASE');
    });
    it('refuses colliding listener ports', () => {
      const p = problemsOf({ HTTP_PORT: '9250' });
      expect(p[0]!.variable).to.equal('HTTP_PORT');
      expect(p[0]!.message).to.match(/collide with SOCKS_PORT/);
    });
    it('refuses a hop listener on another listener’s port on a node of a fleet, and reads it nowhere else', () => {
      const fleet = { STATE_STORE: 'redis://127.0.0.1:6379/pool', HOP_PORT: '9251' };
      const p = problemsOf(fleet);
      expect(p[0]!.variable).to.equal('HOP_PORT');
      expect(p[0]!.message).to.match(/collide with HTTP_PORT/);
      expect(problemsOf({ HOP_PORT: '9251' }), 'no hop listener off a fleet').to.deep.equal([]);
    });
    it('refuses a listener inside the instance port block', () => {
      const p = problemsOf({ API_PORT: '19060' });
      expect(p.map((x) => x.variable)).to.include('INSTANCE_PORT_BASE');
    });
    it('refuses a session port block over a listener', () => {
      const p = problemsOf({ AUTH_DISABLED: '1', SESSION_PORT_BASE: '9200' });
      expect(p.map((x) => x.variable)).to.include('SESSION_PORT_BASE');
    });
    it('accepts the NET_ spellings as aliases', () => {
      const c = loadConfig({ NET_EXIT_NODES: '{se}', NET_STRICT_NODES: '1', NET_MAX_CIRCUIT_DIRTINESS: '20m', NET_CONFLUX: '1' });
      expect(c.torExitNodes).to.deep.equal(['{se}']);
      expect(c.torStrictNodes).to.equal(true);
      expect(c.torMaxCircuitDirtinessMs).to.equal(1_200_000);
      expect(c.torConflux).to.equal(true);
    });
    it('refuses a NET_ and a TOR_ spelling that disagree', () => {
      const p = problemsOf({ NET_CONFLUX: '1', TOR_CONFLUX: '0' });
      expect(p[0]!.variable).to.equal('TOR_CONFLUX');
    });
    it('treats an empty value as unset', () => {
      expect(loadConfig({ POOL_SIZE: '', ADMIN_PASSWORD: '' }).poolSize).to.equal(5);
    });
    it('keeps secrets out of what workers receive', () => {
      const c = loadConfig({ ADMIN_PASSWORD: 'hunter22-hunter22', PROXY_TOKEN: 'tp_abcdefghijklmnopqrstuv', SIGNING_SECRET: 'signing-secret-of-32-characters-or-more' });
      const text = encodeWorkerConfig(c);
      expect(text).not.to.contain('hunter22-hunter22');
      expect(text).not.to.contain('signing-secret-of-32');
      expect(text).not.to.contain('tp_abcdefghijklmnopqrstuv');
      expect(decodeWorkerConfig(text)).to.deep.equal(configForWorkers(c));
    });
    it('never throws anything but ConfigError for arbitrary values (property)', () => {
      fc.assert(
        fc.property(fc.constantFrom(...VARIABLES.map((v) => v.name)), fc.string(), (name, value) => {
          try {
            loadConfig({ [name]: value });
          } catch (e) {
            expect(e).to.be.instanceOf(ConfigError);
          }
        }),
        { numRuns: fuzzRuns(500) },
      );
    });
  });
});

describe('configuration: EGRESS_PROBE_URLS and EXIT_LIST (hostile input)', () => {
  it('refuses credentials in a URL (they would reach every exit probed), other schemes, too many URLs, and relative paths', () => {
    for (const [name, value] of [
      ['EGRESS_PROBE_URLS', 'https://user:pass@echo.example/'],
      ['EGRESS_PROBE_URLS', 'javascript:alert(1)'],
      ['EGRESS_PROBE_URLS', 'file:///etc/passwd'],
      ['EGRESS_PROBE_URLS', Array.from({ length: 9 }, (_, i) => `https://e${i}.example/`).join(',')],
      ['EGRESS_PROBE_URLS', `https://echo.example/${'a'.repeat(2100)}`],
      ['EXIT_LIST', 'https://user@lists.example/exit-addresses'],
      ['EXIT_LIST', '../exit-addresses'],
      ['EXIT_LIST', 'gopher://lists.example/'],
      ['EXIT_LIST', '/var/lib/a\u0000b'],
    ] as const) {
      expect(problemsOf({ [name]: value }).map((p) => p.variable), `${name}=${value.slice(0, 60)}`).to.deep.equal([name]);
    }
  });

  it('reads none as no probe, and keeps a URL list in order', () => {
    expect(loadConfig({ EGRESS_PROBE_URLS: 'none' }).egressProbeUrls).to.deep.equal([]);
    expect(loadConfig({ EGRESS_PROBE_URLS: '' }).egressProbeUrls, 'empty is unset: the default').to.deep.equal(['https://check.torproject.org/api/ip']);
    expect(loadConfig({ EGRESS_PROBE_URLS: ' https://b.example/ip ,https://a.example/' }).egressProbeUrls).to.deep.equal(['https://b.example/ip', 'https://a.example/']);
    expect(loadConfig({ EXIT_LIST: 'https://check.torproject.org/exit-addresses' }).exitList).to.equal('https://check.torproject.org/exit-addresses');
  });
});

describe('configuration: NODE_NAME (hostile input)', () => {
  it('takes the host name when unset, with what a Redis key must not hold replaced', () => {
    expect(nodeName('', () => 'web 1:eu/pod*')).to.equal('web-1-eu-pod-');
    expect(nodeName('', () => '')).to.equal('node');
    expect(nodeName('', () => 'h'.repeat(300))).to.have.length(64);
  });
  for (const bad of ['a:b', '../x', 'no\nde', 'x'.repeat(65), 'pod*', 'n{1}', 'ü']) {
    it(`refuses ${JSON.stringify(bad)}`, () => {
      expect(() => nodeName(bad)).to.throw(/letters, digits/);
    });
  }
  it('property: a name is accepted exactly when it can name keys as it is, and then unchanged', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), fc.string({ maxLength: 80 }), (raw, host) => {
        const fromHost = nodeName('', () => host);
        expect(fromHost).to.match(/^[A-Za-z0-9_.-]{1,64}$/);
        let accepted: string | null;
        try {
          accepted = nodeName(raw);
        } catch {
          accepted = null;
        }
        if (raw.trim() === '') return;
        if (accepted === null) expect(/^[A-Za-z0-9_.-]{1,64}$/.test(raw.trim())).to.equal(false);
        else expect(accepted).to.equal(raw.trim());
      }),
      { numRuns: fuzzRuns(300) },
    );
  });
});

describe('configuration: TOR_EXIT_NODES lists (property)', () => {
  const code = fc.stringMatching(/^[a-zA-Z]{2}$/);
  const fingerprint = fc.stringMatching(/^\$?[0-9A-F]{40}$/);
  const entry = fc.oneof(
    code.map((c) => ({ text: c, expected: `{${c.toLowerCase()}}` })),
    code.map((c) => ({ text: `{${c}}`, expected: `{${c.toLowerCase()}}` })),
    fingerprint.map((f) => ({ text: f, expected: f })),
  );

  it('reads bare and braced country codes alike, keeps fingerprints, whatever the spacing', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(entry, fc.constantFrom('', ' ', '  ')), { minLength: 1, maxLength: 8 }), (items) => {
        const raw = items.map(([e, pad]) => `${pad}${e.text}${pad}`).join(',');
        expect(nodeList(raw)).to.deep.equal(items.map(([e]) => e.expected));
      }),
      { numRuns: fuzzRuns(200) },
    );
  });

  it('refuses what is neither a country, a fingerprint nor a nickname, naming the entry', () => {
    expect(() => nodeList('de,{germany}')).to.throw(/"\{germany\}"/);
    expect(() => nodeList('de, not a name')).to.throw(/"not a name"/);
  });
});

describe('configuration: known secrets are refused', () => {
  const redisUrl = (password: string): string => `redis://:${encodeURIComponent(password)}@127.0.0.1:6379/pool`;
  // Each variable, how a value is given in it, its minimum, and a value that is long enough.
  const secrets: { name: string; wrap: (v: string) => string; min: number; body: (n: number) => string }[] = [
    { name: 'SIGNING_SECRET', wrap: (v) => v, min: SIGNING_SECRET_MIN_LENGTH, body: (n) => 's'.repeat(n) },
    { name: 'ADMIN_PASSWORD', wrap: (v) => v, min: ADMIN_PASSWORD_MIN_LENGTH, body: (n) => 'p'.repeat(n) },
    { name: 'PROXY_TOKEN', wrap: (v) => `tp_${v}`, min: PROXY_TOKEN_MIN_LENGTH, body: (n) => 't'.repeat(n) },
    { name: 'STATE_STORE', wrap: redisUrl, min: REDIS_PASSWORD_MIN_LENGTH, body: (n) => 'r'.repeat(n) },
  ];

  for (const s of secrets) {
    it(`${s.name}: accepts ${s.min} characters, refuses ${s.min - 1} naming the variable and the minimum (on one line)`, () => {
      expect(() => loadConfig({ [s.name]: s.wrap(s.body(s.min)) })).to.not.throw();
      const problems = problemsOf({ [s.name]: s.wrap(s.body(s.min - 1)) });
      expect(problems.map((p) => p.variable)).to.deep.equal([s.name]);
      expect(problems[0]?.message).to.include(String(s.min));
      try {
        loadConfig({ [s.name]: s.wrap(s.body(s.min - 1)) });
      } catch (e) {
        expect((e as Error).message.split('\n'), 'one problem is one line').to.have.length(1);
        expect((e as Error).message).to.match(new RegExp(`^invalid configuration: ${s.name}: `));
      }
    });

    for (const spelling of ['CHANGE-ME', 'change-me', 'ChangeMe', 'change_me', 'change me']) {
      it(`${s.name}: refuses a long value containing the placeholder ${JSON.stringify(spelling)}, without repeating it`, () => {
        const value = s.wrap(`${spelling}-${s.body(s.min)}`);
        const problems = problemsOf({ [s.name]: value });
        expect(problems.map((p) => p.variable)).to.deep.equal([s.name]);
        expect(problems[0]?.message).to.match(/placeholder/);
        expect(problems[0]?.message).to.not.include(s.body(s.min));
      });
    }
  }

  it('STATE_STORE: a Redis URL without a password is accepted, and sqlite and none have nothing to check', () => {
    for (const v of ['redis://127.0.0.1:6379/pool', 'rediss://user@redis.internal/pool', 'sqlite', 'none']) expect(loadConfig({ STATE_STORE: v }).stateStore).to.equal(v);
  });

  it('STATE_STORE: the password is checked as the URL decodes it', () => {
    // 16 characters once %-decoded, 18 as written: the decoded length counts.
    expect(problemsOf({ STATE_STORE: `redis://:${'a'.repeat(14)}%2F%2F@h/pool` })).to.deep.equal([]);
    expect(problemsOf({ STATE_STORE: `redis://:${'a'.repeat(13)}%2F%2F@h/pool` }).map((p) => p.variable)).to.deep.equal(['STATE_STORE']);
  });

  it('reports every known secret at once', () => {
    const problems = problemsOf({ SIGNING_SECRET: 'CHANGE-ME-at-least-32-characters-long', ADMIN_PASSWORD: 'CHANGE-ME', PROXY_TOKEN: 'tp_CHANGE-ME-0000000000000000' });
    expect(problems.map((p) => p.variable).sort()).to.deep.equal(['ADMIN_PASSWORD', 'PROXY_TOKEN', 'SIGNING_SECRET']);
  });
});
