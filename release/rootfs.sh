#!/usr/bin/env bash
# Prints the path of a tar of the image's Debian bookworm root, made with debootstrap (minbase)
# from Debian's packages plus release/debian-packages.txt, with bookworm's updates and security
# fixes. The tar is cached outside the checkout, keyed on the package list and this script:
#   ${EXITPOOL_RELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/exitpool-release}/rootfs-bookworm-<key>.tar
# so a build with an unchanged list costs nothing here; remove the file to take newer Debian
# updates. Mirrors come from this machine's apt configuration (apt-get indextargets), or from
# EXITPOOL_DEBIAN_MIRROR and EXITPOOL_DEBIAN_SECURITY_MIRROR. Needs root.
#
# No service ever starts inside the root: /usr/sbin/policy-rc.d exits 101 before any package
# with an init script is installed, and stays in the image. Debian's tor package is installed
# but never run here; only exitpool starts tor, with its own torrc.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
suite=bookworm
log() { printf '[release] %s\n' "$*" >&2; }

cache="${EXITPOOL_RELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/exitpool-release}"
mkdir -p "$cache"
key="$(cat "$here/debian-packages.txt" "$here/rootfs.sh" | sha256sum | cut -c1-16)"
out="$cache/rootfs-$suite-$key.tar"

# One builder at a time per cache (two release builds on one machine share it).
exec 9>"$cache/.lock"
flock 9
if [ -s "$out" ]; then
  log "rootfs: cached ($out)"
  echo "$out"
  exit 0
fi

# Work directories of builds that died (the lock is ours: no build is running): never leave a
# mount behind a removed tree.
unmount_under() {
  { grep -o " $1/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
}
for stale in "$cache"/.rootfs-*; do
  [ -d "$stale" ] || continue
  unmount_under "$stale"
  rm -rf "$stale"
done

mirror_for() {
  apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Created-By: Packages' 2>/dev/null | awk -v r="$1" '$2 == r { print $1; exit }'
}
mirror="${EXITPOOL_DEBIAN_MIRROR:-$(mirror_for "$suite")}"
security="${EXITPOOL_DEBIAN_SECURITY_MIRROR:-$(mirror_for "$suite-security")}"
[ -n "$mirror" ] || { echo "rootfs: no Debian $suite mirror in this machine's apt sources; set EXITPOOL_DEBIAN_MIRROR" >&2; exit 1; }

work="$(mktemp -d "$cache/.rootfs-XXXXXX")"
root="$work/root"
cleanup() {
  # debootstrap mounts /proc and /sys in the root.
  unmount_under "$work"
  rm -rf "$work" || true
}
trap cleanup EXIT

packages="$(grep -v '^\s*#' "$here/debian-packages.txt" | xargs)"
log "rootfs: debootstrap $suite (minbase) from $mirror"
if ! debootstrap --variant=minbase --include=ca-certificates "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -n 40 "$work/debootstrap.log" >&2
  exit 1
fi
printf '#!/bin/sh\n# Nothing starts a service in this image: exitpool runs tor itself.\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
{
  echo "deb $mirror $suite main"
  echo "deb $mirror $suite-updates main"
  if [ -n "$security" ]; then echo "deb $security $suite-security main"; fi
} >"$root/etc/apt/sources.list"
if [ -z "$security" ]; then log "rootfs: no $suite-security mirror configured: the root has no security updates"; fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { DEBIAN_FRONTEND=noninteractive chroot "$root" "$@"; }
log "rootfs: apt: updates, then $packages"
# One && chain: inside a `… || …` list bash's -e does not stop at a failed step.
# shellcheck disable=SC2086
if ! { in_root apt-get update -qq &&
  in_root apt-get upgrade -y -qq &&
  in_root apt-get install -y -qq --no-install-recommends $packages &&
  in_root apt-get clean; } >"$work/apt.log" 2>&1; then
  tail -n 40 "$work/apt.log" >&2
  exit 1
fi

# Nothing may run from the root after the installs: a process there would be a service that
# policy-rc.d failed to stop.
for proc in /proc/[0-9]*; do
  if [ "$(readlink "$proc/root" 2>/dev/null)" = "$root" ]; then
    echo "rootfs: a process runs inside the root after the install: $(tr '\0' ' ' <"$proc/cmdline")" >&2
    kill -KILL "${proc#/proc/}" 2>/dev/null || true
    exit 1
  fi
done

# What a container runtime provides, or what only this build needed.
rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin "$root/var/log/"*.log "$root/var/log/apt/"*
: >"$root/etc/resolv.conf"
: >"$root/etc/machine-id" 2>/dev/null || true

tar --numeric-owner --xattrs -C "$root" -cf "$work/rootfs.tar" .
mv "$work/rootfs.tar" "$out"
# Older roots (another package list) are dead weight: keep only this one.
find "$cache" -maxdepth 1 -name "rootfs-$suite-*.tar" ! -path "$out" -delete
log "rootfs: built $out ($(du -m "$out" | cut -f1) MB)"
echo "$out"
