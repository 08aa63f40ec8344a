import { expect } from 'chai';
import net from 'node:net';
import { ConnectionAccounting } from '../../workers/proxy/connection-accounting.js';
import { InstanceDownSignal } from '../../workers/proxy/instance-down.js';
import type { RouteDecision, RouteGranted } from '../../workers/proxy/proxy-types.js';
import { routeAndDial, type RouteAndDialOptions, type RouteDial } from '../../workers/proxy/route-and-dial.js';
import { SocksDialError, type DialedUpstream } from '../../workers/proxy/socks5-client.js';
import { FakeRouter, RecordingEvents, grantedRoute } from '../support/fakes/proxy-parts.js';
import { quietLogger } from '../support/fakes/quiet-logger.js';

/**
 * The one route → dial → re-route → account path both listeners use (route-and-dial.ts), with
 * the fake router and scripted dials: every route is opened and closed exactly once, or released.
 */

const route = (instance: number): RouteGranted => grantedRoute(instance, { host: '127.0.0.1', port: 1 }, 'k');
const TARGET = { type: 'domain', host: 'example.test', port: 80 } as const;

function dialed(): DialedUpstream {
  return { socket: new net.Socket(), readBase: 0, writeBase: 0, connectMs: 12 };
}

/** A dial that settles when the test says so, and records an abort. */
class ScriptedDial implements RouteDial {
  aborted = false;
  promise: Promise<DialedUpstream>;
  resolve!: (d: DialedUpstream) => void;
  reject!: (e: unknown) => void;
  constructor() {
    this.promise = new Promise((res, rej) => {
      this.resolve = res;
      this.reject = rej;
    });
  }
  abort(): void {
    this.aborted = true;
    this.reject(new SocksDialError('aborted', 'awaiting-reply', null, 'aborted', 5));
  }
}

function setup(decisions: RouteDecision[], dials: ((r: RouteGranted) => RouteDial)[], gone = () => false) {
  const router = new FakeRouter((_req, i) => decisions[i] ?? { ok: false, reason: 'no_routable_instance' });
  const events = new RecordingEvents();
  const signal = new InstanceDownSignal();
  const released: RouteGranted[] = [];
  let n = 0;
  const options: RouteAndDialOptions = {
    listener: 'socks',
    target: TARGET,
    firstRoute: router.route({ sessionKey: 'k', clientIp: '10.0.0.1', listener: 'socks' }),
    reroute: () => router.route({ sessionKey: 'k', clientIp: '10.0.0.1', listener: 'socks' }),
    dial: (r) => (dials[n++] as (r: RouteGranted) => RouteDial)(r),
    clientGone: gone,
    release: (r) => released.push(r),
    accounting: new ConnectionAccounting(events, 'socks'),
    evidence: { host: TARGET.host, credential: () => 'token:t' },
    instanceDown: signal,
    dialMs: 1000,
    log: quietLogger(),
  };
  return { router, events, signal, released, options };
}

describe('proxy: route and dial (one path for both listeners)', () => {
  it('dials the granted route and leaves its close to the caller', async () => {
    const d = dialed();
    const { events, options } = setup([route(2)], [() => ({ promise: Promise.resolve(d), abort: () => undefined })]);
    const outcome = await routeAndDial(options);
    expect(outcome.kind).to.equal('dialed');
    if (outcome.kind !== 'dialed') return;
    expect(outcome.dialed).to.equal(d);
    expect(events.opened.map((r) => r.instance)).to.deep.equal([2]);
    expect(events.closed).to.deep.equal([]);
    outcome.connection.closed({ bytesUp: 3, bytesDown: 4, failure: null, latencyMs: 12 });
    outcome.connection.closed({ bytesUp: 9, bytesDown: 9, failure: null, latencyMs: 12 });
    expect(events.closed.map((c) => [c.stats.bytesUp, c.stats.ok])).to.deep.equal([[3, true]]);
  });

  it('answers no-route with the refusal and opens nothing', async () => {
    const { events, options } = setup([{ ok: false, reason: 'session_limit' }], []);
    expect(await routeAndDial(options)).to.deep.equal({ kind: 'no-route', reason: 'session_limit' });
    expect(events.opened).to.deep.equal([]);
  });

  it('accounts a failed dial with its transport failure and hands the error back', async () => {
    const refused = new SocksDialError('refused', 'awaiting-reply', 5, 'connection refused', 30);
    const { events, options } = setup([route(1)], [() => ({ promise: Promise.reject(refused), abort: () => undefined })]);
    const outcome = await routeAndDial(options);
    expect(outcome).to.deep.equal({ kind: 'dial-failed', error: refused });
    expect(events.closed).to.have.length(1);
    expect(events.closed[0]!.stats).to.deep.include({ ok: false, failure: { kind: 'socks_refused', socksReply: 5, scored: true, destination: 'example.test:80' }, latencyMs: 30 });
  });

  it('re-routes once when the instance goes down mid-dial, not scoring the first', async () => {
    const first = new ScriptedDial();
    const d = dialed();
    const { events, signal, router, options } = setup([route(1), route(2)], [() => first, () => ({ promise: Promise.resolve(d), abort: () => undefined })]);
    const pending = routeAndDial(options);
    await new Promise((r) => setImmediate(r));
    signal.markDown(1);
    const outcome = await pending;
    expect(first.aborted).to.equal(true);
    expect(outcome.kind).to.equal('dialed');
    expect(router.requests).to.have.length(2);
    expect(events.opened.map((r) => r.instance)).to.deep.equal([1, 2]);
    expect(events.closed.map((c) => [c.route.instance, c.stats.failure])).to.deep.equal([[1, { kind: 'dial', scored: false }]]);
  });

  it('gives up after one re-route when that instance goes down too', async () => {
    const a = new ScriptedDial();
    const b = new ScriptedDial();
    const { events, signal, options } = setup([route(1), route(2)], [() => a, () => b]);
    const pending = routeAndDial(options);
    await new Promise((r) => setImmediate(r));
    signal.markDown(1);
    await new Promise((r) => setTimeout(r, 5));
    signal.markDown(2);
    expect(await pending).to.deep.equal({ kind: 'instance-down' });
    expect(events.closed.map((c) => c.route.instance)).to.deep.equal([1, 2]);
    expect(events.closed.every((c) => c.stats.failure?.scored === false)).to.equal(true);
  });

  it('releases a route the client left before, and closes a dial it left during', async () => {
    let gone = true;
    const early = setup([route(1)], [], () => gone);
    expect(await routeAndDial(early.options)).to.deep.equal({ kind: 'client-gone' });
    expect(early.released.map((r) => r.instance)).to.deep.equal([1]);
    expect(early.events.opened).to.deep.equal([]);

    gone = false;
    const d = dialed();
    const late = setup([route(3)], [() => ({ promise: Promise.resolve(d).then((x) => ((gone = true), x)), abort: () => undefined })], () => gone);
    expect(await routeAndDial(late.options)).to.deep.equal({ kind: 'client-gone' });
    expect(d.socket.destroyed).to.equal(true);
    expect(late.events.closed.map((c) => [c.route.instance, c.stats.ok])).to.deep.equal([[3, true]]);
  });
});
