#!/usr/bin/env bash
# `npm run release:build`: builds every release artifact into dist-release/ (EXITPOOL_RELEASE_OUT)
# and checks each one by installing or running it (test/release/, on the private Tor network):
#   exitpool-X.Y.Z.tgz                     the service (npm pack; prepack builds it)
#   exitpool-client-X.Y.Z.tgz              the Node client (npm pack in clients/node)
#   exitpool_client-X.Y.Z-py3-none-any.whl the Python client's wheel and sdist
#   exitpool-client-X.Y.Z.tar.gz           (python3 -m build --no-isolation, Debian's Python)
#   exitpool-X.Y.Z.oci.tar                 the image, an OCI archive (release/image.sh)
#   exitpool-X.Y.Z.sbom.spdx.json          the image's SBOM
#   SHA256SUMS, artifacts.json             checksums; what the checks read
# Every build step and every check counts: with EXITPOOL_TEST_SUMMARY set, the file gets one
# line "passed failed" (the build steps plus the mocha checks), which .ci/run adds to npm test's.
# Each step's duration goes to stderr and to dist-release/timings.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
project="$PWD"
export PATH="$project/node_modules/.bin:$PATH"
out="${EXITPOOL_RELEASE_OUT:-$project/dist-release}"
# Debian's interpreter, whose python3-* packages the Python client is built and tested with.
python=/usr/bin/python3

log() { printf '[release] %s\n' "$*" >&2; }

# Seconds since $1 (a `date +%s%N` reading), with one decimal.
seconds_since() {
  local ms=$((($(date +%s%N) - $1) / 1000000))
  printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}

steps_passed=0
steps_failed=0
failed_steps=()
# step NAME COMMAND...: runs COMMAND, times it, counts it.
step() {
  local name="$1"
  shift
  local started
  started="$(date +%s%N)"
  log "$name…"
  if "$@"; then
    steps_passed=$((steps_passed + 1))
    printf '%-16s %6s s\n' "$name" "$(seconds_since "$started")" | tee -a "$out/timings.txt" | sed 's/^/[release] done: /' >&2
  else
    steps_failed=$((steps_failed + 1))
    failed_steps+=("$name")
    printf '%-16s %6s s FAILED\n' "$name" "$(seconds_since "$started")" | tee -a "$out/timings.txt" | sed 's/^/[release] /' >&2
  fi
}

setup() {
  bash scripts/setup.sh && bash release/install-tools.sh
}

pack_service() {
  # prepack (scripts/build.sh) compiles the service, the tests and the dashboard first.
  npm pack --pack-destination "$out" --loglevel=warn >/dev/null
}

pack_node_client() {
  (cd clients/node && npm pack --pack-destination "$out" --loglevel=warn >/dev/null)
}

build_python_client() {
  # setuptools writes its egg-info beside the sources; remove only what this build made.
  local had_egg_info=0
  compgen -G 'clients/python/*.egg-info' >/dev/null && had_egg_info=1
  local status=0
  "$python" -m build --no-isolation --outdir "$out" clients/python >"$out/python-build.log" 2>&1 || status=$?
  [ "$had_egg_info" = 1 ] || rm -rf clients/python/*.egg-info clients/python/build
  [ "$status" = 0 ] || tail -n 30 "$out/python-build.log" >&2
  return "$status"
}

build_image() {
  bash release/image.sh "$version" "$out/exitpool-$version.tgz" "$out" >/dev/null
}

# What the checks read: the version and each artifact's file, when it was built.
write_manifest() {
  (cd "$out" && sha256sum -- *.tgz *.whl *.tar.gz *.oci.tar *.spdx.json >SHA256SUMS 2>/dev/null)
  node -e '
    const fs = require("node:fs");
    const [out, version] = process.argv.slice(1);
    const find = (re) => fs.readdirSync(out).find((f) => re.test(f)) ?? null;
    const esc = version.replace(/\./g, "\\.");
    const artifacts = {
      version,
      service: find(new RegExp(`^exitpool-${esc}\\.tgz$`)),
      nodeClient: find(new RegExp(`^exitpool-client-${esc}\\.tgz$`)),
      wheel: find(new RegExp(`^exitpool_client-${esc}-py3-none-any\\.whl$`)),
      sdist: find(new RegExp(`^exitpool[-_]client-${esc}\\.tar\\.gz$`)),
      image: find(new RegExp(`^exitpool-${esc}\\.oci\\.tar$`)),
      sbom: find(new RegExp(`^exitpool-${esc}\\.sbom\\.spdx\\.json$`)),
    };
    fs.writeFileSync(`${out}/artifacts.json`, JSON.stringify(artifacts, null, 2) + "\n");
  ' "$out" "$version"
}

rm -rf "$out"
mkdir -p "$out"
version="$(node -p 'require("./package.json").version')"
log "exitpool $version: artifacts in $out"

step setup setup
step service-tarball pack_service
step node-client pack_node_client
step python-client build_python_client
step image build_image
write_manifest

# The checks: mocha on the compiled test/release/ (left out of npm test by .mocharc.json).
summary="$(mktemp)"
started="$(date +%s%N)"
EXITPOOL_TEST_SUMMARY="$summary" EXITPOOL_RELEASE_OUT="$out" LOG_LEVEL="${LOG_LEVEL:-warn}" \
  npx mocha --no-config --require dist/test/support/fixtures/testnet.js --reporter ./test/support/count-reporter.cjs \
  --timeout 20000 --exit 'dist/test/release/**/*.test.js'
checks_status=$?
printf '%-16s %6s s\n' checks "$(seconds_since "$started")" | tee -a "$out/timings.txt" | sed 's/^/[release] done: /' >&2
if [ -s "$summary" ]; then
  read -r checks_passed checks_failed <"$summary"
else
  checks_passed=0
  checks_failed=1
fi
rm -f "$summary"
[ "$checks_status" -ne 0 ] && [ "$checks_failed" -eq 0 ] && checks_failed=1

passed=$((steps_passed + checks_passed))
failed=$((steps_failed + checks_failed))
[ -n "${EXITPOOL_TEST_SUMMARY:-}" ] && echo "$passed $failed" >"$EXITPOOL_TEST_SUMMARY"
log "timings (s):"
sed 's/^/[release]   /' "$out/timings.txt" >&2
[ ${#failed_steps[@]} -gt 0 ] && log "failed steps: ${failed_steps[*]}"
log "release:build: $passed passed, $failed failed (build steps and checks)"
[ "$failed" -eq 0 ]
