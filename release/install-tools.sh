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

# None of these packages runs a service, but no package install on this machine may start one.
bash "$(dirname "$0")/../scripts/apt-install-without-services.sh" release "${need[@]}"
