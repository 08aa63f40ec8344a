import { expect } from 'chai';
import { cutChangelog, hasSectionFor, releaseDate } from '../../release/changelog-cut.js';
import { ReleaseError } from '../../release/release-error.js';

const HEAD = '# Changelog\n\nReleases are numbered X.Y.Z.\n\n';

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof ReleaseError) return e.code;
    throw e;
  }
  return 'no error';
}

describe("release: the CHANGELOG's cut", () => {
  it('moves the Unreleased entries under a dated heading and leaves an empty Unreleased on top', () => {
    const before = `${HEAD}## Unreleased\n\n- New thing.\n\nMore words.\n\n## 0.1.0 — 2026-01-02\n\n- First.\n`;
    expect(cutChangelog(before, '0.2.0', '2026-11-25')).to.equal(
      `${HEAD}## Unreleased\n\n## 0.2.0 — 2026-11-25\n\n- New thing.\n\nMore words.\n\n## 0.1.0 — 2026-01-02\n\n- First.\n`,
    );
  });

  it('cuts a CHANGELOG whose only section is Unreleased', () => {
    expect(cutChangelog(`${HEAD}## Unreleased\n\n- Only.\n`, '1.0.0', '2027-01-01')).to.equal(`${HEAD}## Unreleased\n\n## 1.0.0 — 2027-01-01\n\n- Only.\n`);
  });

  it('keeps subsections (###) inside the released section', () => {
    const after = cutChangelog(`${HEAD}## Unreleased\n\n### Added\n\n- A.\n\n## 0.1.0 — x\n`, '0.2.0', '2026-11-25');
    expect(after).to.include('## 0.2.0 — 2026-11-25\n\n### Added\n\n- A.\n\n## 0.1.0 — x\n');
  });

  const refusals: [string, string, string][] = [
    ['no Unreleased section', `${HEAD}## 0.1.0 — x\n- a\n`, 'no-unreleased-section'],
    ['an empty Unreleased section', `${HEAD}## Unreleased\n\n\n## 0.1.0 — x\n- a\n`, 'empty-unreleased-section'],
    ['a section for the version already', `${HEAD}## Unreleased\n\n- b\n\n## 0.2.0 — x\n- a\n`, 'section-exists'],
  ];
  for (const [what, text, code] of refusals) {
    it(`refuses ${what}`, () => expect(refusal(() => cutChangelog(text, '0.2.0', '2026-11-25'))).to.equal(code));
  }

  it('tells a section for 0.2.0 from one for 0.2.01 or 10.2.0', () => {
    expect(hasSectionFor('## 0.2.0 — x\n', '0.2.0')).to.equal(true);
    expect(hasSectionFor('## 0.2.0\n', '0.2.0')).to.equal(true);
    expect(hasSectionFor('## 0.2.01 — x\n## 10.2.0\n## 0x2x0\n', '0.2.0')).to.equal(false);
  });

  it('dates the release in UTC', () => {
    expect(releaseDate(new Date('2026-11-25T23:59:59-05:00'))).to.equal('2026-11-26');
  });
});
