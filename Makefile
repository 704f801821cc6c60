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

# One build configuration for all but the race detector's unit tests: static
# and -trimpath, as the packages' binaries are built, so that lint, the
# simulation, the binaries and the integration tests compile each package
# once (a cold cache pays for a second configuration only under -race).
export CGO_ENABLED := 0
export GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(GOFLAGS)))

CLUSTER_NAME ?= kustodian
NODES        ?= 5
PORT         ?= 0
GO_TEST_FLAGS ?=

# Packages by test level. Integration tests start their own control plane.
UNIT_PKGS        := ./cmd/... ./internal/...
INTEGRATION_PKGS := ./test/...

.PHONY: test-tokens test-oldest tools-oldest test-control-planes test-background rootfs go-check repo-deps bench bench-plan bench-reboots build docs fuzz chaos sim kured test-kured packages packages-host repo package-assets test test-unit test-integration lint tools deps cluster-up cluster-down demo clean

build: ## static binaries into bin/, and the kubectl plugin link
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/kustodian ./cmd/kustodian-ctl ./cmd/kustodian-notify
	ln -sf kustodian-ctl bin/kubectl-kustodian
	install -m 0755 packaging/kubectl_complete-kustodian bin/

# Heavy tools are built once into the cache, outside the repository (the same
# place test/cluster uses).
CACHE ?= $(or $(KUSTODIAN_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kustodian)
GORELEASER_VERSION := v2.15.1
GORELEASER := $(CACHE)/tools/goreleaser-$(GORELEASER_VERSION)/goreleaser
# Package version: each commit's build upgrades the one before.
KUSTODIAN_VERSION ?= 0.0.0~dev$(shell git log -1 --format=%cd --date=format:%Y%m%d%H%M%S 2>/dev/null)

GORELEASER_SNAPSHOT = KUSTODIAN_VERSION='$(KUSTODIAN_VERSION)' KUSTODIAN_COMMIT='$(COMMIT)' \
	  KUSTODIAN_DATE="$$(git log -1 --format=%cI 2>/dev/null || echo unknown)" \
	  KUSTODIAN_TIMESTAMP="$$(git log -1 --format=%ct 2>/dev/null || date +%s)" \
	  $(GORELEASER) release --snapshot --clean

packages: go-check $(GORELEASER) ## the release snapshot into dist/, offline: kustodian and kustodian-ctl .deb/.rpm (amd64, arm64), kustodian-ctl archives (linux, darwin, windows), checksums, krew manifest
	$(GORELEASER_SNAPSHOT)
	@ls dist/*.deb dist/*.rpm dist/*.tar.gz dist/*.zip dist/checksums.txt dist/krew/*.yaml 2>/dev/null

# The tests install only this machine's packages, built by nfpm alone (the
# version goreleaser $(GORELEASER_VERSION) builds its packages with) from
# the nfpms of .goreleaser.yaml (test/cmd/nfpmconf): building goreleaser
# takes minutes on a cold cache, nfpm about one. The binaries are built as
# goreleaser builds them (static, -trimpath, the same version stamps).
NFPM_VERSION := v2.45.2
NFPM := $(CACHE)/tools/nfpm-$(NFPM_VERSION)/nfpm
HOST_ARCH := $(shell go env GOARCH 2>/dev/null)
PACKAGE_LDFLAGS = -s -w \
  -X github.com/kustodian/kustodian/internal/version.Version=$(KUSTODIAN_VERSION) \
  -X github.com/kustodian/kustodian/internal/version.Commit=$(COMMIT) \
  -X github.com/kustodian/kustodian/internal/version.Date=$(shell git log -1 --format=%cI 2>/dev/null || echo unknown)
packages-host: go-check $(NFPM) ## .deb and .rpm for this machine's architecture only (what make test installs), with nfpm
	rm -rf build/host build/nfpm && mkdir -p build/host dist
	CGO_ENABLED=0 go build -trimpath -ldflags '$(PACKAGE_LDFLAGS)' -o build/host/ ./cmd/kustodian ./cmd/kustodian-ctl ./cmd/kustodian-notify
	$(MAKE) --no-print-directory package-assets KUSTODIAN_VERSION='$(KUSTODIAN_VERSION)'
	go run ./test/cmd/nfpmconf -goreleaser .goreleaser.yaml -version '$(KUSTODIAN_VERSION)' -arch $(HOST_ARCH) -bin build/host -out build/nfpm
	rm -f dist/*.deb dist/*.rpm
	for config in build/nfpm/*.yaml; do id=$$(basename "$$config" .yaml); for format in deb rpm; do \
	  $(NFPM) package --config "$$config" --packager $$format --target "dist/$${id}_$(KUSTODIAN_VERSION)_linux_$(HOST_ARCH).$$format" >/dev/null; \
	done; done
	@ls dist/*.deb dist/*.rpm

$(NFPM):
	@echo "building nfpm $(NFPM_VERSION) into $(dir $@) (about a minute, once)"
	GOBIN=$(dir $@) go install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

# Signed APT and RPM repositories of the packages in dist/ (run make
# packages first), into dist/repo: REPO_KEY is the signing key in your GnuPG
# keyring; without it, a throwaway key in build/repo-gnupg.
repo: repo-deps ## signed APT (reprepro) and RPM (createrepo_c) repositories of dist/'s packages into dist/repo; REPO_KEY=<key>, else a throwaway key
	packaging/make-repo.sh dist dist/repo

# Prometheus's own tools from Debian's packages, unpacked into the cache and
# never installed (installing them would start their services): promtool
# checks the agent's metrics, node_exporter reads its textfile.
PROM_TOOLS := $(CACHE)/tools/prometheus
PROMTOOL := $(PROM_TOOLS)/usr/bin/promtool
NODE_EXPORTER := $(PROM_TOOLS)/usr/bin/prometheus-node-exporter
$(PROMTOOL) $(NODE_EXPORTER) &:
	@echo "unpacking Debian's prometheus and prometheus-node-exporter packages into $(PROM_TOOLS)"
	rm -rf $(PROM_TOOLS).tmp && mkdir -p $(PROM_TOOLS).tmp
	cd $(PROM_TOOLS).tmp && { apt-get download prometheus prometheus-node-exporter >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get download prometheus prometheus-node-exporter >/dev/null; }; }
	for deb in $(PROM_TOOLS).tmp/*.deb; do dpkg-deb -x $$deb $(PROM_TOOLS).tmp/root; done
	mkdir -p $(PROM_TOOLS) && cp -a $(PROM_TOOLS).tmp/root/. $(PROM_TOOLS)/ && rm -rf $(PROM_TOOLS).tmp
	@test -x $(PROMTOOL) && test -x $(NODE_EXPORTER)

# Alertmanager, for the integration tests of silences and the alertmanager
# gate: unpacked the same way, run by the tests on 127.0.0.1 only.
ALERTMANAGER := $(PROM_TOOLS)/usr/bin/prometheus-alertmanager
$(ALERTMANAGER):
	@echo "unpacking Debian's prometheus-alertmanager package into $(PROM_TOOLS)"
	rm -rf $(PROM_TOOLS).am && mkdir -p $(PROM_TOOLS).am
	cd $(PROM_TOOLS).am && { apt-get download prometheus-alertmanager >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get download prometheus-alertmanager >/dev/null; }; }
	for deb in $(PROM_TOOLS).am/*.deb; do dpkg-deb -x $$deb $(PROM_TOOLS).am/root; done
	mkdir -p $(PROM_TOOLS) && cp -a $(PROM_TOOLS).am/root/. $(PROM_TOOLS)/ && rm -rf $(PROM_TOOLS).am
	@test -x $(ALERTMANAGER)

# Kured's own binary, for the interop tests: built from KURED_SRC, else from
# a checkout of Kured beside this repository (a directory named kured, in the
# parent directory or one level below it, whose go.mod is Kured's), else
# from a clone of Kured at KURED_COMMIT in the cache (the Go module proxy
# does not serve Kured at a commit). Built once per commit.
KURED_COMMIT := 51220cc778a4
KURED_BESIDE := $(firstword $(patsubst %/go.mod,%,$(shell grep -l '^module github.com/kubereboot/kured$$' $(wildcard $(abspath ..)/kured/go.mod $(abspath ..)/*/kured/go.mod) /dev/null 2>/dev/null)))
KURED_SRC ?= $(or $(KURED_BESIDE),$(CACHE)/src/kured-$(KURED_COMMIT))
KURED := $(CACHE)/tools/kured-$(KURED_COMMIT)/kured
kured: $(KURED) ## Kured's own binary for the interop tests, from KURED_SRC (default: a Kured checkout beside this repository, else a clone at 51220cc)
$(KURED):
	@if [ ! -f $(KURED_SRC)/go.mod ]; then \
	  echo "no Kured source in $(KURED_SRC): cloning Kured at $(KURED_COMMIT)"; \
	  rm -rf $(KURED_SRC).tmp && git clone -q https://github.com/kubereboot/kured $(KURED_SRC).tmp && \
	  git -C $(KURED_SRC).tmp checkout -q $(KURED_COMMIT) && mv $(KURED_SRC).tmp $(KURED_SRC); fi
	mkdir -p $(dir $(KURED))
	cd $(KURED_SRC) && CGO_ENABLED=0 go build -trimpath -o $(KURED).tmp ./cmd/kured
	mv $(KURED).tmp $(KURED)

$(GORELEASER):
	@echo "building goreleaser $(GORELEASER_VERSION) into $(dir $@) (minutes, once)"
	GOBIN=$(dir $@) go install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

# What the packages ship besides the binaries: gzipped man pages, shell
# completions and the documentation tree (goreleaser's before hook).
package-assets: build
	rm -rf build/assets
	mkdir -p build/assets/man/agent build/assets/man/ctl build/assets/completions \
	  build/assets/doc/agent/docs build/assets/doc/agent/examples build/assets/doc/ctl/docs
	for page in docs/man/*.1; do \
	  name=$$(basename "$$page"); case $$name in kustodian-ctl*) dir=ctl ;; *) dir=agent ;; esac; \
	  gzip -9n < "$$page" > "build/assets/man/$$dir/$$name.gz"; \
	done
	for shell in bash zsh fish; do \
	  bin/kustodian completion $$shell > build/assets/completions/kustodian.$$shell; \
	  bin/kustodian-ctl completion $$shell > build/assets/completions/kustodian-ctl.$$shell; \
	done
	for pkg in agent ctl; do cp README.md build/assets/doc/$$pkg/ && cp docs/*.md build/assets/doc/$$pkg/docs/; done
	cp -r examples/. build/assets/doc/agent/examples/
	cp -r ansible build/assets/doc/ctl/
	chmod -R u=rwX,go=rX build/assets/doc
	{ echo "kustodian ($(KUSTODIAN_VERSION)) unstable; urgency=medium"; echo; \
	  echo "  * Built from commit $(COMMIT); the changes are in the Git history."; echo; \
	  echo " -- Kustodian developers <kustodian@users.noreply.github.com>  $$(date -R -u -d @$$(git log -1 --format=%ct 2>/dev/null || date +%s))"; \
	} | gzip -9n > build/assets/changelog.gz

docs: ## regenerate the man pages (docs/man), the default config file (packaging/config.yaml) and the kustomize base (deploy/kustomize)
	rm -f docs/man/*.1
	go run ./test/cmd/gendocs docs/man packaging/config.yaml

# make test in three steps, each with what can go beside it: the Debian
# packages (a download) beside lint, which needs only Go; the end-to-end
# tests' root file system (a download, test/cmd/rootfs) beside the unit
# tests; then the tests against a control plane (and what they need built)
# beside the simulation and the fuzz tests at the lowest priority
# (test-background), which take the CPU the tests leave while they wait on
# heartbeats, boots and Kured's start delays.
test: ## everything: the README's test command
	@$(MAKE) --no-print-directory -j2 deps lint tools-oldest
	@$(MAKE) --no-print-directory -j2 rootfs test-unit
	@$(MAKE) --no-print-directory -j2 test-control-planes test-background

# The integration tests against the newest Kubernetes, then those that
# matter for compatibility against the oldest: one control plane at a time.
test-control-planes: test-integration
	@$(MAKE) --no-print-directory test-oldest

test-background:
	nice -n 19 $(MAKE) --no-print-directory sim fuzz

rootfs: deps ## the end-to-end tests' root file system (debootstrap, cached; the tests make it when missing)
	go run ./test/cmd/rootfs

# The unit tests run with the race detector (cgo: gcc); the agents under
# integration tests are the static release build, without it.
test-unit: deps $(PROMTOOL) $(NODE_EXPORTER)
	PATH=$(dir $(PROMTOOL)):$$PATH CGO_ENABLED=1 go test -race -count=1 $(GO_TEST_FLAGS) $(UNIT_PKGS)

# The protocol's seeded simulation (internal/agent/sim_test.go): every
# agent's real code against an in-memory API server, SIM_SEEDS seeds (1200
# by default) without the race detector (test-unit runs a fortieth of them
# with it). SIM_SEED=<seed> repeats one, with its trace.
sim: deps ## the protocol's seeded simulation, SIM_SEEDS seeds (1200)
	go test -count=1 -timeout 30m -run '^TestSimulation$$' -v ./internal/agent

# Each fuzz test runs its seeds with the unit tests, and here for FUZZTIME
# generated inputs; a failing input is saved under the package's
# testdata/fuzz and becomes a seed. FUZZTIME is a count of executions, not a
# duration: Go before 1.27.1 can end a duration-bound run with a bare
# "context deadline exceeded" failure when a worker is slow to stop at the
# deadline (golang/go#75804), which a loaded CI machine hits now and then.
FUZZTIME ?= 3000x
FUZZ_TESTS := FuzzKuredLock:./internal/kured FuzzQueueSummary:./internal/lock FuzzRequestFile:./internal/hostfiles FuzzConfigFile:./internal/agentopts
fuzz: ## run each fuzz test for FUZZTIME executions (3000x)
	@for t in $(FUZZ_TESTS); do \
	  go test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) -timeout 5m "$${t#*:}" || exit 1; \
	done

# -p 1: each package of integration tests runs its own control plane; on two
# cores they are faster one after the other than side by side. Within a
# package most tests run side by side (t.Parallel: their own namespace,
# Nodes and agents, mostly waiting on heartbeats, boots and Kured's own 30-90
# s start delay), TEST_PARALLEL of them at once; the tests that touch what
# others share run first, one at a time (each package's doc says which).
TEST_PARALLEL ?= 6
INTEGRATION_ENV = KURED=$(KURED) KURED_SRC=$(KURED_SRC) PATH=$(dir $(PROMTOOL)):$$PATH
test-integration: deps tools packages-host $(PROMTOOL) $(ALERTMANAGER) $(KURED)
	$(INTEGRATION_ENV) go test -count=1 -p 1 -parallel $(TEST_PARALLEL) -timeout 30m $(GO_TEST_FLAGS) $(INTEGRATION_PKGS)

test-kured: deps tools packages-host $(PROMTOOL) $(KURED) ## only the integration tests with Kured's own binary (make kured)
	$(INTEGRATION_ENV) go test -count=1 -p 1 -parallel $(TEST_PARALLEL) -timeout 30m -run '^TestRealKured' $(GO_TEST_FLAGS) ./test/integration/

# make test runs TestANodeRenewsItsOwnToken just past the end of its first
# 10-minute token; this runs it for TOKEN_SOAK (an hour): the agent renews
# its token about nine times and does a maintenance at the end.
TOKEN_SOAK ?= 1h
test-tokens: deps tools packages-host ## an agent on 10-minute tokens for TOKEN_SOAK (1h), renewing them itself
	$(INTEGRATION_ENV) KUSTODIAN_TOKEN_SOAK=$(TOKEN_SOAK) go test -count=1 -timeout 90m -v -run '^TestANodeRenewsItsOwnToken$$' ./test/integration/

# The fault suite runs once in make test (FAULT_ROUNDS=1, a random seed it
# prints); make chaos runs each fault CHAOS_ROUNDS times and adds a
# control-plane outage of two minutes. FAULT_SEED=<seed> repeats a timing.
CHAOS_ROUNDS ?= 5
chaos: deps tools ## the fault suite, CHAOS_ROUNDS (5) rounds of each fault with random timing, and a 2-minute outage
	FAULT_ROUNDS=$(CHAOS_ROUNDS) FAULT_LONG=1 go test -count=1 -timeout 120m -v -run '^TestFault' ./test/integration/

lint: go-check
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go vet -tags bench ./test/e2e/

tools: go-check ## build the control plane into the cache (minutes the first time)
	test/tools/build.sh >/dev/null

# The oldest Kubernetes supported (its minor: internal/ctl OldestKubeMinor),
# built from test/tools/k8s-1.<minor>; test-oldest runs against it the
# integration tests that depend on what changes between versions: install,
# verify and uninstall, the admission policies and the generated allow-list,
# node kubeconfigs, the Node maintenance conditions, Kured's lock with
# Kured's own binary, the CRDs' validation, rollouts and patch claims.
OLDEST_KUBE ?= v1.34.4
COMPAT_TESTS := ^(TestEveryWriteANodeCanMake|TestSecurityANodeMarksLeasesOnlyWithKnownFormats|TestInstallThenNodeScopedCycle|TestNodeScopedPolicy|TestUninstall|TestNodeKubeconfig|TestNodeConditionsThroughAMaintenance|TestNodeStatusIsHeldToTheMaintenanceConditions|TestRealKuredAndKustodianTakeTurns|TestPolicyValidation|TestRolloutStagesPromotionAndNewNodes|TestRolloutStatusIsEachNodesOwn|TestAPatchSetIsClaimedAndFilledOnlyAsTheRulesSay|TestAMaintenanceAskedFromTheCluster)$$
tools-oldest: go-check ## build the oldest supported control plane (OLDEST_KUBE) into the cache
	KUSTODIAN_KUBE_VERSION=$(OLDEST_KUBE) test/tools/build.sh >/dev/null

test-oldest: deps tools-oldest packages-host $(PROMTOOL) $(KURED) ## the compatibility tests against the oldest supported Kubernetes (part of make test)
	$(INTEGRATION_ENV) KUSTODIAN_KUBE_VERSION=$(OLDEST_KUBE) go test -count=1 -p 1 -parallel $(TEST_PARALLEL) -timeout 30m -run '$(COMPAT_TESTS)' $(GO_TEST_FLAGS) ./test/integration/

# Debian packages the tests need: debootstrap makes the hosts' root file
# system, systemd-container boots them (systemd-nspawn); lintian, rpm and
# rpmlint check the packages; ansible and ansible-lint run and check the
# rollout; dpkg-dev's dpkg-scanpackages makes a test's apt repository;
# openssh-client's ssh-keygen signs and verifies rollouts beside ours; gcc
# builds the race detector's tests; dnf, with rpm's rpmbuild and
# createrepo-c, runs the dnf patch tests in root directories; chromium,
# headless, loads the pictures and the dashboard (test/integration/picture_test.go).
# make repo needs only REPO_PACKAGES;
# make build, packages and demo need Go alone.
REPO_PACKAGES := reprepro createrepo-c gnupg rpm
APT_PACKAGES := debootstrap systemd-container lintian rpmlint ansible ansible-lint dpkg-dev gcc openssh-client dnf chromium $(REPO_PACKAGES)

# $(call need,PACKAGES): check Go, and install the Debian packages named
# that are missing (as root; another user is told what to install).
define need
	@command -v go >/dev/null || { echo "make $@: go is not installed; install Go 1.26 or newer" >&2; exit 1; }
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make $@: install these Debian packages as root:$$missing" >&2; exit 1; fi; \
	  echo "make $@: installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
endef

deps: ## install what the tests need (Debian packages, as root), check Go
	$(call need,$(APT_PACKAGES))

go-check:
	$(call need,)

repo-deps:
	$(call need,$(REPO_PACKAGES))

cluster-up: tools ## start (or reuse) the local cluster; prints its kubeconfig path
	go run ./test/cmd/devcluster up --name $(CLUSTER_NAME) --nodes $(NODES) --port $(PORT)

cluster-down:
	go run ./test/cmd/devcluster down --name $(CLUSTER_NAME)

DEMO_FLAGS ?=
# DEMO_FLAGS=--kured adds Kured's own binary (make kured) beside the agents.
DEMO_KURED = $(if $(findstring --kured,$(DEMO_FLAGS)),$(KURED))
demo: tools build $(DEMO_KURED) ## a rolling maintenance of $(NODES) nodes on the local control plane, live; DEMO_FLAGS=--kured adds Kured's own binary
	go run ./test/cmd/demo --name $(CLUSTER_NAME) --nodes $(NODES) --kustodian bin/kustodian --kustodian-ctl bin/kustodian-ctl --kured-binary $(KURED) $(DEMO_FLAGS)

BENCH_FLAGS ?=
bench: tools build ## latency, rollout makespan, API requests and memory of the agents (docs/performance.md)
	go run ./test/cmd/bench --kustodian bin/kustodian --kustodian-ctl bin/kustodian-ctl $(BENCH_FLAGS)

# Kured's own binary and Kustodian rebooting the same five systemd hosts,
# one after the other, in one run: prints each rollout's makespan.
bench-plan: tools build ## the accuracy of kustodian-ctl plan alone: a 20-node rollout predicted from a first one's history
	go run ./test/cmd/bench --kustodian bin/kustodian --kustodian-ctl bin/kustodian-ctl --plan-only --scale= --handoff-waiting= $(BENCH_FLAGS)

bench-reboots: deps tools packages-host $(KURED) ## reboot rollouts of 5 real hosts side by side: Kured's own binary (--period=1m), then Kustodian
	KURED=$(KURED) go test -tags bench -count=1 -timeout 60m -run '^TestRebootRolloutSideBySide$$' -v ./test/e2e/

clean:
	rm -rf bin/ dist/ build/
