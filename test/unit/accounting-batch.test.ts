import { expect } from 'chai';
import { AccountingBatch } from '../../workers/proxy-worker/accounting-batch.js';
import type { RouteGranted } from '../../workers/proxy/proxy-types.js';

/** The proxy worker's accounting batch (workers/proxy-worker/accounting-batch.ts). */

const route = (key: string | null, instance = 0): RouteGranted => ({ ok: true, instance, host: '127.0.0.1', port: 9050, key, session: key === null ? null : 1, lease: true, exitIp: '' });
const evidence = (host: string, credential = 'token:a') => ({ host, credential: () => credential });

describe('proxy worker: the accounting batch', () => {
  it("sends one reached record per session, instance, host and credential between two flushes, the newest, in the order of each one's latest start", async () => {
    const batch = new AccountingBatch(10);
    const open = batch.events.connectionOpened;
    open(route('s1'), 'socks', evidence('shop.example'));
    open(route('s2'), 'socks', evidence('news.example'));
    await new Promise((resolve) => setTimeout(resolve, 5));
    const before = Date.now();
    for (let i = 0; i < 100; i++) open(route('s1'), 'socks', evidence('shop.example'));
    open(route('s1', 1), 'socks', evidence('shop.example'));
    open(route('s1'), 'socks', evidence('shop.example', 'token:b'));
    open(route('s1'), 'socks', evidence('cdn.shop.example'));
    const { reached } = batch.take();
    expect(reached.map((r) => [r.key, r.instance, r.host, r.credential])).to.deep.equal([
      ['s2', 0, 'news.example', 'token:a'],
      ['s1', 0, 'shop.example', 'token:a'],
      ['s1', 1, 'shop.example', 'token:a'],
      ['s1', 0, 'shop.example', 'token:b'],
      ['s1', 0, 'cdn.shop.example', 'token:a'],
    ]);
    expect(reached[1]?.at, 'the newest start of the hundred and one').to.be.at.least(before);
    expect(batch.isEmpty, 'taken').to.equal(true);
    expect(batch.take().reached).to.deep.equal([]);
  });

  it('records no reach for a connection without a session key or a host', () => {
    const batch = new AccountingBatch(10);
    batch.events.connectionOpened(route(null), 'socks', evidence('shop.example'));
    batch.events.connectionOpened(route('s1'), 'socks', evidence(''));
    expect(batch.isEmpty).to.equal(true);
  });
});
