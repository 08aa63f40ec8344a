#!/usr/bin/env bash
# Installs what `npm run release:build` needs beyond scripts/setup.sh, from Debian's packages,
# only when missing: buildah (assembles the image without a Docker daemon), debootstrap (makes
# its Debian root), python3-build and python3-venv (build and install the Python client with
# Debian's Python; PyPI is not reachable). Idempotent; CI runs it through release/build.sh.
set -euo pipefail

log() { printf '[release] %s\n' "$*" >&2; }

need=()
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
[ -x /usr/bin/python3 ] || need+=(python3)
for pkg in python3-build python3-venv python3-setuptools python3-wheel; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
log "apt: installing ${need[*]} (this can take a minute)"
# None of these packages runs a service, but no package install on this machine may start one
# (the policy of scripts/setup.sh): a policy-rc.d that exits 101 for the time of the install.
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
trap '[ "$created_policy" = 1 ] && $SUDO rm -f /usr/sbin/policy-rc.d' EXIT
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
