import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { findRepoRoot } from '../../internal/testnet/repo-root.js';
import { curlSocks } from '../support/clients/curl.js';
import { TEST_ADMIN_PASSWORD, TEST_PROXY_TOKEN, startService, type RunningService } from '../support/fixtures/service.js';
import { startRedis, type RunningRedis } from '../support/processes/redis-server.js';
import { pollUntil } from '../support/waiting.js';

/**
 * The dashboard in Debian's Chromium (headless, driven by playwright-core) against the real
 * service on the private Tor network. The service serves the dashboard that Vite built into
 * the same out dir as these compiled tests (<outDir>/dashboard).
 */

const CHROMIUM = '/usr/bin/chromium';
const IMAGES_DIR = path.join(findRepoRoot(), 'docs', 'images');
const BUILT_INDEX = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dashboard', 'index.html');
const VIEWPORT = { width: 1280, height: 800 };
const SCHEMES = ['light', 'dark'] as const;

interface InstanceRow {
  id: number;
  ready: boolean;
  state: string;
  exit: string;
  retired: string;
}

/** Console errors and uncaught page errors: the dashboard must produce none. */
function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  return errors;
}

/** Polls `probe` until it returns a value other than undefined. */
// Browser-side snippets are strings: the root tsconfig has no DOM library.
const READ_INSTANCE_ROWS = `[...document.querySelectorAll('table.instances tbody tr[data-instance]')].map((r) => {
  const exit = r.querySelector('[data-exit-kind]');
  return {
    id: Number(r.getAttribute('data-instance')),
    ready: r.getAttribute('data-ready') === 'true',
    state: r.getAttribute('data-state') || '',
    exit: exit ? exit.getAttribute('data-exit-ip') || '' : '',
    retired: exit ? exit.getAttribute('data-retired-ip') || '' : '',
  };
})`;

async function instanceRows(page: Page): Promise<InstanceRow[]> {
  return page.evaluate<InstanceRow[]>(READ_INSTANCE_ROWS);
}

async function goTo(page: Page, view: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: view, exact: true }).click();
  await page.locator('#view-title', { hasText: view }).waitFor();
}

async function streamLive(page: Page): Promise<void> {
  await page.locator('.stream-status', { hasText: 'live' }).waitFor({ timeout: 30_000 });
}

async function screenshot(page: Page, name: string): Promise<void> {
  for (const colorScheme of SCHEMES) {
    await page.emulateMedia({ colorScheme });
    // Let charts re-read their colours and the notices fade.
    await page.waitForTimeout(400);
    await page.screenshot({ path: path.join(IMAGES_DIR, `dashboard-${name}-${colorScheme}.png`), fullPage: true });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

/** Requests through the pool until stopped, so rates and charts show traffic in the screenshots. */
function backgroundTraffic(svc: RunningService): { stop(): Promise<void> } {
  let running = true;
  const keys = ['alice', 'bob', 'carol'];
  const loop = (async () => {
    for (let i = 0; running; i++) {
      await curlSocks(svc.socksPort, keys[i % keys.length] as string, TEST_PROXY_TOKEN, svc.whoamiUrl);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** Makes the tab look hidden or visible to the page (what a browser does when the tab is switched away). */
async function setHidden(page: Page, hidden: boolean): Promise<void> {
  await page.evaluate(
    hidden
      ? `Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
         Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
         document.dispatchEvent(new Event('visibilitychange'));`
      : `delete document.visibilityState; delete document.hidden;
         document.dispatchEvent(new Event('visibilitychange'));`,
  );
}

describe('dashboard in a real browser (Chromium, live service)', function () {
  this.timeout(300_000);
  let svc: RunningService;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let errors: string[];
  let base: string;

  before(async () => {
    // Fail, never skip: a missing browser or an unbuilt dashboard is a broken set-up.
    if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/setup.sh (installs Debian's chromium)`);
    if (!fs.existsSync(BUILT_INDEX)) throw new Error(`the dashboard is not built (${BUILT_INDEX}): run npm run build`);
    fs.mkdirSync(IMAGES_DIR, { recursive: true });
    [svc, browser] = await Promise.all([
      // Most countries of the test network have one exit: the per-country floor would withhold
      // the ban the exits view lifts (the floors are proven in test/e2e/verdicts.test.ts).
      startService({ POOL_SIZE: '2', MIN_ELIGIBLE_EXITS_PER_COUNTRY: '0' }),
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] }),
    ]);
    base = `http://127.0.0.1:${svc.apiPort}`;
    // Only until the API answers: the instances are watched bootstrapping in the browser.
    await svc.waitReady(0);
    context = await browser.newContext({ viewport: VIEWPORT, colorScheme: 'light' });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    page = await context.newPage();
    errors = watchErrors(page);
  });

  after(async () => {
    await browser?.close();
    if (svc) expect(await svc.stop()).to.equal(0);
  });

  afterEach(function () {
    // Checked after every test, so the failing step is named.
    if (errors?.length) {
      const found = errors.splice(0);
      throw new Error(`browser console errors during "${this.currentTest?.title}":\n${found.join('\n')}`);
    }
  });

  it('serves the page with cacheable hashed assets', async () => {
    const index = await fetch(`${base}/`);
    expect(index.status).to.equal(200);
    expect(index.headers.get('cache-control')).to.equal('no-cache');
    const html = await index.text();
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(asset, html).to.be.a('string');
    const js = await fetch(base + (asset as string));
    expect(js.status).to.equal(200);
    expect(js.headers.get('cache-control')).to.match(/immutable/);
    // A deep link falls back to the page; /api/ never does.
    expect((await fetch(`${base}/instances`)).status).to.equal(200);
    expect((await fetch(`${base}/api/nope`)).status).to.equal(401);
  });

  it('signs in', async () => {
    await page.goto(`${base}/`);
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await screenshot(page, 'signin');
    await page.getByLabel('Password').fill(TEST_ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    await streamLive(page);
    const stored = await page.evaluate<string | null>(`sessionStorage.getItem('exitpool.credential')`);
    expect(JSON.parse(stored ?? '{}')).to.include({ user: 'admin' });
  });

  it('sees the instances become ready with exit IPs', async () => {
    await goTo(page, 'Instances');
    const rows = await pollUntil('two ready instances with exits', async () => {
      const r = await instanceRows(page);
      return r.length === 2 && r.every((x) => x.ready && /^127\.\d+\.\d+\.\d+$/.test(x.exit)) ? r : undefined;
    }, 120_000);
    expect(rows.map((r) => r.id)).to.deep.equal([0, 1]);
    // Traffic confirms exits and gives the other views something to show.
    for (const key of ['alice', 'bob', 'carol', 'dave']) {
      const r = await curlSocks(svc.socksPort, key, TEST_PROXY_TOKEN, svc.whoamiUrl);
      expect(r.code, r.stderr).to.equal(0);
    }
    await page.locator('table.instances .tag-ok', { hasText: 'confirmed' }).first().waitFor({ timeout: 30_000 });
  });

  it('rotates an instance and sees its exit change (or the retired exit, then a new one)', async () => {
    const before = (await instanceRows(page)).find((r) => r.id === 0);
    expect(before?.exit).to.match(/^127\./);
    const old = before!.exit;
    const row = page.locator('tr[data-instance="0"]');
    await row.getByRole('button', { name: 'Rotate instance 0' }).click();
    const dialog = page.getByRole('dialog', { name: 'Rotate instance 0?' });
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Rotate', exact: true }).click();
    let sawRetired = false;
    const now = await pollUntil('a new exit on instance 0', async () => {
      const r = (await instanceRows(page)).find((x) => x.id === 0);
      if (r === undefined) return undefined;
      if (r.exit === '' && r.retired === old) sawRetired = true;
      if (r.exit !== '' && (r.exit !== old || sawRetired)) return r.exit;
      return undefined;
    }, 60_000, 100);
    expect(sawRetired || now !== old, `exit ${old} → ${now}`).to.equal(true);
    await dialog.waitFor({ state: 'detached' });
  });

  it('marks an instance whose tor stopped answering (SIGSTOP), and clears the mark when it answers again', async () => {
    const view = await svc.api('/api/instances/1', { bearer: await svc.login() });
    const { pid } = (await view.json()) as { pid: number };
    expect(pid, 'tor pid of instance 1').to.be.above(0);
    const tag = page.locator('tr[data-instance="1"] .tag-bad', { hasText: 'not answering' });
    process.kill(pid, 'SIGSTOP');
    try {
      await tag.waitFor({ timeout: 30_000 });
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await tag.waitFor({ state: 'detached', timeout: 30_000 });
  });

  it('resizes the pool up and down', async () => {
    const resize = async (size: number): Promise<void> => {
      await page.getByLabel('Pool size').fill(String(size));
      await page.getByRole('button', { name: 'Resize', exact: true }).click();
      const dialog = page.getByRole('dialog', { name: `Resize the pool to ${size}?` });
      await dialog.getByRole('button', { name: 'Resize', exact: true }).click();
      await dialog.waitFor({ state: 'detached' });
    };
    await resize(3);
    await pollUntil('instance 2 ready', async () => {
      const r = await instanceRows(page);
      return r.length === 3 && r[2]!.ready ? true : undefined;
    }, 120_000);
    await resize(2);
    await pollUntil('two instances again', async () => ((await instanceRows(page)).length === 2 ? true : undefined), 60_000);
  });

  it('creates a token (secret shown once, copyable) and revokes it', async () => {
    await goTo(page, 'Tokens');
    await page.locator('tr[data-token]').first().waitFor();
    await page.getByLabel('Name').fill('browser-test');
    await page.getByLabel('Scope').selectOption('proxy');
    await page.getByRole('button', { name: 'Create token' }).click();
    const dialog = page.getByRole('dialog', { name: 'Token created' });
    const secret = (await dialog.locator('[data-secret]').textContent())?.trim() ?? '';
    expect(secret).to.match(/^tp_[A-Za-z0-9]{22}$/);
    await dialog.getByRole('button', { name: 'Copy' }).click();
    await dialog.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).to.equal(secret);
    // The secret works until revoked.
    expect((await svc.api('/api/sessions/nobody', { bearer: secret })).status).to.equal(404);
    await dialog.getByRole('button', { name: 'Done' }).click();
    await dialog.waitFor({ state: 'detached' });
    const row = page.locator('tr[data-token]', { hasText: 'browser-test' });
    await row.waitFor();
    expect(await page.content()).to.not.contain(secret);

    await row.getByRole('button', { name: 'Revoke token browser-test' }).click();
    const confirm = page.getByRole('dialog', { name: 'Revoke token browser-test?' });
    await confirm.getByRole('button', { name: 'Revoke', exact: true }).click();
    await row.waitFor({ state: 'detached' });
    expect((await svc.api('/api/sessions/nobody', { bearer: secret })).status).to.equal(401);
  });

  it('shows the audit events of those actions, and new ones arrive live', async () => {
    await goTo(page, 'Events');
    const rows = page.locator('table.events tbody tr');
    for (const text of ['instance 0 rotating', 'pool resized from 2 to 3', 'pool resized from 3 to 2', 'issued', 'revoked', 'admin signed in']) {
      await rows.filter({ hasText: text }).first().waitFor({ timeout: 15_000 });
    }
    // Made elsewhere while the view is open: it must appear without a reload.
    const jwt = await svc.login();
    const created = await svc.api('/api/tokens', { method: 'POST', bearer: jwt, body: { name: 'live-event-check', scope: 'admin' } });
    expect(created.status).to.equal(201);
    const { id } = (await created.json()) as { id: string };
    await rows.filter({ hasText: `token ${id} (admin) issued` }).waitFor({ timeout: 15_000 });
    expect((await svc.api(`/api/tokens/${id}`, { method: 'DELETE', bearer: jwt })).status).to.equal(204);
    await rows.filter({ hasText: `token ${id} (admin) revoked` }).waitFor({ timeout: 15_000 });
    // Filter by type.
    await page.getByRole('button', { name: 'resize', exact: true }).click();
    await pollUntil('only resize events', async () => {
      const types = await page.evaluate<string[]>(`[...document.querySelectorAll('table.events tbody tr')].map((e) => e.getAttribute('data-event-type'))`);
      return types.length >= 2 && types.every((t) => t === 'resize') ? true : undefined;
    }, 60_000);
    await page.getByRole('button', { name: 'all', exact: true }).click();
  });

  it('lists sessions with their exits, filters them by country, rotates one and deletes one', async () => {
    // A session that asks for the country instance 1 leaves from (no exit needs assigning).
    const jwt = await svc.login();
    const country = ((await (await svc.api('/api/instances/1', { bearer: jwt })).json()) as { assigned_exit: { country: string } }).assigned_exit.country;
    const erin = await curlSocks(svc.socksPort, `erin-country-${country}`, TEST_PROXY_TOKEN, svc.whoamiUrl);
    expect(erin.code, erin.stderr).to.equal(0);
    // And one in another country, which the filter must hide: instance 0's, unless both instances
    // happen to leave from the same country (two exits are in us), then one an instance is given.
    const countryOf0 = ((await (await svc.api('/api/instances/0', { bearer: jwt })).json()) as { assigned_exit: { country: string } }).assigned_exit.country;
    const other = countryOf0 !== country ? countryOf0 : (svc.net.exits.find((e) => e.egressCountry !== country)?.egressCountry as string);
    const frank = await curlSocks(svc.socksPort, `frank-country-${other}`, TEST_PROXY_TOKEN, svc.whoamiUrl);
    expect(frank.code, frank.stderr).to.equal(0);
    await goTo(page, 'Sessions');
    await page.locator('tr[data-session="alice"]').waitFor({ timeout: 15_000 });
    await page.locator('tr[data-session="erin"]').waitFor({ timeout: 15_000 });
    await page.locator('tr[data-session="frank"]').waitFor({ timeout: 15_000 });
    await page.locator('select[name="session-country"]').selectOption(country);
    const listed = await pollUntil('only sessions in the country listed', async () => {
      const rows = await page.evaluate<string[]>(`[...document.querySelectorAll('tr[data-session] [data-country]')].map((e) => e.getAttribute('data-country'))`);
      const all = await page.locator('tr[data-session]').count();
      return rows.length === all && rows.every((c) => c.split(' ').includes(country)) ? rows : undefined;
    }, 60_000);
    expect(listed.length).to.be.at.least(1);
    expect(await page.locator('tr[data-session="erin"]').textContent()).to.include(`asked ${country}`);
    expect(await page.locator('tr[data-session="frank"]').count(), `frank (in ${other}) hidden by the ${country} filter`).to.equal(0);
    await page.locator('select[name="session-country"]').selectOption(other);
    await page.locator('tr[data-session="frank"]').waitFor({ timeout: 15_000 });
    await page.locator('tr[data-session="erin"]').waitFor({ state: 'detached', timeout: 15_000 });
    await page.locator('select[name="session-country"]').selectOption('');
    await page.locator('tr[data-session="erin"]').waitFor({ timeout: 15_000 });
    await page.getByRole('searchbox').fill('ali');
    await pollUntil('only alice listed', async () => ((await page.locator('tr[data-session]').count()) === 1 ? true : undefined), 60_000);
    await page.getByRole('button', { name: 'Rotate session alice' }).click();
    await page.locator('.notice', { hasText: 'Session alice moved to instance' }).waitFor({ timeout: 20_000 });
    await page.getByRole('searchbox').fill('');
    await page.getByRole('button', { name: 'Delete session dave' }).click();
    await page.getByRole('dialog', { name: 'Delete session dave?' }).getByRole('button', { name: 'Delete', exact: true }).click();
    await page.locator('tr[data-session="dave"]').waitFor({ state: 'detached', timeout: 15_000 });
  });

  it('shows the exit catalog with each instance on its own exit, and lifts a ban', async () => {
    await goTo(page, 'Exits');
    await page.locator('[data-exits-summary]', { hasText: '2 exits in use' }).waitFor({ timeout: 15_000 });
    const assigned = await page.evaluate<string[]>(`[...document.querySelectorAll('tr[data-exit] [data-instances]')].map((e) => e.textContent.trim()).filter((t) => t !== '—')`);
    expect(assigned.sort()).to.deep.equal(['0', '1']);
    // Two independent parties (tokens of two owners) each report a captcha through one exit: it is
    // banned for everyone.
    const jwt = await svc.login();
    const s = (await (await svc.api('/api/sessions/bob', { bearer: jwt })).json()) as { instance: number };
    const exitOf = (await (await svc.api(`/api/instances/${s.instance}`, { bearer: jwt })).json()) as { assigned_exit: { fingerprint: string; nickname: string } };
    const reporters: string[] = [];
    for (const owner of ['acme', 'globex']) {
      const issued = await svc.api('/api/tokens', { method: 'POST', bearer: jwt, body: { name: owner, scope: 'proxy', owner } });
      reporters.push(((await issued.json()) as { secret: string }).secret);
    }
    for (const [i, token] of reporters.entries()) {
      // Each reporter's own session on that instance (a report moves the session it names).
      let key = '';
      for (let n = 0; n < 20 && key === ''; n++) {
        const candidate = `reporter-${i}-${n}`;
        expect((await curlSocks(svc.socksPort, candidate, token, svc.whoamiUrl)).code).to.equal(0);
        const at = (await (await svc.api(`/api/sessions/${candidate}`, { bearer: jwt })).json()) as { instance: number };
        if (at.instance === s.instance) key = candidate;
      }
      expect(key, `a session of reporter ${i} on instance ${s.instance}`).to.not.equal('');
      expect((await svc.api(`/api/sessions/${key}/failure`, { method: 'POST', bearer: token, body: { kind: 'captcha' } })).status).to.equal(200);
    }
    const lift = page.getByRole('button', { name: `Lift the ban of ${exitOf.assigned_exit.nickname}` });
    await lift.waitFor({ timeout: 20_000 });
    await lift.click();
    await page.getByRole('dialog', { name: `Lift the ban of ${exitOf.assigned_exit.nickname}?` }).getByRole('button', { name: 'Lift ban' }).click();
    await lift.waitFor({ state: 'detached', timeout: 15_000 });
    const exits = (await (await svc.api('/api/exits', { bearer: jwt })).json()) as { bans: unknown[] };
    expect(exits.bans).to.deep.equal([]);
  });

  it('closes the stream and stops polling while the tab is hidden, and resumes when shown', async () => {
    // The Sessions view is open: it polls every 3 s while visible.
    const requests: string[] = [];
    const onRequest = (r: { url(): string }): void => {
      if (r.url().includes('/api/')) requests.push(r.url());
    };
    await setHidden(page, true);
    await page.locator('.stream-status', { hasText: 'paused (tab hidden)' }).waitFor();
    page.on('request', onRequest);
    await page.waitForTimeout(4_000);
    page.off('request', onRequest);
    expect(requests, 'requests from a hidden tab').to.deep.equal([]);
    await setHidden(page, false);
    await streamLive(page);
  });

  it('draws the timeline charts in both ranges', async () => {
    await goTo(page, 'Timeline');
    await page.locator('.chart canvas').first().waitFor({ timeout: 20_000 });
    expect(await page.locator('.chart').count()).to.equal(4);
    await page.getByRole('button', { name: 'Long (per minute)' }).click();
    await page.locator('.toolbar .muted', { hasText: /^\d+ points$/ }).waitFor();
    await page.getByRole('button', { name: 'Fine (per second)' }).click();
    await page.locator('.chart canvas').first().waitFor();
  });

  it('is keyboard accessible: dialogs take focus and Escape closes them', async () => {
    await goTo(page, 'Instances');
    const rotate = page.getByRole('button', { name: 'Rotate instance 1' });
    await rotate.focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Rotate instance 1?' });
    await dialog.waitFor();
    expect(await page.evaluate<boolean>(`!!document.activeElement && !!document.activeElement.closest('dialog')`)).to.equal(true);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    expect(await page.evaluate<string | null>(`document.activeElement && document.activeElement.getAttribute('aria-label')`)).to.equal('Rotate instance 1');
  });

  it('fits a 1024-pixel-wide window without horizontal page scrolling', async () => {
    await page.setViewportSize({ width: 1024, height: 768 });
    for (const view of ['Overview', 'Instances', 'Sessions', 'Events', 'Tokens', 'Timeline']) {
      await goTo(page, view);
      await page.waitForTimeout(300);
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
      expect(overflow, `${view} overflows by ${overflow}px`).to.be.at.most(0);
    }
    await page.setViewportSize(VIEWPORT);
  });

  it('saves screenshots of each view, light and dark', async () => {
    const traffic = backgroundTraffic(svc);
    try {
      await goTo(page, 'Overview');
      await pollUntil('traffic in the rates', async () => {
        const rate = await page.locator('[data-stat="rate-requests"] .card-value').textContent();
        return rate !== null && rate.trim() !== '0' ? true : undefined;
      }, 30_000);
      await page.waitForTimeout(4_000);
      for (const view of ['Overview', 'Instances', 'Exits', 'Sessions', 'Events', 'Tokens', 'Timeline']) {
        await goTo(page, view);
        if (view === 'Instances') await page.getByRole('button', { name: 'Details of instance 0' }).click();
        if (view === 'Timeline') await page.locator('.chart canvas').first().waitFor();
        await page.waitForTimeout(500);
        await screenshot(page, view.toLowerCase());
      }
    } finally {
      await traffic.stop();
    }
  });

  it('signs out when the live stream ends with signed-out (the credential was revoked or its sign-in expired)', async () => {
    const ctx = await browser.newContext({ viewport: VIEWPORT });
    const login = (await (await svc.api('/api/auth/login', { method: 'POST', body: { user: 'admin', password: TEST_ADMIN_PASSWORD } })).json()) as { token: string; expires: number; user: string };
    await ctx.addInitScript(`if (!sessionStorage.getItem('seeded')) { sessionStorage.setItem('seeded', '1'); sessionStorage.setItem('exitpool.credential', ${JSON.stringify(JSON.stringify(login))}); }`);
    const p = await ctx.newPage();
    const pageErrors = watchErrors(p);
    // The server's last frames of a stream whose credential ended (workers/api/sse-hub.ts).
    let streams = 0;
    await p.route('**/api/stream?**', async (route) => {
      streams += 1;
      await route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream; charset=utf-8' }, body: 'retry: 2000\n\nevent: signed-out\ndata: {"reason":"revoked"}\n\n' });
    });
    await p.goto(`${base}/#/overview`);
    await p.getByRole('button', { name: 'Sign in' }).waitFor();
    await p.locator('.notice-text', { hasText: 'the credential was revoked' }).waitFor();
    expect(await p.evaluate<string | null>(`sessionStorage.getItem('exitpool.credential')`)).to.equal(null);
    // Signed out for good: no reconnect after the final event.
    await p.waitForTimeout(2500);
    expect(streams).to.equal(1);
    await ctx.close();
    expect(pageErrors).to.deep.equal([]);
  });

  it('treats a 403 as "not allowed" without signing out', async () => {
    // A proxy-scope token in place of the sign-in credential: admin routes answer 403.
    const ctx = await browser.newContext({ viewport: VIEWPORT });
    const credential = JSON.stringify({ token: TEST_PROXY_TOKEN, expires: Math.floor(Date.now() / 1000) + 3600, user: 'proxy' });
    await ctx.addInitScript(`sessionStorage.setItem('exitpool.credential', ${JSON.stringify(credential)})`);
    const p = await ctx.newPage();
    const pageErrors = watchErrors(p);
    await p.goto(`${base}/#/tokens`);
    await p.locator('.error-text', { hasText: 'not allowed' }).first().waitFor();
    await p.locator('.stream-status', { hasText: 'not allowed' }).waitFor();
    expect(await p.getByRole('button', { name: 'Sign out' }).isVisible()).to.equal(true);
    expect(await p.evaluate<string | null>(`sessionStorage.getItem('exitpool.credential')`)).to.equal(credential);
    await ctx.close();
    // The browser reports each refused request itself; nothing else may appear.
    expect(pageErrors.filter((e) => !/status of 403/.test(e))).to.deep.equal([]);
  });

  it('signs out on a 401 (credential no longer valid)', async () => {
    const ctx = await browser.newContext({ viewport: VIEWPORT });
    const credential = JSON.stringify({ token: 'not-a-valid-jwt', expires: Math.floor(Date.now() / 1000) + 3600, user: 'admin' });
    await ctx.addInitScript(`if (!sessionStorage.getItem('seeded')) { sessionStorage.setItem('seeded', '1'); sessionStorage.setItem('exitpool.credential', ${JSON.stringify(credential)}); }`);
    const p = await ctx.newPage();
    const pageErrors = watchErrors(p);
    await p.goto(`${base}/#/overview`);
    await p.getByRole('button', { name: 'Sign in' }).waitFor();
    await p.locator('.notice-text', { hasText: 'no longer valid' }).waitFor();
    expect(await p.evaluate<string | null>(`sessionStorage.getItem('exitpool.credential')`)).to.equal(null);
    await ctx.close();
    expect(pageErrors.filter((e) => !/status of 401/.test(e))).to.deep.equal([]);
  });

  it('signs out on request', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    expect(await page.evaluate<string | null>(`sessionStorage.getItem('exitpool.credential')`)).to.equal(null);
  });

  describe('on a node of a fleet (two nodes on one Redis)', () => {
    let redis: RunningRedis;
    const nodes: RunningService[] = [];
    before(async () => {
      redis = await startRedis();
      nodes.push(...(await Promise.all(['dash-a', 'dash-b'].map((name) => startService({ POOL_SIZE: '1', STATE_STORE: `${redis.url}/dashboard`, NODE_NAME: name, NODE_LEASE: '3s' })))));
      await Promise.all(nodes.map((n) => n.waitReady(1)));
    });
    after(async () => {
      for (const n of nodes) expect(await n.stop()).to.equal(0);
      await redis?.stop();
    });

    it('names the node and the fleet in the exit supply, and the other node’s exit by its name', async () => {
      const [a] = nodes as [RunningService, RunningService];
      const ctx = await browser.newContext({ viewport: VIEWPORT });
      const p = await ctx.newPage();
      const pageErrors = watchErrors(p);
      await p.goto(`http://127.0.0.1:${a.apiPort}/`);
      await p.getByLabel('Password').fill(TEST_ADMIN_PASSWORD);
      await p.getByRole('button', { name: 'Sign in' }).click();
      await p.getByRole('button', { name: 'Sign out' }).waitFor();
      await goTo(p, 'Exits');
      await p.locator('[data-fleet]', { hasText: 'Node dash-a of 2 in the fleet (also dash-b)' }).waitFor({ timeout: 20_000 });
      // node dash-b's one exit, held by it, is named in the row of that exit.
      const held = p.locator('[data-instances][data-held-by="dash-b"]', { hasText: 'node dash-b' });
      await held.waitFor({ timeout: 20_000 });
      expect(await held.count()).to.equal(1);
      await screenshot(p, 'exits-fleet');
      await ctx.close();
      expect(pageErrors).to.deep.equal([]);
    });
  });

  describe('with spares (WARM_SPARES)', () => {
    let spared: RunningService;
    before(async () => {
      spared = await startService({ POOL_SIZE: '1', WARM_SPARES: '1', AUTH_DISABLED: '1' });
      await spared.waitReady(1);
    });
    after(async () => {
      if (spared) expect(await spared.stop()).to.equal(0);
    });

    it('tags the spare, counts it apart from the pool, and shows it in use once a rotation takes it', async () => {
      const ctx = await browser.newContext({ viewport: VIEWPORT });
      const p = await ctx.newPage();
      const pageErrors = watchErrors(p);
      await p.goto(`http://127.0.0.1:${spared.apiPort}/`);
      await streamLive(p);
      await p.locator('[data-stat="size"] .card-value', { hasText: '1' }).waitFor({ timeout: 30_000 });
      await p.locator('[data-stat="spares"] .card-value', { hasText: '1' }).waitFor({ timeout: 60_000 });
      expect(await p.locator('[data-stat="spares"] .card-note').textContent()).to.equal('of 1; 0 in use');
      await goTo(p, 'Instances');
      await p.locator('tr[data-instance="1"][data-spare="true"] [data-spare-tag="warm"]').waitFor({ timeout: 30_000 });
      expect(await p.locator('tr[data-instance="0"] [data-spare-tag]').count(), 'the pool’s instance is no spare').to.equal(0);
      // The pool's one instance carries a session; rotating it takes the spare.
      expect((await curlSocks(spared.socksPort, 'busy', '', spared.whoamiUrl)).code).to.equal(0);
      const r = await fetch(`http://127.0.0.1:${spared.apiPort}/api/sessions/busy/rotate`, { method: 'POST' });
      expect(((await r.json()) as { instance: number }).instance).to.equal(1);
      await p.locator('tr[data-instance="1"] [data-spare-tag="in-use"]', { hasText: 'spare, in use' }).waitFor({ timeout: 30_000 });
      await goTo(p, 'Overview');
      await p.locator('[data-stat="spares"] .card-note', { hasText: '1 in use' }).waitFor({ timeout: 30_000 });
      await ctx.close();
      expect(pageErrors).to.deep.equal([]);
    });
  });

  describe('with AUTH_DISABLED', () => {
    let open: RunningService;
    before(async () => {
      open = await startService({ POOL_SIZE: '1', AUTH_DISABLED: '1' });
      await open.waitReady(1);
    });
    after(async () => {
      if (open) expect(await open.stop()).to.equal(0);
    });

    it('shows the auth-disabled tag where sign-out would be, with no sign-in', async () => {
      const ctx = await browser.newContext({ viewport: VIEWPORT });
      const p = await ctx.newPage();
      const pageErrors = watchErrors(p);
      await p.goto(`http://127.0.0.1:${open.apiPort}/`);
      await p.locator('.auth-disabled', { hasText: 'auth disabled' }).waitFor();
      await streamLive(p);
      expect(await p.getByRole('button', { name: 'Sign out' }).count()).to.equal(0);
      expect(await p.getByRole('button', { name: 'Sign in' }).count()).to.equal(0);
      await p.locator('[data-stat="ready"] .card-value', { hasText: '1' }).waitFor({ timeout: 30_000 });
      await screenshot(p, 'auth-disabled');
      await ctx.close();
      expect(pageErrors).to.deep.equal([]);
    });
  });
});
