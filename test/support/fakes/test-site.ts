import fs from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { TEST_PAGES_DIR } from '../clients/test-pages.js';

/**
 * A site for the clients' end-to-end tests, on loopback: the private network's exits resolve
 * every `*.testnet` name to 127.0.0.1, so `http://shop.testnet:PORT/…` reaches it through any
 * exit, and the Host header tells its names apart. It serves pages of clients/test-pages:
 *
 * - `/signin`: a 200 sign-in form with a reCAPTCHA widget (an ordinary page);
 * - `/cross`: a redirect to `www.shop.testnet`, whose every page is a 403;
 * - `/contest`: a redirect to `/coding-challenge-2026`, an ordinary page;
 * - `/to-challenge`: a redirect to DataDome's captcha host (not followed by the tests);
 * - anything else: the address it was reached from (as whoami answers).
 *
 * `hits` counts the requests per source address (which exit carried them).
 */
export class TestSite {
  readonly hits = new Map<string, number>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<TestSite> {
    const server = createServer();
    const site = new TestSite(server);
    server.on('request', (req, res) => {
      const from = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
      site.hits.set(from, (site.hits.get(from) ?? 0) + 1);
      const url = new URL(req.url ?? '/', `http://${req.headers.host ?? 'shop.testnet'}`);
      const send = (status: number, body: string, headers: Record<string, string> = {}): void => {
        res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store', ...headers });
        res.end(body);
      };
      if (url.hostname.startsWith('www.')) return send(403, 'Forbidden', { 'Content-Type': 'text/plain' });
      switch (url.pathname) {
        case '/signin':
          return send(200, fs.readFileSync(path.join(TEST_PAGES_DIR, 'pages', 'signin-recaptcha.html'), 'utf8'));
        case '/cross':
          return send(302, '', { Location: `http://www.${url.host}/landing` });
        case '/contest':
          return send(302, '', { Location: '/coding-challenge-2026' });
        case '/coding-challenge-2026':
          return send(200, fs.readFileSync(path.join(TEST_PAGES_DIR, 'pages', 'coding-challenge.html'), 'utf8'));
        case '/to-challenge':
          return send(302, '', { Location: 'https://geo.captcha-delivery.com/captcha/?initialCid=AHrlq' });
        default:
          return send(200, `${from}\n`, { 'Content-Type': 'text/plain; charset=utf-8' });
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return site;
  }

  /** The URL of `pathname` on `host` (a `*.testnet` name the exits resolve). */
  url(pathname: string, host = 'shop.testnet'): string {
    return `http://${host}:${(this.server.address() as AddressInfo).port}${pathname}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
