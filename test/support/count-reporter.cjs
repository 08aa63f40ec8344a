// The spec reporter, plus a one-line "passed failed" summary written to
// $EXITPOOL_TEST_SUMMARY so .ci/run can print the real counts without parsing prose.
'use strict';
const fs = require('node:fs');
const Mocha = require('mocha');
const { EVENT_RUN_END, EVENT_TEST_PASS, EVENT_TEST_FAIL, EVENT_HOOK_END } = Mocha.Runner.constants;

class CountReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    let passed = 0;
    let failed = 0;
    runner.on(EVENT_TEST_PASS, () => { passed += 1; });
    runner.on(EVENT_TEST_FAIL, () => { failed += 1; });
    void EVENT_HOOK_END;
    runner.once(EVENT_RUN_END, () => {
      const file = process.env.EXITPOOL_TEST_SUMMARY;
      if (file) fs.writeFileSync(file, `${passed} ${failed}\n`);
    });
  }
}
module.exports = CountReporter;
