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

GO_BINARIES := rota-controller rota

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
