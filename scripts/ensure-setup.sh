#!/usr/bin/env bash
# Runs scripts/setup.sh unless it already ran to the end for this package-lock.json and this
# version of the set-up script: a developer's test loop (npm run test:unit, …) then starts at
# once. The stamp lives in node_modules, so a fresh clone (or `rm -rf node_modules`) sets up again.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=node_modules/.exitpool-setup-stamp
key="$(cat package-lock.json scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] && [ "${EXITPOOL_FORCE_SETUP:-0}" != 1 ]; then
  exit 0
fi
bash scripts/setup.sh
echo "$key" > "$stamp"
