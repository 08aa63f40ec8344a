/**
 * The CHANGELOG's part of a release: the "Unreleased" section's entries move under a dated
 * heading for the version, and an empty "Unreleased" heading stays on top for what comes next.
 */
import { ReleaseError } from './release-error.js';

const UNRELEASED_HEADING = /^## Unreleased[ \t]*$/m;
const ANY_SECTION_HEADING = /^## /m;

/** The heading a released section gets: `## 0.2.0 — 2026-11-25`. */
export function releaseHeading(version: string, date: string): string {
  return `## ${version} — ${date}`;
}

/** A day as the CHANGELOG writes it (UTC, YYYY-MM-DD). */
export function releaseDate(when: Date): string {
  return when.toISOString().slice(0, 10);
}

/** Whether the CHANGELOG already has a section for `version` (released or not). */
export function hasSectionFor(changelog: string, version: string): boolean {
  const escaped = version.replace(/\./g, '\\.');
  return new RegExp(`^## ${escaped}(?:[ \\t]|$)`, 'm').test(changelog);
}

/** `changelog` with its "Unreleased" entries cut to `version`, released on `date`. */
export function cutChangelog(changelog: string, version: string, date: string): string {
  const heading = UNRELEASED_HEADING.exec(changelog);
  if (!heading) throw new ReleaseError('no-unreleased-section', 'the CHANGELOG has no "## Unreleased" section to release');
  if (hasSectionFor(changelog, version)) throw new ReleaseError('section-exists', `the CHANGELOG already has a section for ${version}`);
  const bodyStart = heading.index + heading[0].length;
  const next = ANY_SECTION_HEADING.exec(changelog.slice(bodyStart));
  const bodyEnd = next ? bodyStart + next.index : changelog.length;
  const body = changelog.slice(bodyStart, bodyEnd).trim();
  if (body === '') throw new ReleaseError('empty-unreleased-section', `the CHANGELOG's "Unreleased" section is empty: nothing to release as ${version}`);
  const rest = changelog.slice(bodyEnd);
  return `${changelog.slice(0, heading.index)}## Unreleased\n\n${releaseHeading(version, date)}\n\n${body}\n${rest === '' ? '' : `\n${rest}`}`;
}
