# Kustodian. `make demo` and `make test` work on a fresh Debian 12 machine with
# Go and root; they install what they need themselves.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w \
  -X github.com/kustodian/kustodian/internal/version.Version=$(VERSION) \
  -X github.com/kustodian/kustodian/internal/version.Commit=$(COMMIT) \
  -X github.com/kustodian/kustodian/internal/version.Date=$(DATE)

CLUSTER_NAME ?= kustodian
NODES        ?= 5
PORT         ?= 0
GO_TEST_FLAGS ?=

# Packages by test level. Integration tests start their own control plane.
UNIT_PKGS        := ./cmd/... ./internal/...
INTEGRATION_PKGS := ./test/...

.PHONY: bench build docs test test-unit test-integration lint tools deps cluster-up cluster-down demo clean

build: ## static binaries into bin/, and the kubectl plugin link
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/kustodian ./cmd/kustodian-ctl
	ln -sf kustodian-ctl bin/kubectl-kustodian

docs: ## regenerate the man pages (docs/man) and the default config file (packaging/config.yaml)
	rm -f docs/man/*.1
	go run ./test/cmd/gendocs docs/man packaging/config.yaml

test: deps lint test-unit test-integration ## everything: the README's test command

test-unit: deps
	go test -count=1 $(GO_TEST_FLAGS) $(UNIT_PKGS)

# -p 1: each package of integration tests runs its own control plane; on two
# cores they are faster one after the other than side by side.
test-integration: deps tools
	go test -count=1 -p 1 -timeout 30m $(GO_TEST_FLAGS) $(INTEGRATION_PKGS)

lint: deps
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	go vet ./...

tools: deps ## build the control plane into the cache (minutes the first time)
	test/tools/build.sh >/dev/null

# Debian packages the end-to-end tests need: debootstrap makes the hosts' root
# file system, systemd-container boots them (systemd-nspawn).
APT_PACKAGES := debootstrap systemd-container
deps: ## install what the tests need (Debian packages, as root), check Go
	@command -v go >/dev/null || { echo "make: go is not installed; install Go 1.26 or newer" >&2; exit 1; }
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make: install these Debian packages as root:$$missing" >&2; exit 1; fi; \
	  echo "installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

cluster-up: tools ## start (or reuse) the local cluster; prints its kubeconfig path
	go run ./test/cmd/devcluster up --name $(CLUSTER_NAME) --nodes $(NODES) --port $(PORT)

cluster-down:
	go run ./test/cmd/devcluster down --name $(CLUSTER_NAME)

DEMO_FLAGS ?=
demo: tools build ## a rolling maintenance of $(NODES) nodes on the local control plane, live
	go run ./test/cmd/demo --name $(CLUSTER_NAME) --nodes $(NODES) --kustodian bin/kustodian --kustodian-ctl bin/kustodian-ctl $(DEMO_FLAGS)

BENCH_FLAGS ?=
bench: tools build ## latency, rollout makespan, API requests and memory of the agents (DESIGN section 11)
	go run ./test/cmd/bench --kustodian bin/kustodian --kustodian-ctl bin/kustodian-ctl $(BENCH_FLAGS)

clean:
	rm -rf bin/ dist/
