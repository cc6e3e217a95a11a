# Rota's build. `make build` puts every binary and plugin in bin/;
# `make test` runs every test (unit, fuzz corpus, integration on a real
# Slurm dev cluster); `make demo` shows the submit path end to end.

SHELL       := /bin/bash
GO          ?= go
BIN         := bin
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -s -w -X github.com/rota-hpc/rota/internal/buildinfo.Version=$(VERSION)
# The Slurm release the plugins are built for and the tests run on:
# ROTA_SLURM (or SLURM) = 22.05, 24.11 or 26.05; empty means this host's.
# A release other than the host's comes from a Debian chroot that
# scripts/slurm-release makes once and caches, and its plugins go to
# bin/slurm-<release>/ (the host's to bin/). SLURM_INCLUDE overrides the
# headers (a site's own slurm-devel): see docs/building-plugins.md.
ROTA_SLURM  ?=
SLURM       ?= $(ROTA_SLURM)
HOST_SLURM  := $(shell scripts/slurm-release host 2>/dev/null)
ifeq ($(filter-out host $(HOST_SLURM),$(SLURM)),)
PLUGIN_BIN  := $(BIN)
SLURM_INCLUDE ?= /usr/include/slurm
else
PLUGIN_BIN  := $(BIN)/slurm-$(SLURM)
# A copy of the chroot's slurm/ alone: -I above the chroot's own would
# take its libc headers too (the chroot has libc6-dev), not this host's.
ifndef SLURM_INCLUDE
SLURM_INCLUDE := $(PLUGIN_BIN)/include/slurm
SLURM_HEADERS_FROM = $(shell scripts/slurm-release include $(SLURM))/slurm
endif
endif

# go-nvml's cgo wrappers call NVML functions that CUDA 13's header marks
# deprecated; their warnings say nothing about Rota.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

GO_BINARIES := rota-controller rota rota-loadgen rota-agent rota-synthtrain rota-estimator-speedtable rota-linkrelay

.PHONY: all build plugins deps test unit integration lint demo demo-down clean fmt vet bench-submit bench-cgo-entry bench-policy man

all: build

deps:
	scripts/setup-deps

build: $(addprefix $(BIN)/,$(GO_BINARIES)) plugins

$(BIN)/rota-controller: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./controller/cmd/rota-controller

$(BIN)/rota: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./controller/cmd/rota

# The controller's load generator, a benchmark (docs/operations.md); not
# packaged, and apart from rota so that the CLI does not link the
# controller it starts.
$(BIN)/rota-loadgen: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./controller/cmd/rota-loadgen

# The WAN link between scripts/clusters' two dev clusters; not packaged.
$(BIN)/rota-linkrelay: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./controller/cmd/rota-linkrelay

# The rota CLI's man pages (one per command, gzipped) and its bash and zsh
# completions, generated from the same command tree that parses its flags:
# $(BIN)/man/rota*.1.gz, $(BIN)/completion/rota.bash and _rota. The pages'
# date is the last commit's, so a rebuild makes the same bytes.
MAN_DATE ?= $(shell git log -1 --format=%ct 2>/dev/null)
man: $(BIN)/rota
	rm -rf $(BIN)/man $(BIN)/completion
	SOURCE_DATE_EPOCH=$(MAN_DATE) $(BIN)/rota gen-man --dir $(BIN)/man
	gzip -9n $(BIN)/man/*.1
	mkdir -p $(BIN)/completion
	$(BIN)/rota completion bash >$(BIN)/completion/rota.bash
	$(BIN)/rota completion zsh >$(BIN)/completion/_rota

# The synthetic training job of the end-to-end demonstration (issue #5).
$(BIN)/rota-synthtrain: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./agent/cmd/rota-synthtrain

# The example external estimator (docs/estimators.md, "External estimators").
$(BIN)/rota-estimator-speedtable: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./controller/cmd/rota-estimator-speedtable

# The external estimators' gRPC protocol: regenerate the committed Go code
# after editing the .proto. Needs protoc, protoc-gen-go and
# protoc-gen-go-grpc (Debian: protobuf-compiler protoc-gen-go
# protoc-gen-go-grpc).
PROTO := controller/estimate/external/estimatorpb/estimator.proto
.PHONY: proto
proto:
	@command -v protoc >/dev/null && command -v protoc-gen-go >/dev/null && command -v protoc-gen-go-grpc >/dev/null || \
		{ echo "needs protoc, protoc-gen-go, protoc-gen-go-grpc (apt-get install protobuf-compiler protoc-gen-go protoc-gen-go-grpc)"; exit 1; }
	protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative $(PROTO)

# The job_submit plugin is the C shim (cgo/job_submit_rota.c, the only code
# that reads Slurm's structures) linked with the Go half, a c-archive that
# needs no Slurm header and so is built once for every release:
# $(GO_LIB)/librota_go.a. packaging/slurm-plugins/plugins.mk is the one
# recipe that compiles the shim and the SPANK plugin against
# $(SLURM_INCLUDE)/slurm.h and links them; the source package a site
# builds (make srpm, make debsrc) runs the same file.
plugins: $(PLUGIN_BIN)/job_submit_rota.so $(PLUGIN_BIN)/spank_rota.so

GO_LIB := $(BIN)/go
# cgo/rota_shelf.c is compiled into the archive through
# plugin/shelf/shelf_c.c, an #include Go's build cache does not hash: the
# define makes an edit of cgo/ change the cache key. (Setting CGO_CFLAGS
# drops Go's default -O2 -g, so they are given again.)
SHIM_CFLAGS = -O2 -g -DROTA_SHIM_SUM=$$(cat cgo/*.c cgo/*.h | sha256sum | cut -c1-16) $$CGO_CFLAGS

.PHONY: go-archive
go-archive: $(GO_LIB)/librota_go.a
$(GO_LIB)/librota_go.a: FORCE
	@mkdir -p $(GO_LIB)
	CGO_CFLAGS="$(SHIM_CFLAGS)" $(GO) build -trimpath -tags rota_split -buildmode=c-archive -ldflags '$(LDFLAGS)' -o $@ ./plugin/jobsubmit
	mv $(GO_LIB)/librota_go.h $(GO_LIB)/_cgo_export.h

PLUGINS_MK = $(MAKE) --no-print-directory -f packaging/slurm-plugins/plugins.mk SRC=cgo GO_LIB=$(GO_LIB) OUT=$(PLUGIN_BIN) SLURM_INCLUDE=$(SLURM_INCLUDE)
.PHONY: slurm-headers
slurm-headers:
	$(if $(SLURM_HEADERS_FROM),rm -rf $(SLURM_INCLUDE) && mkdir -p $(SLURM_INCLUDE) && cp $(SLURM_HEADERS_FROM)/*.h $(SLURM_INCLUDE)/)

$(PLUGIN_BIN)/job_submit_rota.so: $(GO_LIB)/librota_go.a slurm-headers FORCE
	@test -f $(SLURM_INCLUDE)/slurm.h || { echo "no $(SLURM_INCLUDE)/slurm.h: run 'make deps' (libslurm-dev) or set SLURM_INCLUDE"; exit 1; }
	$(PLUGINS_MK) $@

$(PLUGIN_BIN)/spank_rota.so: slurm-headers FORCE
	$(PLUGINS_MK) $@

FORCE:

# Everything: unit tests (with fuzz seed corpora), the packages, then
# integration tests on a real Slurm dev cluster (set up here, as root, when
# missing).
#
# With ROTA_SLURM unset the integration suite runs on every release Rota
# supports (scripts/slurm-release), in three lanes at once (test-lanes): the
# whole suite on the host's 22.05 (then the agent's tests on cgroup v1), the
# whole suite on 26.05, and on 24.11 the differential test and every test of
# what differs between releases: the submit path, the round loop, typed
# limits, slurmrestd, the plugins built from their source packages (and the
# upgrade guard), the agent's cgroup paths and shards. ROTA_SLURM=24.11 make test
# runs every test on that release alone; make test-all-releases runs every
# test on all three.
test: deps build lint unit packages-test $(if $(SLURM),integration,test-lanes)

SUBMIT_AND_ROUNDS := ^Test(Differential|PluginPanicFailsOpen|RestdBackend|RequestForms|Explain|Status|SpankEnvironment|FailOpen.*|BurstWithControllerRestart|JobModify|IdenticalSubmissionsFromShelf|RoundRetypesPendingJob|QueueReadCarriesDecision|MigrationEndToEnd|ChainSegmentMovesToFreeType|ControllerKill9KeepsState|TypedLimits|UserAllowedTypes|LoweredMaxTimeStrandsNoJob|SiteBuiltPlugins|AgentSeesJobProgress|CheckpointReachesOnlyThatJob|NodeFailureResume|JobCgroupsMapToJobs|NamedNodesPassAsAsked|MIGSlices|Shards|SharePairs)$$
.PHONY: lanes-built test-lanes test-all-releases lane-host lane-26.05 lane-24.11 lane-24.11-all test-cgroup-v1

# Lanes: each release's tests start their own clusters, on ports claimed
# through internal/freeport, with the release's node names and directories,
# so the lanes share nothing but the CPUs; a test spends most of its time
# waiting for Slurm, so three lanes take about as long as the longest
# (measured in docs/architecture.md). Everything is built first: a lane
# never rebuilds a binary another lane's tests are running. Each line
# carries its lane's name.
lanes-built: build srpm debsrc
	$(MAKE) --no-print-directory plugins SLURM=26.05
	$(MAKE) --no-print-directory plugins SLURM=24.11
LANE_MAKE = $(MAKE) --no-print-directory INTEGRATION_BUILT=1
lane-host:
	$(LANE_MAKE) integration LANE=$(HOST_SLURM)
	$(LANE_MAKE) test-cgroup-v1 LANE=$(HOST_SLURM)-cgroup-v1
# The heavy tests (heavy() in test/integration: many clusters, or builds)
# run one lane at a time; 22.05's lane meets them in the suite's order,
# 26.05's after the rest, so the two seldom wait for each other.
HEAVY_TESTS := ^Test(Differential|MultiCluster|SiteBuiltPlugins)$$
lane-26.05:
	$(LANE_MAKE) integration SLURM=26.05 LANE=26.05 INTEGRATION_SKIP='$(HEAVY_TESTS)'
	$(LANE_MAKE) integration SLURM=26.05 LANE=26.05-heavy INTEGRATION_RUN='$(HEAVY_TESTS)' INTEGRATION_LOG=/tmp/rota-integration-26.05-heavy.log
lane-24.11:
	$(LANE_MAKE) integration SLURM=24.11 LANE=24.11 INTEGRATION_RUN='$(SUBMIT_AND_ROUNDS)'
lane-24.11-all:
	$(LANE_MAKE) integration SLURM=24.11 LANE=24.11
test-lanes: lanes-built
	$(MAKE) --no-print-directory -k -j3 lane-host lane-26.05 lane-24.11

# The whole integration suite on every release Rota supports, no test left
# out: run it before resolving anything that touches Slurm.
test-all-releases: deps lanes-built
	$(MAKE) --no-print-directory -k -j3 lane-host lane-26.05 lane-24.11-all

# The dev cluster tracks jobs in cgroup v2 where the machine allows it (the
# integration runs above); the agent's paths on cgroup v1's freezer, kept
# for sites that still run it, on the host's release.
AGENT_CGROUP_TESTS := ^Test(AgentSeesJobProgress|CheckpointReachesOnlyThatJob|JobCgroupsMapToJobs)$$
test-cgroup-v1:
	ROTA_DEV_CGROUP=v1 $(MAKE) integration INTEGRATION_RUN='$(AGENT_CGROUP_TESTS)' INTEGRATION_LOG=/tmp/rota-integration-cgroup-v1.log

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./test/...
	$(GO) vet -tags install ./test/packages
	$(GO) vet -tags realgpu ./agent
	shellcheck -x -S warning $$(grep -lsE '^#!.*(bash|/sh)' scripts/*) scripts/lib/*.sh

# With the race detector (issue #37): the plugin's Go half runs on
# slurmctld's threads, the controller and agent are all goroutines. About
# two and a half times as long as without it (UNIT_RACE= to leave it out).
UNIT_RACE ?= -race
unit:
	CGO_CFLAGS="$(SHIM_CFLAGS)" $(GO) test -count=1 $(UNIT_RACE) ./...

# Controller failover on a 3-node NATS cluster (nats-server from apt):
# kills the leader and a NATS node; last line takeover_s=<x> lost_decisions=<n>.
.PHONY: failover-test
failover-test:
	scripts/failover-test

# On a release other than the host's the test binary runs inside that
# release's chroot (go test -exec), where its sbatch and daemons are.
# INTEGRATION_RUN picks tests (go test -run).
INTEGRATION_EXEC = $(if $(filter $(BIN),$(PLUGIN_BIN)),,-exec '$(CURDIR)/scripts/slurm-release exec $(SLURM)')
INTEGRATION_RUN ?=
INTEGRATION_LOG ?= /tmp/rota-integration$(if $(SLURM),-$(SLURM)).log
# A whole suite takes about 40 minutes alone here; in make test's lanes a
# heavy test may also wait for another lane's.
INTEGRATION_TIMEOUT ?= 80m
# INTEGRATION_BUILT=1: build nothing first (make test's lanes, built
# before). LANE=name: each line of output starts with [name].
integration: $(if $(INTEGRATION_BUILT),,build srpm debsrc)
	ROTA_SLURM=$(SLURM) $(GO) test -count=1 -tags integration -timeout $(INTEGRATION_TIMEOUT) -v $(INTEGRATION_EXEC) $(if $(INTEGRATION_RUN),-run '$(INTEGRATION_RUN)') $(if $(INTEGRATION_SKIP),-skip '$(INTEGRATION_SKIP)') ./test/integration 2>&1 | tee $(INTEGRATION_LOG) | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' $(if $(LANE),| sed -u 's/^/[$(LANE)] /'); \
		rc=$${PIPESTATUS[0]}; $(if $(INTEGRATION_EXEC),scripts/slurm-release umount $(SLURM);) \
		if [ $$rc != 0 ]; then echo "--- integration$(if $(SLURM), on $(SLURM)) failed (exit $$rc); the last 60 lines of $(INTEGRATION_LOG): ---"; tail -n 60 $(INTEGRATION_LOG) $(if $(LANE),| sed 's/^/[$(LANE)] /'); fi; exit $$rc

# The first end-to-end look: dev cluster + controller, a handful of plain
# GPU jobs, and what Rota did with each.
demo: deps build
	scripts/demo
	@if [ "$${ROTA_DEMO_E2E:-1}" != 0 ]; then echo; echo "Now the same 24 training jobs with Rota and as plain Slurm (about 10 minutes; ROTA_DEMO_E2E=0 skips):"; scripts/e2e-workload; fi

demo-down:
	scripts/dev-cluster down

bench-submit: build
	scripts/bench-submit

bench-cgo-entry:
	scripts/bench-cgo-entry

# Does Rota pay? The same 24 synthetic training jobs on the dev cluster with
# Rota and as plain Slurm; last line jct_ratio=... migrations=...
# lost_progress=... killed_at_limit=... (docs/rounds.md).
.PHONY: e2e
e2e: deps build
	scripts/e2e-workload

# Policy solver speed (controller/policy/lp) on synthetic instances.
bench-policy:
	$(GO) test -run XXX -bench . -benchtime 3x ./controller/policy/...

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) dist $(DIST)

# --- packages (packaging/<part>/, one folder per package) ---
# nfpm builds the packages; pinned, fetched through the Go module proxy.
# (v2.43.0: later releases need modules the proxy does not serve here.)
NFPM        ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.43.0
PKG_VERSION ?= 0.1.0
PKG_ARCH    ?= $(shell $(GO) env GOARCH)
DIST        ?= dist
PKG_PARTS   := agent controller slurm-plugins
# The Slurm release the plugins are built for, from $(SLURM_INCLUDE); the
# plugin package is stamped with it and requires exactly it.
SLURM_VERSION      ?= $(shell scripts/slurm-version $(SLURM_INCLUDE))
SLURM_VERSION_NEXT  = $(shell echo '$(SLURM_VERSION)' | awk -F. '{ printf "%s.%s.%d", $$1, $$2, $$3 + 1 }')
# Debian's PluginDir is /usr/lib/<multiarch>/slurm-wlm.
DEB_MULTIARCH      ?= $(shell $(CC) -print-multiarch)
PKG_BUILD           = $(DIST)/build

.PHONY: packages packages-test
# RPM and .deb of every part into $(DIST)/: rota-agent, rota-controller (with
# the rota CLI, its man pages and completions, and Gavel's throughput table),
# rota-slurm-plugins (for Slurm $(SLURM_VERSION)).
packages: man ship
	@[ -n "$(SLURM_VERSION)" ] || { echo "no Slurm version from $(SLURM_INCLUDE)/slurm_version.h"; exit 1; }
	mkdir -p $(PKG_BUILD)/rpm $(PKG_BUILD)/deb
	cp contrib/slurm/plugstack.conf.snippet $(PKG_BUILD)/rpm/plugstack.conf.snippet
	sed 's#/usr/lib64/slurm/#/usr/lib/$(DEB_MULTIARCH)/slurm-wlm/#' contrib/slurm/plugstack.conf.snippet >$(PKG_BUILD)/deb/plugstack.conf.snippet
	set -e; export PKG_VERSION=$(PKG_VERSION) PKG_ARCH=$(PKG_ARCH) SLURM_VERSION=$(SLURM_VERSION) \
		SLURM_VERSION_NEXT=$(SLURM_VERSION_NEXT) DEB_MULTIARCH=$(DEB_MULTIARCH) PKG_BUILD=$(PKG_BUILD) PLUGIN_BIN=$(SHIP_PLUGIN_BIN) SHIP_BIN=$(SHIP_BIN); \
	for part in $(PKG_PARTS); do for p in rpm deb; do \
		$(NFPM) package --config packaging/$$part/nfpm.yaml --packager $$p --target $(DIST)/; \
	done; done

# --- what is shipped: built for glibc 2.28 (RHEL/Rocky 8 and newer) ---
# The packaged binaries and plugins are built in a Debian 11 root
# (scripts/build-root): built on this Debian 12 host they would need
# GLIBC_2.34. bin/ship/ holds them (the plugins for a release not the
# host's in bin/ship/slurm-<release>/), built against a copy of
# $(SLURM_INCLUDE) that the root can see. test/packages checks every ELF
# file of every package with objdump -T.
SHIP_BIN        := $(BIN)/ship
SHIP_GO         := rota-controller rota rota-agent rota-estimator-speedtable
SHIP_PLUGIN_BIN  = $(patsubst $(BIN)%,$(SHIP_BIN)%,$(PLUGIN_BIN))
SHIP_INCLUDE     = $(SHIP_BIN)/include-$(or $(SLURM),host)/slurm
IN_BUILD_ROOT    = scripts/build-root exec $(MAKE) --no-print-directory BIN=$(SHIP_BIN) HOST_SLURM=$(HOST_SLURM) VERSION=$(VERSION)
.PHONY: ship ship-go-archive
ship: slurm-headers
	@test -f $(SLURM_INCLUDE)/slurm.h || { echo "no $(SLURM_INCLUDE)/slurm.h: run 'make deps' (libslurm-dev) or set SLURM_INCLUDE"; exit 1; }
	rm -rf $(SHIP_INCLUDE) && mkdir -p $(SHIP_INCLUDE) && cp $(SLURM_INCLUDE)/*.h $(SHIP_INCLUDE)/
	$(IN_BUILD_ROOT) SLURM=$(SLURM) SLURM_INCLUDE=$(SHIP_INCLUDE) $(addprefix $(SHIP_BIN)/,$(SHIP_GO)) plugins

# The Go half of job_submit_rota.so alone (bin/ship/go/librota_go.a), for
# the source package.
ship-go-archive:
	$(IN_BUILD_ROOT) go-archive

# --- the source package a site builds against its own Slurm ---
# make srpm: dist/rota-slurm-plugins-$(PKG_VERSION)-1.src.rpm
# (rpmbuild --rebuild it with the site's slurm-devel); make debsrc:
# dist/rota-slurm-plugins_$(PKG_VERSION).dsc and .tar.xz (dpkg-source -x,
# then dpkg-buildpackage -us -uc -b, with libslurm-dev). Both hold the C
# sources, packaging/slurm-plugins/plugins.mk as their Makefile, and the Go
# half compiled for glibc 2.28 (no Go toolchain at the site). docs/install.md.
SRC_PKG   := rota-slurm-plugins-$(PKG_VERSION)
SRC_STAGE  = $(PKG_BUILD)/src/$(SRC_PKG)
.PHONY: srpm debsrc src-tree
src-tree: ship-go-archive
	rm -rf $(SRC_STAGE) && mkdir -p $(SRC_STAGE)/src $(SRC_STAGE)/lib $(SRC_STAGE)/contrib $(SRC_STAGE)/docs
	cp packaging/slurm-plugins/plugins.mk $(SRC_STAGE)/Makefile
	cp cgo/job_submit_rota.c cgo/rota_shim.h cgo/spank_rota.c $(SRC_STAGE)/src/
	cp $(SHIP_BIN)/go/librota_go.a $(SHIP_BIN)/go/_cgo_export.h $(SRC_STAGE)/lib/
	cp contrib/job_submit_rota.conf contrib/slurm/slurm.conf.snippet contrib/slurm/plugstack.conf.snippet $(SRC_STAGE)/contrib/
	cp docs/install.md docs/building-plugins.md $(SRC_STAGE)/docs/
	cp -r packaging/slurm-plugins/debian $(SRC_STAGE)/
	sed -i 's/@ROTA_VERSION@/$(PKG_VERSION)/' $(SRC_STAGE)/debian/changelog
	sed 's/@ROTA_VERSION@/$(PKG_VERSION)/' packaging/slurm-plugins/rota-slurm-plugins.spec >$(SRC_STAGE)/rota-slurm-plugins.spec

srpm: src-tree
	@command -v rpmbuild >/dev/null || { echo "rpmbuild missing: run scripts/setup-deps (rpm)"; exit 1; }
	mkdir -p $(DIST)
	tar -C $(dir $(SRC_STAGE)) --owner=0 --group=0 --sort=name $(if $(MAN_DATE),--mtime=@$(MAN_DATE)) -czf $(PKG_BUILD)/src/$(SRC_PKG).tar.gz $(SRC_PKG)
	rpmbuild -bs --define "_topdir $(abspath $(PKG_BUILD))/src/rpmbuild" --define "_sourcedir $(abspath $(PKG_BUILD))/src" \
		--define "_srcrpmdir $(abspath $(DIST))" --define "rota_srpm 1" $(SRC_STAGE)/rota-slurm-plugins.spec

debsrc: src-tree
	@command -v dpkg-source >/dev/null || { echo "dpkg-source missing: run scripts/setup-deps (dpkg-dev)"; exit 1; }
	mkdir -p $(DIST)
	cd $(dir $(SRC_STAGE)) && dpkg-source -b $(SRC_PKG) >/dev/null
	mv $(dir $(SRC_STAGE))rota-slurm-plugins_$(PKG_VERSION).dsc $(dir $(SRC_STAGE))rota-slurm-plugins_$(PKG_VERSION).tar.xz $(DIST)/

# Installs the .debs on this machine, runs a job through the installed
# plugin and controller on a dev cluster, removes them again (root); then
# installs them in a clean Debian bookworm root (scripts/debian-root, no
# repository inside) and runs the CLI there, and boots that root with
# systemd-nspawn to start and stop the units (test/packages/debianroot_test.go).
# On a release other than the host's, the packages are built for it and
# checked, not installed (the host's Slurm is another release).
packages-test: build
	ROTA_SLURM=$(SLURM) $(GO) test -count=1 $(if $(filter $(BIN),$(PLUGIN_BIN)),-tags install) -timeout 15m -v ./test/packages 2>&1 | tee /tmp/rota-packages-test.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' ; exit $${PIPESTATUS[0]}

# --- rota-agent (agent/, packaging/agent/) ---

$(BIN)/rota-agent: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./agent/cmd/rota-agent

.PHONY: rpm deb bench-agent
rpm deb: ship
	mkdir -p $(DIST)
	PKG_VERSION=$(PKG_VERSION) PKG_ARCH=$(PKG_ARCH) SHIP_BIN=$(SHIP_BIN) $(NFPM) package --config packaging/agent/nfpm.yaml --packager $@ --target $(DIST)/

# CPU and RSS of the agent sampling 8 mock GPUs with 16 jobs at 1 Hz.
bench-agent:
	$(GO) run ./agent/cmd/rota-agent-bench -duration 60s
