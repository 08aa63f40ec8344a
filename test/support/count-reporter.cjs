// The spec reporter, plus a one-line "passed failed" summary written to
// $EXITPOOL_TEST_SUMMARY so .ci/run can print the real counts without parsing prose, and the
// wall time each category of tests took (dist/test/<category>/…), printed at the end.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');
const { EVENT_RUN_END, EVENT_TEST_PASS, EVENT_TEST_FAIL, EVENT_TEST_BEGIN, EVENT_TEST_END, EVENT_HOOK_BEGIN, EVENT_HOOK_END } = Mocha.Runner.constants;

/** unit, component, e2e, browser: the folder under test/ a test file lives in. */
function categoryOf(file) {
  if (!file) return null;
  const parts = path.normalize(file).split(path.sep);
  const at = parts.lastIndexOf('test');
  return at >= 0 && at + 1 < parts.length - 1 ? parts[at + 1] : null;
}

function formatMs(ms) {
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
}

class CountReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    let passed = 0;
    let failed = 0;
    // First start and last end of anything run for a category (tests and their hooks).
    const spans = new Map();
    const touch = (runnable, edge) => {
      const category = categoryOf(runnable.file ?? runnable.parent?.file);
      if (!category) return;
      const now = Date.now();
      const span = spans.get(category) ?? { start: now, end: now, tests: 0 };
      if (edge === 'begin') span.start = Math.min(span.start, now);
      else span.end = Math.max(span.end, now);
      spans.set(category, span);
    };
    runner.on(EVENT_TEST_BEGIN, (t) => touch(t, 'begin'));
    runner.on(EVENT_HOOK_BEGIN, (h) => touch(h, 'begin'));
    runner.on(EVENT_TEST_END, (t) => {
      touch(t, 'end');
      const span = spans.get(categoryOf(t.file));
      if (span) span.tests += 1;
    });
    runner.on(EVENT_HOOK_END, (h) => touch(h, 'end'));
    runner.on(EVENT_TEST_PASS, () => { passed += 1; });
    runner.on(EVENT_TEST_FAIL, () => { failed += 1; });
    runner.once(EVENT_RUN_END, () => {
      const file = process.env.EXITPOOL_TEST_SUMMARY;
      if (file) fs.writeFileSync(file, `${passed} ${failed}\n`);
    });
    this.spans = spans;
  }

  epilogue() {
    super.epilogue();
    if (this.spans.size === 0) return;
    const parts = [...this.spans].map(([category, s]) => `${category} ${formatMs(s.end - s.start)} (${s.tests} tests)`);
    process.stdout.write(`  wall time by category: ${parts.join(', ')}\n\n`);
  }
}
module.exports = CountReporter;
