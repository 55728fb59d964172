# kiln's container image: the API (KILN_ROLE=api), the operator (KILN_ROLE=operator) or both (all).
#
# Two stages. The build stage installs every dependency from the lockfile alone (so that layer is
# cached until package-lock.json changes), compiles src/ to dist/, then drops dev dependencies and
# optional ones (embedded PostgreSQL's binaries: in a cluster kiln needs DATABASE_URL). The runtime
# stage is distroless: node and nothing else, no shell, no package manager, user 65532.
#
# The bases are pinned by tag and digest, both on Debian 13 (trixie); Renovate (renovate.json)
# proposes the bumps and `make verify-pins` checks them before a release
# (docs/adr/0032-image-pins.md). `make image` builds it where a container engine exists.
# docker build --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#   --build-arg SOURCE=<repository URL> -t kiln .

# Node 24.21.0. Eleven public files, by their content from different projects, pin this digest
# (for this tag or its 24-trixie-slim alias); one records it as the multi-platform index digest
# read from the registry. The code search that found them (2026-11-27) does not name their
# repositories. docker-library/repo-info
# repos/node/remote/24.21.0-trixie-slim.md at 3179cb4d576b9929bf86873c87f279ac67661c6e records the
# tag's first build (8ec5d755…, 2026-09-19); this is its later rebuild, which that record predates.
ARG BUILD_IMAGE=docker.io/library/node:24.21.0-trixie-slim@sha256:173f125896c3b47ddf056734c7ea789d04595a6a08769a8f78e0df642781fb66
# Distroless publishes no versioned tag: `nonroot` is rebuilt in place. Eleven public Dockerfiles,
# by their content from different projects (several Renovate-managed, one beside the node pin
# above), pin this digest; the same code search does not name their repositories.
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian13:nonroot@sha256:9eeb7f5887d0e239e78264b06f7f11d2e14be534050481803a9e4728fcdd278e

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
ENV npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false
# The lockfile layer: only these three files decide what is installed.
COPY package.json package-lock.json .npmrc ./
RUN npm ci
COPY nest-cli.json tsconfig.json tsconfig.build.json ./
COPY scripts/build-console.sh scripts/build-cli.sh scripts/openapi-document.cjs ./scripts/
COPY src ./src
# The app, then the web console into dist/console/ and the `kiln` CLI into dist/cli/http/ (their
# API types from the app's own document). kiln-admin (dist/cli/kiln-admin.js) comes with the app.
RUN npx nest build \
 && bash scripts/build-console.sh \
 && bash scripts/build-cli.sh \
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
      org.opencontainers.image.base.name="gcr.io/distroless/nodejs24-debian13:nonroot"
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
