# acceptd - build, test and benchmark. GNU make.
#
# Two build trees with the same layout:
#   build/       -O2            build/libacceptd.a, build/acceptd, build/tests/LAYER/test_X
#   build/asan/  -O1 ASan+UBSan build/asan/libacceptd.a, build/asan/acceptd, build/asan/tests/LAYER/test_X
# and a third, built by clang for libFuzzer: build/fuzz/libacceptd.a and build/fuzz/fuzz_X (fuzz/fuzz_X.c).
# The layers' folders and server.c go into libacceptd.a, src/worker/ and src/cli/ into libworker.a; acceptd is main.c plus
# both, and each tests/unit/LAYER/test_X.c (testing src/LAYER/X.c) is linked with them and cmocka (libworker.a
# first: the linker reads archives in order, and the clients use common/ from libacceptd.a, never the reverse).
#
# A unit test may `#include "layer/x.c"` to reach x.c's statics. That is safe because tests link the
# library as an archive, not as a list of objects: the linker pulls an archive member only to resolve a symbol
# still undefined, and the test object already defines every external symbol of x.c, so x.o is never pulled
# (and never defined twice). Do not change the test link line to list objects instead of the archive.
#
# `make test` is what CI runs (.ci/run). Its steps run as separate make invocations, in order, so the
# Makefile is read again after deps.sh has installed pkg-config and the libraries.

CC = cc
AR = ar

PKGS = libh2o-evloop jansson sqlite3 yaml-0.1 libcrypto libssl libcurl libpq liburing
# Expanded once, on first use (not at parse time): `make test` runs deps.sh before anything compiles.
PKG_CFLAGS = $(eval PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS)))$(PKG_CFLAGS)
PKG_LIBS = $(eval PKG_LIBS := $(shell pkg-config --libs $(PKGS)))$(PKG_LIBS)

WARNINGS = -Wall -Wextra -Werror -Wformat=2 -Wno-unused-parameter -Wno-missing-field-initializers
# src/http/h2o-compat/ holds what libh2o's internal headers include but Debian does not ship (khash.h).
CPPFLAGS = -D_GNU_SOURCE -DH2O_USE_LIBUV=0 -Isrc -Isrc/http/h2o-compat
BASE_CFLAGS = -std=c11 -g $(WARNINGS) $(PKG_CFLAGS)
LIBS = $(PKG_LIBS) -lpthread -lm

OPT_FLAGS = -O2
# The plain build allocates with tcmalloc (docs/operations.md, "Memory allocator"): a job's life moves its
# memory between the event loop and the writer thread, which glibc's per-thread arenas handle at a cost (the
# e2e bench's event loop spent a quarter of its time in malloc and free). ASan and the fuzzers bring their own.
MALLOC_LIBS = -ltcmalloc_minimal
ASAN_FLAGS = -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
# Extra flags from the command line, e.g. `make EXTRA_CFLAGS=-DAD_DEBUG`.
EXTRA_CFLAGS ?=

ASAN_ENV = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# A folder per layer (README, "Layout"); src/worker/ is the `acceptd worker` client and src/cli/ the `acceptd
# submit` and `acceptd jobs` client, both in libworker.a: linked into the binary but kept out of the daemon's
# library. scripts/layers.sh checks which folder may include which.
LAYERS = common job store core hub webhook http api
LIB_SRCS = $(wildcard $(addsuffix /*.c,$(addprefix src/,$(LAYERS)))) src/server.c
WORKER_SRCS = $(wildcard src/worker/*.c src/cli/*.c)
UNIT_SRCS = $(wildcard tests/unit/*/test_*.c)
UNIT_NAMES = $(patsubst tests/unit/%.c,%,$(UNIT_SRCS))
BLACKBOX_TESTS = $(wildcard tests/blackbox/*.test.mjs)
# What needs the PostgreSQL store (two nodes on one database, the server's failures): `make blackbox-pg` only.
BLACKBOX_PG_TESTS = $(wildcard tests/blackbox/cluster/*.test.mjs)
# Unit tests that need a PostgreSQL server (ACCEPTD_TEST_PG; without it they fail): `make blackbox-pg` runs them,
# `make unit` the others (LOCAL_UNITS).
PG_UNITS = $(filter store/test_store_pg,$(UNIT_NAMES))
LOCAL_UNITS = $(filter-out $(PG_UNITS),$(UNIT_NAMES))
PG_DIR := /tmp/acceptd-pg-$(shell printf '%s' '$(CURDIR)' | cksum | cut -d' ' -f1)
PG_PORT = 55433
FORMAT_FILES = $(wildcard src/*.c src/*.h src/*/*.c src/*/*.h tests/unit/*.h tests/unit/*/*.c fuzz/*.c)
FUZZ_NAMES = $(patsubst fuzz/%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_CC = clang
FUZZ_FLAGS = -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
# Seconds each fuzz target runs in `make fuzz` (and so in `make test`).
FUZZ_SECONDS ?= 20

.PHONY: all deps install uninstall layers unit unit-asan fuzz blackbox blackbox-asan blackbox-pg clients-python clients-node test run bench format format-check checksrc clean
.DEFAULT_GOAL := all
MAKEFLAGS += --no-print-directory

all: build/acceptd

# Compile lines are shown as "CC file"; `make V=1` shows the full commands.
ifeq ($(V),1)
Q =
say = @true
else
Q = @
say = @echo
endif

# build_tree(DIR, FLAGS, LIBS): the rules for one build tree; LIBS are linked before the common ones.
define build_tree
$(1)/obj/%.o: src/%.c
	@mkdir -p $$(@D)
	$$(say) "  CC      $$@"
	$$(Q)$$(CC) $$(CPPFLAGS) $$(BASE_CFLAGS) $(2) $$(EXTRA_CFLAGS) -MMD -MP -c -o $$@ $$<

$(1)/tests/%.o: tests/unit/%.c
	@mkdir -p $$(@D)
	$$(say) "  CC      $$@"
	$$(Q)$$(CC) $$(CPPFLAGS) -Itests/unit $$(BASE_CFLAGS) $(2) $$(EXTRA_CFLAGS) -MMD -MP -c -o $$@ $$<

$(1)/libacceptd.a: $(patsubst src/%.c,$(1)/obj/%.o,$(LIB_SRCS))
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(say) "  AR      $$@"
	$$(Q)$$(AR) rcs $$@ $$^

$(1)/libworker.a: $(patsubst src/%.c,$(1)/obj/%.o,$(WORKER_SRCS))
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(say) "  AR      $$@"
	$$(Q)$$(AR) rcs $$@ $$^

$(1)/acceptd: $(1)/obj/main.o $(1)/libacceptd.a $(1)/libworker.a
	$$(say) "  LINK    $$@"
	$$(Q)$$(CC) $(2) $$(EXTRA_CFLAGS) -o $$@ $$^ $(3) $$(LIBS)

$(addprefix $(1)/tests/,$(UNIT_NAMES)): $(1)/tests/%: $(1)/tests/%.o $(1)/libworker.a $(1)/libacceptd.a
	$$(say) "  LINK    $$@"
	$$(Q)$$(CC) $(2) $$(EXTRA_CFLAGS) -o $$@ $$^ -lcmocka $(3) $$(LIBS)
endef

$(eval $(call build_tree,build,$(OPT_FLAGS),$(MALLOC_LIBS)))
$(eval $(call build_tree,build/asan,$(ASAN_FLAGS)))

# The library for the fuzz targets: instrumented for libFuzzer's coverage, linked with its driver.
build/fuzz/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(say) "  CLANG   $@"
	$(Q)$(FUZZ_CC) $(CPPFLAGS) $(BASE_CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

build/fuzz/libacceptd.a: $(patsubst src/%.c,build/fuzz/obj/%.o,$(LIB_SRCS) $(WORKER_SRCS))
	@rm -f $@
	$(say) "  AR      $@"
	$(Q)$(AR) rcs $@ $^

$(addprefix build/fuzz/,$(FUZZ_NAMES)): build/fuzz/%: fuzz/%.c build/fuzz/libacceptd.a
	$(say) "  LINK    $@"
	$(Q)$(FUZZ_CC) $(CPPFLAGS) $(BASE_CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< \
		build/fuzz/libacceptd.a $(LIBS)

# embed(STEM, FILES): src/STEM.c builds FILES into the binary with AD_EMBED (src/common/embed.h). The compiler
# does not see them, so each tree's object is made to depend on them here, e.g.
# $(eval $(call embed,api/api_openapi,docs/openapi.json)).
embed = $(foreach t,build build/asan build/fuzz,$(t)/obj/$(1).o): $(2)
$(eval $(call embed,api/api_ui,ui/index.html ui/app.js ui/style.css))
$(eval $(call embed,api/api_openapi,docs/openapi.json))

# The commit the binary is built from, for `acceptd --version` and acceptd_build_info on /metrics (`make
# COMMIT=...` overrides it, e.g. for a release tarball): AD_COMMIT in every object, but
# only the objects in COMMIT_OBJS use it, so only they are rebuilt when it changes. build/commit.stamp holds
# the value and is rewritten only when it differs, so an unchanged commit rebuilds nothing.
COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
CPPFLAGS += -DAD_COMMIT='"$(COMMIT)"'
COMMIT_OBJS = main api/api
$(foreach t,build build/asan,$(addprefix $(t)/obj/,$(addsuffix .o,$(COMMIT_OBJS)))): build/commit.stamp

build/commit.stamp: FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = '$(COMMIT)' ] || echo '$(COMMIT)' >$@

.PHONY: FORCE
FORCE:

-include $(wildcard build/obj/*.d build/obj/*/*.d build/tests/*/*.d build/asan/obj/*.d build/asan/obj/*/*.d \
	build/asan/tests/*/*.d build/fuzz/obj/*.d build/fuzz/obj/*/*.d build/fuzz/*.d)

deps:
	bash scripts/deps.sh

node_modules/.package-lock.json: package-lock.json
	bash scripts/deps.sh

# run_units(DIR, ENV): run every unit test binary of a tree; all run, the target fails if any failed.
define run_units
	@pass=0; fail=0; failed=; \
	for t in $(LOCAL_UNITS); do \
		echo "== $(1)/tests/$$t"; \
		if $(2) $(1)/tests/$$t; then pass=$$((pass + 1)); else fail=$$((fail + 1)); failed="$$failed $$t"; fi; \
	done; \
	echo "unit($(1)): $$pass binaries passed, $$fail failed$${failed:+:$$failed}"; \
	[ $$fail -eq 0 ]
endef

unit: $(addprefix build/tests/,$(LOCAL_UNITS))
	$(call run_units,build,)

unit-asan: $(addprefix build/asan/tests/,$(LOCAL_UNITS))
	$(call run_units,build/asan,$(ASAN_ENV))

# Each fuzz target runs FUZZ_SECONDS from its seeds in fuzz/corpus/NAME/, copied to a temporary directory so
# that what it learns does not touch the checkout. A crash, leak or failed check fails the target; its input is
# kept as build/fuzz/NAME-crash-* and the end of the log is printed.
fuzz: $(addprefix build/fuzz/,$(FUZZ_NAMES))
	@fail=0; \
	for t in $(FUZZ_NAMES); do \
		corpus=$$(mktemp -d); cp fuzz/corpus/$${t#fuzz_}/* $$corpus/; \
		if $(ASAN_ENV) build/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
			-artifact_prefix=build/fuzz/$$t- $$corpus >build/fuzz/$$t.log 2>&1; then \
			echo "fuzz: $$t: $$(grep -o '^Done [0-9]* runs' build/fuzz/$$t.log | cut -d' ' -f2) runs," \
				"$$(ls $$corpus | wc -l) inputs in its corpus"; \
		else \
			tail -40 build/fuzz/$$t.log; echo "fuzz: $$t FAILED (log: build/fuzz/$$t.log)"; fail=1; \
		fi; \
		rm -rf $$corpus; \
	done; \
	[ $$fail -eq 0 ]

# Node 20's `node --test DIR` does not treat DIR as a folder of tests, so the files are listed.
# Test files read ACCEPTD_BIN (absolute path of the binary under test); ACCEPTD_SANITIZED=1 tells them the
# binary is the slower ASan build.
ifeq ($(strip $(BLACKBOX_TESTS)),)
blackbox blackbox-asan blackbox-pg:
	@echo "$@: no tests/blackbox/*.test.mjs yet"
else
blackbox: build/acceptd node_modules/.package-lock.json
	ACCEPTD_BIN=$(abspath build/acceptd) node --test --test-concurrency=2 $(BLACKBOX_TESTS)

blackbox-asan: build/asan/acceptd node_modules/.package-lock.json
	ACCEPTD_BIN=$(abspath build/asan/acceptd) ACCEPTD_SANITIZED=1 $(ASAN_ENV) \
		node --test --test-concurrency=2 $(BLACKBOX_TESTS)

# The same files, and those of tests/blackbox/cluster/, against the PostgreSQL store, with the plain and then the
# ASan+UBSan binary, on a throwaway cluster (scripts/pg.sh) in PG_DIR that is stopped and removed at the end whatever the outcome; the harness
# gives each daemon a fresh database on it (ACCEPTD_TEST_PG, see tests/blackbox/lib/daemon.mjs). The
# PostgreSQL unit tests (PG_UNITS) run first, plain and under ASan+UBSan, each on a database of its own and
# killed after 5 minutes (a test stuck on a lock must not hang CI). PG_DIR is per checkout and short (a socket
# path has at most 107 bytes); the server has no TCP listener, so PG_PORT only names its socket.
blackbox-pg: build/acceptd build/asan/acceptd $(addprefix build/tests/,$(PG_UNITS)) \
		$(addprefix build/asan/tests/,$(PG_UNITS)) node_modules/.package-lock.json
	@url=$$(bash scripts/pg.sh start $(PG_DIR) $(PG_PORT)) || exit 1; \
	trap 'bash scripts/pg.sh stop $(PG_DIR)' EXIT; trap 'exit 130' INT TERM HUP; \
	echo "blackbox-pg: PostgreSQL at $$url"; \
	status=0; \
	for t in $(PG_UNITS); do \
		echo "== build/tests/$$t"; \
		db=$$(bash scripts/pg.sh createdb $(PG_DIR) $(PG_PORT) $$t) && ACCEPTD_TEST_PG=$$db timeout 300 build/tests/$$t || status=1; \
		echo "== build/asan/tests/$$t"; \
		db=$$(bash scripts/pg.sh createdb $(PG_DIR) $(PG_PORT) $${t}_asan) && \
			ACCEPTD_TEST_PG=$$db $(ASAN_ENV) timeout 300 build/asan/tests/$$t || status=1; \
	done; \
	echo "ACCEPTD_BIN=$(abspath build/acceptd) ACCEPTD_TEST_PG=$$url node --test --test-concurrency=2 ..."; \
	ACCEPTD_BIN=$(abspath build/acceptd) ACCEPTD_TEST_PG=$$url node --test --test-concurrency=2 $(BLACKBOX_TESTS) $(BLACKBOX_PG_TESTS) || status=1; \
	echo "ACCEPTD_BIN=$(abspath build/asan/acceptd) ACCEPTD_SANITIZED=1 ACCEPTD_TEST_PG=$$url node --test ..."; \
	ACCEPTD_BIN=$(abspath build/asan/acceptd) ACCEPTD_SANITIZED=1 ACCEPTD_TEST_PG=$$url $(ASAN_ENV) \
		node --test --test-concurrency=2 $(BLACKBOX_TESTS) $(BLACKBOX_PG_TESTS) || status=1; \
	exit $$status
endif

# The Python client library (clients/python): mypy --strict on it and its tests (Debian's python3-mypy, so
# Debian's python3 runs it), then its unittest suite against the real daemon, which each test module starts
# (killed after 20 minutes: a wait that never ends must fail the run, not hang it).
clients-python: build/acceptd
	/usr/bin/python3 -m mypy --strict clients/python/acceptd clients/python/tests
	cd clients/python && ACCEPTD_BIN=$(abspath build/acceptd) PYTHONPATH=. timeout 1200 python3 \
		-m unittest discover -s tests -t . -v

# The Node client library (clients/node): its types regenerated from docs/openapi.json and type-checked with
# tsc --noEmit (a change of the document the library does not follow fails here), then its tests against the
# real daemon (killed after 20 minutes, as the Python suite).
clients-node: build/acceptd node_modules/.package-lock.json
	node_modules/.bin/openapi-typescript docs/openapi.json -o clients/node/types/openapi.d.ts
	node_modules/.bin/tsc -p clients/node/tsconfig.json
	ACCEPTD_BIN=$(abspath build/acceptd) timeout 1200 node --test --test-concurrency=2 \
		$(wildcard clients/node/test/*.test.mjs)

# Each step is its own make run so that it sees what the step before installed or built; the first failure
# stops the rest. -j2 only parallelises compiling: each test target's recipe is a single command.
test:
	$(MAKE) deps
	$(MAKE) -j2 all
	$(MAKE) checksrc
	$(MAKE) layers
	$(MAKE) format-check
	$(MAKE) -j2 unit
	$(MAKE) -j2 unit-asan
	$(MAKE) -j2 fuzz
	$(MAKE) -j2 blackbox
	$(MAKE) clients-python
	$(MAKE) clients-node
	$(MAKE) -j2 blackbox-asan
	$(MAKE) -j2 blackbox-pg

# `make install` (PREFIX, DESTDIR and each directory overridable): the binary, the man page, an example
# configuration (never over an existing one) and the systemd unit, whose paths are filled in here from the
# directories. INSTALL_BIN installs another binary than build/acceptd (the tests install the one they test,
# so that nothing is compiled).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR ?= $(PREFIX)/lib/systemd/system
INSTALL ?= install
INSTALL_BIN ?= build/acceptd

install: $(INSTALL_BIN)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(SYSCONFDIR)/acceptd $(DESTDIR)$(UNITDIR)
	$(INSTALL) -m 0755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/acceptd
	$(INSTALL) -m 0644 docs/acceptd.1 $(DESTDIR)$(MANDIR)/man1/acceptd.1
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/acceptd/acceptd.yaml ]; then \
		echo "install: keeping $(DESTDIR)$(SYSCONFDIR)/acceptd/acceptd.yaml"; \
	else \
		echo "$(INSTALL) -m 0600 packaging/acceptd.yaml $(DESTDIR)$(SYSCONFDIR)/acceptd/acceptd.yaml"; \
		$(INSTALL) -m 0600 packaging/acceptd.yaml $(DESTDIR)$(SYSCONFDIR)/acceptd/acceptd.yaml; \
	fi
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' packaging/acceptd.service.in \
		>$(DESTDIR)$(UNITDIR)/acceptd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/acceptd.service

# The configuration stays: it is the operator's.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/acceptd $(DESTDIR)$(MANDIR)/man1/acceptd.1 $(DESTDIR)$(UNITDIR)/acceptd.service

run:
	$(MAKE) deps
	$(MAKE) -j2 all
	bash scripts/run.sh

bench:
	$(MAKE) deps
	$(MAKE) -j2 all
	bash bench/run.sh

format:
	$(if $(FORMAT_FILES),clang-format -i $(FORMAT_FILES),@echo "format: no files")

format-check:
	$(if $(FORMAT_FILES),clang-format --dry-run --Werror $(FORMAT_FILES),@echo "format-check: no files")

checksrc:
	bash scripts/checksrc.sh

# Includes point down the layers, and every source file is in a folder the README's Layout names.
layers:
	bash scripts/layers.sh

clean:
	rm -rf build
