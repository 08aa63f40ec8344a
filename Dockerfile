# syntax=docker/dockerfile:1
# exitpool: a self-healing pool of Tor exits behind one sticky proxy endpoint.

# ---- build: dev dependencies, compile the service and the dashboard ----
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=optional --no-audit --no-fund
COPY . .
RUN bash scripts/build.sh

# ---- runtime: production dependencies, Debian's tor, a non-root user ----
FROM node:24-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends tor tor-geoipdb tini ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src /tmp/exitpool-src
# The same script the packaging test runs on the development machine.
RUN bash /tmp/exitpool-src/scripts/install-runtime.sh /opt/exitpool && rm -rf /tmp/exitpool-src
RUN useradd --system --user-group --home-dir /data --shell /usr/sbin/nologin exitpool \
 && mkdir -p /data && chown exitpool:exitpool /data && chmod 0700 /data
USER exitpool
WORKDIR /opt/exitpool
# Listeners bind every interface inside the container; the tor instances stay on loopback.
ENV DATA_DIR=/data \
    BIND_HOST=0.0.0.0 \
    LOG_FORMAT=json \
    NODE_ENV=production
VOLUME ["/data"]
EXPOSE 9250 9251 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.API_PORT||8080)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# tini reaps any orphan and forwards SIGTERM to the supervisor, which stops the proxies,
# then every tor (SIGTERM, grace, SIGKILL), then exits.
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/exitpool/bin/exitpool"]
CMD ["serve"]
STOPSIGNAL SIGTERM
