import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../../shared/version.js';

/**
 * clients/test-pages: the corpus both clients' block detection is tested on (ordinary pages,
 * and each vendor's challenge), read by test/unit/client-node.test.ts and the Python client's
 * tests alike.
 */
export interface TestPageCase {
  name: string;
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  /** A file under clients/test-pages/pages, or `body` inline. */
  page?: string;
  body?: string;
  url: string;
  redirected_to?: string[];
  expect: null | { kind: string; vendor?: string; retry_after_seconds?: number };
  /** The domain a report names; null: none (the API would refuse the host); absent: not checked. */
  report_domain?: string | null;
}

export const TEST_PAGES_DIR = path.join(packageRoot(), 'clients', 'test-pages');

export function testPageCases(): TestPageCase[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(TEST_PAGES_DIR, 'pages.json'), 'utf8')) as { cases: TestPageCase[] };
  return manifest.cases;
}

export function bodyOf(c: TestPageCase): string {
  return c.page === undefined ? (c.body ?? '') : fs.readFileSync(path.join(TEST_PAGES_DIR, 'pages', c.page), 'utf8');
}
