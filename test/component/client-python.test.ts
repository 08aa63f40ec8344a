import { expect } from 'chai';
import fc from 'fast-check';
import '../support/fixtures/fuzz-runs.js';
import { parseSessionUsername } from '../../shared/api/session-username.js';
import { runPython } from '../support/clients/python.js';

describe('Python client (clients/python): its own tests, and usernames the service reads back', function () {
  this.timeout(60_000);

  it('passes its pytest suite (Debian python3 with its packages)', async () => {
    const r = await runPython(['-m', 'pytest', 'clients/python/tests', '-q', '-p', 'no:cacheprovider']);
    expect(r.code, r.stdout + r.stderr).to.equal(0);
    const passed = Number(/(\d+) passed/.exec(r.stdout)?.[1] ?? 0);
    expect(passed).to.be.at.least(16);
    expect(r.stdout).to.not.match(/failed|error/);
  });

  it('builds usernames that the service reads back as the same key and choices (property, one batch)', async () => {
    const cases = fc.sample(
      fc.record({
        key: fc.oneof(fc.string({ minLength: 1, maxLength: 30 }), fc.array(fc.constantFrom('a', 'country', 'de', 'mode', 'session', '7', 'ttl', '%'), { minLength: 1, maxLength: 5 }).map((p) => p.join('-'))),
        countries: fc.uniqueArray(fc.stringMatching(/^[a-z]{2}$/), { maxLength: 3 }),
        lifetime: fc.option(fc.integer({ min: 1, max: 86_400 }), { nil: undefined }),
        mode: fc.option(fc.constantFrom('sticky', 'rotating'), { nil: undefined }),
      }),
      200,
    );
    const r = await runPython(['test/support/python/client_scenario.py', 'usernames'], {}, JSON.stringify(cases));
    expect(r.code, r.stderr).to.equal(0);
    const usernames = JSON.parse(r.stdout) as string[];
    usernames.forEach((u, i) => {
      const c = cases[i] as (typeof cases)[number];
      const parsed = parseSessionUsername(u);
      expect(parsed.key, u).to.equal(c.key);
      expect(parsed.params.countries ?? [], u).to.deep.equal(c.countries);
      expect(parsed.params.lifetimeMs, u).to.equal(c.lifetime === undefined ? undefined : c.lifetime * 1000);
      if (c.mode !== undefined) expect(parsed.params.mode, u).to.equal(c.mode);
    });
  });
});
