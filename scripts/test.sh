#!/usr/bin/env bash
# The one test command: installs what is missing, builds, runs every test (unit,
# property, component and end-to-end on the private Tor network).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
# What the compiler and the linter enforce is part of the suite: the type check covers the
# dashboard too (Vite strips its types without checking them), and eslint enforces the layout's
# import rules (docs/architecture.md).
npm run --silent typecheck
npx eslint .
# In-process logs (the shared test network, fixtures) at warn unless asked otherwise.
export LOG_LEVEL="${LOG_LEVEL:-warn}"
exec npx mocha "$@"
