#!/usr/bin/env bash
# Installs Debian packages with no service started by the install: Debian's tor package would
# start a system tor that joins the public network (and prometheus, redis its servers). A
# policy-rc.d that exits 101 forbids starting any service for the time of the install (one that
# was already there is left as it is). Used by scripts/setup.sh and release/install-tools.sh.
#   apt-install-without-services.sh LOG_TAG PACKAGE...
set -euo pipefail

tag="$1"
shift
log() { printf '[%s] %s\n' "$tag" "$*" >&2; }
if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi

created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
trap '[ "$created_policy" = 1 ] && $SUDO rm -f /usr/sbin/policy-rc.d' EXIT
log "apt: updating the package lists"
$SUDO apt-get update -qq
log "apt: installing $* (this can take a minute)"
# Errors still show; debconf's note that apt-utils is missing does not.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2> >(grep -v '^debconf: delaying package configuration' >&2)
