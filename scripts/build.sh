#!/usr/bin/env bash
# Compiles the service, tests and benchmarks (tsc, strict) into dist/, and the dashboard
# (Vite) into dist/dashboard when it has sources.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules ] || bash scripts/setup.sh
rm -rf dist
npx tsc -p tsconfig.json
if [ -f dashboard/vite.config.ts ]; then
  npx vite build --config dashboard/vite.config.ts --logLevel warn
fi
