# Builds Rota's two Slurm plugins from their C sources against the headers of
# the Slurm that will load them. The one recipe for them: the repository's
# `make plugins` runs it (SRC=cgo, GO_LIB=bin/go), and so does the source
# package a site builds (rota-slurm-plugins-*.src.rpm, the Debian source
# package), where it is the top Makefile.
#
#   job_submit_rota.so = cgo/job_submit_rota.c, the only code that reads
#       Slurm's structures, compiled here against slurm.h, linked with the
#       Go half (librota_go.a: a Go c-archive that needs no Slurm header,
#       built once by `make go-archive`);
#   spank_rota.so = cgo/spank_rota.c.
#
# SLURM_INCLUDE: the directory holding slurm.h (default: pkg-config's slurm,
# else /usr/include/slurm, else /usr/local/include/slurm). The plugins'
# plugin_version is that Slurm's SLURM_VERSION_NUMBER, micro release
# included: slurmctld loads a job_submit plugin of its own release only.

SRC     ?= src
GO_LIB  ?= lib
OUT     ?= .
CC      ?= cc
CFLAGS  ?= -O2 -g
PKG_CONFIG ?= pkg-config

ifeq ($(origin SLURM_INCLUDE),undefined)
SLURM_INCLUDE := $(firstword \
	$(foreach d,$(shell $(PKG_CONFIG) --variable=includedir slurm 2>/dev/null) /usr/include /usr/local/include,\
		$(if $(wildcard $(d)/slurm/slurm.h),$(d)/slurm)))
endif

.PHONY: all check-headers clean
all: $(OUT)/job_submit_rota.so $(OUT)/spank_rota.so

check-headers:
	@if [ -z "$(SLURM_INCLUDE)" ] || [ ! -f "$(SLURM_INCLUDE)/slurm.h" ] || [ ! -f "$(SLURM_INCLUDE)/slurm_version.h" ]; then \
		echo "rota-slurm-plugins: no Slurm headers found$(if $(SLURM_INCLUDE), in $(SLURM_INCLUDE)): install the development headers of the Slurm that runs slurmctld (RHEL: slurm-devel, Debian/Ubuntu: libslurm-dev), or set SLURM_INCLUDE to the directory holding its slurm.h" >&2; \
		exit 1; \
	fi
	@# The sources include <slurm/slurm.h>: -I names the directory above it.
	@if [ "$(notdir $(SLURM_INCLUDE))" != slurm ]; then \
		echo "rota-slurm-plugins: SLURM_INCLUDE=$(SLURM_INCLUDE): want the directory named slurm that holds slurm.h (e.g. /usr/include/slurm)" >&2; \
		exit 1; \
	fi

# The C object, and the Go half: -z nodelete because the Go runtime cannot
# be unloaded; -Bsymbolic so that the plugin's own symbols are never
# resolved to a same-named one of slurmctld's (what go's c-shared does).
$(OUT)/job_submit_rota.so: check-headers $(SRC)/job_submit_rota.c $(SRC)/rota_shim.h $(GO_LIB)/librota_go.a $(GO_LIB)/_cgo_export.h
	@mkdir -p $(OUT)
	$(CC) $(CFLAGS) -fPIC -Wall -Wextra -Wno-unused-parameter -I$(SLURM_INCLUDE)/.. -I$(SRC) -I$(GO_LIB) \
		-c $(SRC)/job_submit_rota.c -o $(OUT)/job_submit_rota.o
	$(CC) -shared -o $@ $(OUT)/job_submit_rota.o $(GO_LIB)/librota_go.a \
		-Wl,-z,nodelete -Wl,-Bsymbolic -lpthread $(LDFLAGS)
	@rm -f $(OUT)/job_submit_rota.o

$(OUT)/spank_rota.so: check-headers $(SRC)/spank_rota.c
	@mkdir -p $(OUT)
	$(CC) $(CFLAGS) -shared -fPIC -Wall -Wextra -Werror -I$(SLURM_INCLUDE)/.. -o $@ $(SRC)/spank_rota.c $(LDFLAGS)

clean:
	rm -f $(OUT)/job_submit_rota.so $(OUT)/spank_rota.so $(OUT)/job_submit_rota.o
