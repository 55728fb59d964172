# kiln's container image: the API (KILN_ROLE=api), the operator (KILN_ROLE=operator) or both (all).
#
# Two stages. The build stage installs every dependency from the lockfile alone (so that layer is
# cached until package-lock.json changes), compiles src/ to dist/, then drops dev dependencies and
# optional ones (embedded PostgreSQL's binaries: in a cluster kiln needs DATABASE_URL). The runtime
# stage is distroless: node and nothing else, no shell, no package manager, user 65532.
#
# The bases are pinned by digest (docs/adr/0018-container-image-and-chart.md says where the digests
# come from and how to bump them). `make image` builds it where a container engine exists.
# docker build --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#   --build-arg SOURCE=<repository URL> -t kiln .

ARG BUILD_IMAGE=docker.io/library/node:24-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12:nonroot@sha256:14d42e2511532589a7c7e01a753667a74fcc96266e137e8125006b87b0c32d0a

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
ENV npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false
# The lockfile layer: only these three files decide what is installed.
COPY package.json package-lock.json .npmrc ./
RUN npm ci
COPY nest-cli.json tsconfig.json tsconfig.build.json ./
COPY scripts/build-console.sh scripts/openapi-document.cjs ./scripts/
COPY src ./src
# The app, then the web console into dist/console/ (its API types from the app's own document).
RUN npx nest build \
 && bash scripts/build-console.sh \
 && npm prune --omit=dev --omit=optional \
 && npm cache clean --force

FROM ${RUNTIME_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=""
LABEL org.opencontainers.image.title="kiln" \
      org.opencontainers.image.description="Container-image build service for Kubernetes: a NestJS API and the operator that turns Build resources into Jobs" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="gcr.io/distroless/nodejs24-debian12:nonroot"
WORKDIR /app
COPY --from=build --chown=0:0 /src/package.json ./package.json
COPY --from=build --chown=0:0 /src/node_modules ./node_modules
COPY --from=build --chown=0:0 /src/dist ./dist
# Files owned by root, process run as 65532: the process cannot change its own code. The only
# writable place is KILN_DATA_DIR, an emptyDir the chart mounts (the root filesystem is read-only).
USER 65532:65532
ENV NODE_ENV=production \
    KILN_ROLE=all \
    KILN_DATA_DIR=/var/lib/kiln \
    PORT=8080
EXPOSE 8080
ENTRYPOINT ["/nodejs/bin/node", "dist/main.js"]
