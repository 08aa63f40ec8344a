#!/usr/bin/env bash
# Idempotent set-up for a fresh clone: npm packages, Debian's tor (without its system
# service), gcc for the testnet's LD_PRELOAD shim, curl for the end-to-end tests, and
# chromium for the browser tests. Safe to run repeatedly; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

# npm packages: reinstall when node_modules is missing or older than the lock file.
if [ ! -d node_modules ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "npm: installing packages (npm ci; this can take a minute)"
  npm ci --no-audit --no-fund --loglevel=error
fi

need=()
command -v tor >/dev/null 2>&1 || need+=(tor tor-geoipdb)
command -v tor-gencert >/dev/null 2>&1 || need+=(tor)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v curl >/dev/null 2>&1 || need+=(curl)
# HAProxy: the balancer in front of several nodes (npm test) and the side-by-side benchmark's peer.
if [ "${EXITPOOL_SETUP_BENCH:-0}" = 1 ] || [ "${EXITPOOL_SKIP_BROWSER:-0}" != 1 ]; then
  command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
fi
if [ "${EXITPOOL_SKIP_BROWSER:-0}" != 1 ]; then
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
fi
# The Python client (clients/python) is tested with Debian's Python and its packages: PyPI is
# not among the registries this project may reach. Only the tests need them (the demo does not).
if [ "${EXITPOOL_SKIP_BROWSER:-0}" != 1 ]; then
  for pkg in python3-requests python3-socks python3-httpx python3-socksio python3-scrapy python3-pytest python3-mypy python3-typeshed python3-flake8 python3-build; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  # The Redis state store's tests start their own redis-server on loopback (never the system one).
  command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
  # promtool checks and tests the alerting rules (deploy/prometheus); Debian ships it with the
  # server, whose service the install below keeps from starting (scripts/apt-install-without-services.sh).
  command -v promtool >/dev/null 2>&1 || need+=(prometheus)
fi

if [ ${#need[@]} -gt 0 ]; then
  bash scripts/apt-install-without-services.sh setup "${need[@]}"
fi
