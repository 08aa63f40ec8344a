/**
 * The Node client's loop against a fake pool (proxy, API and site in one loopback server): a
 * redirect to a challenge page that the client followed is still a block.
 */
import { expect } from 'chai';
import axios from 'axios';
import got from 'got';
import { ProxyConfiguration } from '@crawlee/core';
import { axiosThrough, detectBlock, ExitpoolCrawlee, ExitpoolSession, gotThroughHttpProxy, StillBlockedError } from '../../clients/node/src/index.js';
import { FakeExitpool, type FakePage } from '../support/fakes/fake-exitpool.js';

const SITE = 'http://site.test';

/** `/start` redirects to a challenge whose page carries no marker; `/account` to a login page. */
function site(url: URL): FakePage {
  switch (url.pathname) {
    case '/start':
      return { status: 302, headers: { Location: '/sorry/wait?next=%2Fstart' } };
    case '/sorry/wait':
      return { status: 200, body: 'One moment…' };
    case '/account':
      return { status: 302, headers: { Location: '/login' } };
    default:
      return { status: 200, body: 'welcome' };
  }
}

describe('Node client: a followed redirect to a challenge is a block', function () {
  this.timeout(20_000);
  let fake: FakeExitpool;
  beforeEach(async () => {
    fake = await FakeExitpool.start(site);
  });
  afterEach(() => fake.close());
  const session = (key: string, attempts = 2): ExitpoolSession => new ExitpoolSession({ key, token: 'tp_test', proxy: fake.url, api: fake.url, attempts });

  it('detectBlock judges the URLs redirects led to, not only a 3xx Location', () => {
    const head = { status: 200, headers: { get: () => null } };
    expect(detectBlock({ ...head, redirectedTo: [`${SITE}/sorry/wait`] }, 'One moment')).to.deep.include({ kind: 'captcha' });
    expect(detectBlock({ ...head, redirectedTo: [`${SITE}/login`] }, 'welcome')).to.equal(null);
    expect(detectBlock({ ...head, redirectedTo: [] }, 'welcome')).to.equal(null);
  });

  it('fetch: follows the redirect, reports the challenge with the site, rotates, and stops at the bound', async () => {
    const s = session('fetch-redirect');
    let failure: unknown;
    try {
      await s.fetch(`${SITE}/start`).catch((e: unknown) => (failure = e));
    } finally {
      await s.close();
    }
    expect(failure, String(failure)).to.be.instanceOf(StillBlockedError);
    expect((failure as StillBlockedError).block.kind).to.equal('captcha');
    expect(fake.carried.map((c) => new URL(c.url).pathname)).to.deep.equal(['/start', '/sorry/wait', '/start', '/sorry/wait']);
    expect(fake.reports).to.have.length(2);
    for (const r of fake.reports) expect(r).to.deep.include({ key: 'fetch-redirect', kind: 'captcha', domain: 'site.test' });
    expect(fake.reports[0]?.reason).to.match(/redirected to a challenge/);
    expect(fake.rotations).to.deep.equal(['fetch-redirect']);
  });

  it('fetch: a redirect to an ordinary page is no block', async () => {
    const s = session('fetch-login');
    try {
      expect(await (await s.fetch(`${SITE}/account`)).text()).to.equal('welcome');
    } finally {
      await s.close();
    }
    expect(fake.reports).to.deep.equal([]);
    expect(fake.rotations).to.deep.equal([]);
  });

  it('axios over the HTTP proxy: the final URL of its followed redirects is judged', async () => {
    const s = session('axios-redirect');
    let failure: unknown;
    try {
      await axiosThrough(axios, s, { url: `${SITE}/start` }).catch((e: unknown) => (failure = e));
    } finally {
      await s.close();
    }
    expect(failure, String(failure)).to.be.instanceOf(StillBlockedError);
    expect(fake.carried.map((c) => new URL(c.url).pathname)).to.deep.equal(['/start', '/sorry/wait', '/start', '/sorry/wait']);
    expect(fake.reports.map((r) => [r.kind, r.domain])).to.deep.equal([
      ['captcha', 'site.test'],
      ['captcha', 'site.test'],
    ]);
    expect(fake.rotations).to.have.length(1);
    const ok = session('axios-login');
    try {
      expect((await axiosThrough(axios, ok, { url: `${SITE}/account` })).data).to.equal('welcome');
    } finally {
      await ok.close();
    }
    expect(fake.reports).to.have.length(2);
  });

  it('got over the HTTP proxy: every URL its followed redirects led to is judged', async () => {
    const s = session('got-redirect');
    let failure: unknown;
    try {
      await gotThroughHttpProxy(got, s, `${SITE}/start`).catch((e: unknown) => (failure = e));
      expect((await gotThroughHttpProxy(got, s, `${SITE}/account`)).body).to.equal('welcome');
    } finally {
      await s.close();
    }
    expect(failure, String(failure)).to.be.instanceOf(StillBlockedError);
    expect(fake.carried.map((c) => new URL(c.url).pathname)).to.deep.equal(['/start', '/sorry/wait', '/start', '/sorry/wait', '/account', '/login']);
    expect(fake.reports.map((r) => [r.kind, r.domain])).to.deep.equal([
      ['captcha', 'site.test'],
      ['captcha', 'site.test'],
    ]);
    expect(fake.rotations).to.have.length(1);
    expect(s.exit, 'read from Exitpool-Exit: the proxy answered http:// in absolute form').to.equal(fake.exitIp());
  });

  it('Crawlee: a page loaded from another URL than the one asked for is judged by where it was loaded', async () => {
    const pool = new ExitpoolCrawlee(ProxyConfiguration, { token: 'tp_test', proxy: fake.url, api: fake.url, keyFor: () => 'crawlee-redirect' });
    const handled: string[] = [];
    const handler = pool.wrap(async (ctx) => void handled.push(ctx.request.url));
    const ctx = (loadedUrl: string) => ({ request: { url: `${SITE}/start`, loadedUrl }, response: { statusCode: 200, headers: { 'content-type': 'text/plain' } }, body: 'One moment', session: { id: 's1' } });
    let failure: unknown;
    try {
      await handler(ctx(`${SITE}/sorry/wait`)).catch((e: unknown) => (failure = e));
      await handler(ctx(`${SITE}/start`));
    } finally {
      await pool.close();
    }
    expect(String(failure)).to.match(/blocked \(captcha: redirected to a challenge/);
    expect(fake.reports).to.have.length(1);
    expect(fake.reports[0]).to.deep.include({ key: 'crawlee-redirect', kind: 'captcha', domain: 'site.test' });
    expect(fake.rotations).to.have.length(1);
    expect(handled, 'the page that was not redirected reaches the handler').to.have.length(1);
  });
});

describe('Node client: agents kept per session for got and axios', function () {
  this.timeout(20_000);
  let fake: FakeExitpool;
  beforeEach(async () => {
    fake = await FakeExitpool.start(site);
  });
  afterEach(() => fake.close());

  it('reuses one kept-alive connection until a rotation, then opens a new one (through the new exit)', async () => {
    const s = new ExitpoolSession({ key: 'kept', token: 'tp_test', proxy: fake.url, api: fake.url, attempts: 2 });
    try {
      for (let i = 0; i < 3; i++) expect((await gotThroughHttpProxy(got, s, `${SITE}/home`)).body).to.equal('welcome');
      const before = new Set(fake.carried.map((c) => c.connection));
      expect(before.size, 'three requests, one connection').to.equal(1);
      // A challenge: reported, rotated, retried — the retry and what follows on a new connection.
      await gotThroughHttpProxy(got, s, `${SITE}/start`).catch(() => undefined);
      expect(fake.rotations).to.have.length(1);
      const afterRotation = fake.carried.slice(3 + 2).map((c) => c.connection);
      expect(afterRotation.length).to.be.greaterThan(0);
      for (const c of afterRotation) expect(before.has(c), `connection ${c} opened before the rotation`).to.equal(false);
      await gotThroughHttpProxy(got, s, `${SITE}/home`);
      expect(fake.carried.at(-1)?.connection, 'kept again after the rotation').to.equal(afterRotation.at(-1));
    } finally {
      await s.close();
    }
  });

  it('makes a kept agent once per name, drops every one on rotation, and forgets one whose making failed', async () => {
    const s = new ExitpoolSession({ key: 'kept-2', token: 'tp_test', proxy: fake.url, api: fake.url });
    const destroyed: string[] = [];
    let made = 0;
    const make = (name: string) => async () => {
      made += 1;
      return { name, destroy: () => destroyed.push(name) };
    };
    try {
      const a = await s.keptAgent('a', make('a'));
      expect(await s.keptAgent('a', make('a'))).to.equal(a);
      await s.keptAgent('b', make('b'));
      expect(made).to.equal(2);
      await s.rotate();
      await new Promise((resolve) => setImmediate(resolve));
      expect(destroyed.sort()).to.deep.equal(['a', 'b']);
      expect(await s.keptAgent('a', make('a'))).to.not.equal(a);
      let failures = 0;
      const failing = () => Promise.reject(new Error(`no agent ${++failures}`));
      await s.keptAgent('c', failing).catch(() => undefined);
      await new Promise((resolve) => setImmediate(resolve));
      await s.keptAgent('c', failing).catch(() => undefined);
      expect(failures, 'a failed make is tried again').to.equal(2);
    } finally {
      await s.close();
    }
  });
});
