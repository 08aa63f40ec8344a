#!/usr/bin/env bash
# The one test command: installs what is missing, builds, runs every test (unit,
# property, component and end-to-end on the private Tor network).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
# In-process logs (the shared test network, fixtures) at warn unless asked otherwise.
export LOG_LEVEL="${LOG_LEVEL:-warn}"
exec npx mocha "$@"
