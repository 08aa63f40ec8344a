/**
 * The Node client's loop against a fake pool (proxy, API and site in one loopback server): a
 * redirect to a challenge page that the client followed is still a block.
 */
import { expect } from 'chai';
import axios from 'axios';
import got from 'got';
import { ProxyConfiguration } from '@crawlee/core';
import { detectBlock, ExitpoolSession, StillBlockedError } from '../../clients/node/src/index.js';
import { axiosThrough } from '../../clients/node/src/axios.js';
import { ExitpoolCrawlee } from '../../clients/node/src/crawlee.js';
import { gotThroughHttpProxy } from '../../clients/node/src/got.js';
import { FakeExitpool, type FakePage } from '../support/fakes/fake-exitpool.js';

const SITE = 'http://site.test';
const CHALLENGE = 'http://geo.captcha-delivery.com/captcha/?initialCid=abc';

/**
 * `/start` redirects to DataDome's captcha host, whose page carries no signature; `/account` to
 * a login page; `/coding-challenge-2026` is an ordinary page whose path says "challenge".
 */
function site(url: URL): FakePage {
  if (url.hostname === 'geo.captcha-delivery.com') return { status: 200, body: 'One moment…' };
  switch (url.pathname) {
    case '/start':
      return { status: 302, headers: { Location: CHALLENGE } };
    case '/account':
      return { status: 302, headers: { Location: '/login' } };
    case '/contest':
      return { status: 302, headers: { Location: '/coding-challenge-2026' } };
    default:
      return { status: 200, body: 'welcome' };
  }
}

const pathsOf = (fake: FakeExitpool): string[] => fake.carried.map((c) => new URL(c.url).pathname);

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
    expect(detectBlock({ ...head, url: `${SITE}/start`, redirectedTo: [CHALLENGE] }, 'One moment')).to.deep.include({ kind: 'captcha', vendor: 'datadome', site: `${SITE}/start` });
    expect(detectBlock({ ...head, redirectedTo: [`${SITE}/login`] }, 'welcome')).to.equal(null);
    expect(detectBlock({ ...head, redirectedTo: [`${SITE}/coding-challenge-2026`] }, 'welcome'), 'a word in a path is no challenge').to.equal(null);
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
    expect(pathsOf(fake)).to.deep.equal(['/start', '/captcha/', '/start', '/captcha/']);
    expect(fake.reports).to.have.length(2);
    for (const r of fake.reports) expect(r, 'the site before the challenge host').to.deep.include({ key: 'fetch-redirect', kind: 'captcha', domain: 'site.test' });
    expect(fake.reports[0]?.reason).to.match(/redirected to datadome's challenge/);
    expect(fake.rotations).to.deep.equal(['fetch-redirect']);
  });

  it('fetch: a redirect to a path that says "challenge" is an ordinary page', async () => {
    const s = session('fetch-contest');
    try {
      expect(await (await s.fetch(`${SITE}/contest`)).text()).to.equal('welcome');
    } finally {
      await s.close();
    }
    expect(fake.reports).to.deep.equal([]);
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
    expect(pathsOf(fake)).to.deep.equal(['/start', '/captcha/', '/start', '/captcha/']);
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
    expect(pathsOf(fake)).to.deep.equal(['/start', '/captcha/', '/start', '/captcha/', '/account', '/login']);
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
    const ctx = (loadedUrl: string) => ({ request: { url: `${SITE}/start`, loadedUrl, uniqueKey: `${SITE}/start`, noRetry: false }, response: { statusCode: 200, headers: { 'content-type': 'text/plain' } }, body: 'One moment', session: { id: 's1' } });
    let failure: unknown;
    try {
      await handler(ctx(CHALLENGE)).catch((e: unknown) => (failure = e));
      await handler(ctx(`${SITE}/start`));
    } finally {
      await pool.close();
    }
    expect(String(failure)).to.match(/blocked \(captcha: redirected to datadome's challenge/);
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
      const retry = fake.carried.slice(3 + 2);
      const afterRotation = retry.map((c) => c.connection);
      expect(afterRotation.length).to.be.greaterThan(0);
      for (const c of afterRotation) expect(before.has(c), `connection ${c} opened before the rotation`).to.equal(false);
      await gotThroughHttpProxy(got, s, `${SITE}/home`);
      // The agent keeps a connection per destination host: the site's is reused, the challenge host's was another.
      const siteConnection = retry.find((c) => new URL(c.url).hostname === 'site.test')?.connection;
      expect(fake.carried.at(-1)?.connection, 'kept again after the rotation').to.equal(siteConnection);
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
