# Rota's build. `make build` puts every binary and plugin in bin/;
# `make test` runs every test (unit, fuzz corpus, integration on a real
# Slurm dev cluster); `make demo` shows the submit path end to end.

SHELL       := /bin/bash
GO          ?= go
BIN         := bin
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -s -w -X github.com/rota-hpc/rota/internal/buildinfo.Version=$(VERSION)
# Slurm headers the plugins build against; see docs/building-plugins.md.
SLURM_INCLUDE ?= /usr/include/slurm

GO_BINARIES := rota-controller rota rota-agent

.PHONY: all build deps test unit integration demo demo-down clean fmt vet bench-submit

all: build

deps:
	scripts/setup-deps

build: $(addprefix $(BIN)/,$(GO_BINARIES)) plugins

$(BIN)/rota-controller: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./controller/cmd/rota-controller

$(BIN)/rota: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./controller/cmd/rota

FORCE:

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) dist

# --- rota-agent (agent/, packaging/agent/) ---
# nfpm builds the packages; pinned, fetched through the Go module proxy.
# (v2.43.0: later releases need modules the proxy does not serve here.)
NFPM        ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.43.0
PKG_VERSION ?= 0.1.0
PKG_ARCH    ?= $(shell $(GO) env GOARCH)

$(BIN)/rota-agent: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./agent/cmd/rota-agent

.PHONY: rpm deb bench-agent
rpm deb: $(BIN)/rota-agent
	mkdir -p dist
	PKG_VERSION=$(PKG_VERSION) PKG_ARCH=$(PKG_ARCH) $(NFPM) package --config packaging/agent/nfpm.yaml --packager $@ --target dist/

# CPU and RSS of the agent sampling 8 mock GPUs with 16 jobs at 1 Hz.
bench-agent:
	$(GO) run ./agent/bench -duration 60s
