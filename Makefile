# EGS in C: one Makefile for everything.  `make` builds build/bin/{egsd,egs-agent,egsctl};
# `make test` builds a sanitizer tree too and runs unit and API tests; `make run` starts the demo.
CC       ?= cc
BUILD    ?= build
OPT      ?= -O2
SAN      ?=
PKGS     := libevent libevent_pthreads libevent_openssl openssl jansson sqlite3 libsodium libcurl yaml-0.1 libpq
WARN     := -Wall -Wextra -Wshadow -Wformat=2 -Wvla -Werror
CFLAGS   := -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) -Iinclude -Isrc -fno-strict-aliasing \
            $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -I/usr/include/postgresql
LDLIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -ldl -lm
ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif

CORE_SRC   := $(wildcard src/core/*.c)
STORE_SRC  := $(wildcard src/store/*.c)
SERVER_SRC := $(filter-out src/server/main.c,$(wildcard src/server/*.c))
AGENT_SRC  := $(filter-out src/agent/main.c,$(wildcard src/agent/*.c))
CLIENT_SRC := $(filter-out src/client/egsctl.c src/client/ctl_%.c,$(wildcard src/client/*.c))
CTL_SRC    := $(wildcard src/client/ctl_*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIBCORE   := $(BUILD)/lib/libegscore.a
LIBSERVER := $(BUILD)/lib/libegsserver.a
LIBCLIENT := $(BUILD)/lib/libegs.a
LIBAGENT  := $(BUILD)/lib/libegsagent.a
BINS      := $(BUILD)/bin/egsd $(BUILD)/bin/egs-agent $(BUILD)/bin/egsctl
UNITS     := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))

.PHONY: all deps test unit api run clean format install portal portal-test bench-portal bench bench-tls bench-deep bench-pg bench-ha bench-planner bench-queue bench-map bench-mem egs-sim sim bench-slurm
all: deps-check $(BINS) $(BUILD)/bench/egs-sim

deps-check:
	@pkg-config --exists $(PKGS) || ./scripts/deps.sh

deps:
	./scripts/deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIBCORE): $(call obj,$(CORE_SRC) $(STORE_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIBSERVER): $(call obj,$(SERVER_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIBCLIENT): $(call obj,$(CLIENT_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(LIBAGENT): $(call obj,$(AGENT_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^

# The portal (web/, docs/portal.md): npm builds it into $(BUILD)/portal, web/tools/embed.mjs turns that
# into a C table (with gzip copies) that only egsd links.  No npm: a clear error, not a portal-less egsd.
PORTAL_DIR  := $(BUILD)/portal
PORTAL_GEN  := $(BUILD)/gen/portal_assets.c
PORTAL_OBJ  := $(BUILD)/obj/gen/portal_assets.o
PORTAL_DEPS := web/package.json $(shell find web/src web/tools -type f 2>/dev/null)
web/node_modules/.package-lock.json: web/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "error: building egsd's portal needs Node.js and npm" \
		"(Debian: apt-get install nodejs npm, or ./scripts/deps.sh)" >&2; exit 1; }
	cd web && npm ci --no-audit --no-fund --loglevel=error
	@touch $@
$(PORTAL_DIR)/index.html: web/node_modules/.package-lock.json $(PORTAL_DEPS)
	cd web && node tools/build.mjs $(abspath $(PORTAL_DIR))
$(PORTAL_GEN): $(PORTAL_DIR)/index.html web/tools/embed.mjs
	@mkdir -p $(dir $@)
	node web/tools/embed.mjs $(PORTAL_DIR) $@
$(PORTAL_OBJ): $(PORTAL_GEN)
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(CFLAGS) -c $< -o $@
portal: $(PORTAL_DIR)/index.html

# The portal in a real browser (tests/portal: playwright-core driving Debian's chromium against real
# egsd and agents); screenshots land in $(BUILD)/portal-artifacts.
tests/portal/node_modules/.package-lock.json: tests/portal/package-lock.json
	cd tests/portal && npm ci --no-audit --no-fund --loglevel=error
	@touch $@
portal-test: all tests/portal/node_modules/.package-lock.json
	@test -x /usr/bin/chromium || { echo "error: the portal tests need Debian's chromium (./scripts/deps.sh)" >&2; exit 1; }
	cd tests/portal && node --test *.test.mjs

# The portal's first load, gzipped, against its 200 KB budget (bench/portal/README.md).
bench-portal: all
	node bench/portal/size.mjs

$(BUILD)/bin/egsd: $(call obj,src/server/main.c src/client/manifest.c) $(PORTAL_OBJ) $(LIBSERVER) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bin/egs-agent: $(call obj,src/agent/main.c) $(LIBAGENT) $(LIBCLIENT) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/bin/egsctl: $(call obj,src/client/egsctl.c $(CTL_SRC)) $(LIBCLIENT) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(call obj,tests/unit/%.c) $(LIBSERVER) $(LIBAGENT) $(LIBCLIENT) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# The fake libnvidia-ml.so the NVML backend's tests load (tests/fake-nvml/fake_nvml.c): full and minimal.
FAKE_NVML := $(BUILD)/lib/libnvidia-ml-fake.so $(BUILD)/lib/libnvidia-ml-fake-min.so
$(BUILD)/lib/libnvidia-ml-fake.so: tests/fake-nvml/fake_nvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -fPIC -shared -o $@ $<
$(BUILD)/lib/libnvidia-ml-fake-min.so: tests/fake-nvml/fake_nvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O2 $(WARN) -fPIC -shared -DFAKE_NVML_MINIMAL -o $@ $<

# Runs UNIT_JOBS test binaries at once (default: one per core), each one's output kept in its .log beside
# it and printed in full when it fails.
UNIT_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
unit: deps-check $(FAKE_NVML) $(UNITS)
	@printf '%s\n' $(UNITS) | xargs -P $(UNIT_JOBS) -I{} sh -c 'if {} >{}.log 2>&1; then \
		echo "== {}: $$(grep -h "PASSED" {}.log | tail -n 1)"; else echo "== {} FAILED:"; cat {}.log; exit 1; fi'

# Unit tests under ASan+UBSan in their own tree, then API tests against the optimized binaries,
# once with egsd on SQLite and once on PostgreSQL, in parallel (scripts/api-tests.sh), with the portal's
# browser tests beside them (their output in build/portal-test.log, printed when they fail; they draw
# ports from the kernel's ephemeral range, the API runs below it), then the fuzzers' smoke.  The builds
# and the unit and fuzz runs use TEST_JOBS jobs (default: one per core; CI calls plain `make test`).
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test: deps-check
	$(MAKE) -j$(TEST_JOBS) UNIT_JOBS=$(TEST_JOBS) SAN=1 OPT=-O1 BUILD=build/san unit
	$(MAKE) -j$(TEST_JOBS) all tests/portal/node_modules/.package-lock.json
	/usr/bin/python3 -m pytest -q -x -p no:cacheprovider sdk/python/tests
	@./scripts/api-tests.sh & api=$$!; \
	$(MAKE) --no-print-directory portal-test >build/portal-test.log 2>&1; portal=$$?; \
	wait $$api; api=$$?; \
	echo "== portal tests (exit $$portal):"; \
	if [ $$portal -ne 0 ]; then cat build/portal-test.log; else grep -E "^# (pass|fail) " build/portal-test.log; fi; \
	[ $$api -eq 0 ] && [ $$portal -eq 0 ]
	$(MAKE) -j$(TEST_JOBS) fuzz-smoke

# The API suite on both stores at once (SQLite, and PostgreSQL on a throwaway server).
api: all
	./scripts/api-tests.sh

run: all
	./scripts/run-demo.sh

bench: all
	./bench/api/run.sh

# egsd's reads over HTTPS against plain HTTP, same binary and data, as a ratio (bench/api/README.md).
bench-tls: all
	./bench/api/tls.sh

# The deep-queue case (issue 16): 100,000 GPRs queued at priorities 1-300 on 10,000 nodes, then
# creates at random priorities mixed with reads (bench/api/README.md).
bench-deep: all
	./bench/api/deep.sh

# Durable creates/s with egsd on PostgreSQL, SQLite's figure from the same run beside it.
bench-pg: all
	./bench/pg/run.sh

# Reads on a follower beside the leader, and failover time over 20 kills (docs/ha.md).
bench-ha: all
	/usr/bin/python3 bench/ha/run.py

# Slurm 22.05 (installed from Debian when missing) against egsd: estimates and submission rates.
bench-slurm: all
	./bench/peer-slurm/run.sh

$(BUILD)/bench/bench_plan: $(call obj,bench/planner/bench_plan.c) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# How far the thread CPU clock egsd times its slices with can be trusted here (cpu_clock.c).
$(BUILD)/bench/cpu_clock: $(call obj,bench/planner/cpu_clock.c)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench-planner: deps-check $(BUILD)/bench/bench_plan
	$(BUILD)/bench/bench_plan
	$(BUILD)/bench/bench_plan 10000 100000 20 1

# The trace simulator (bench/sim/README.md); `make all` builds it too, for tests/api/test_sim.py.
$(BUILD)/bench/egs-sim: $(call obj,$(wildcard bench/sim/*.c)) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
egs-sim: deps-check $(BUILD)/bench/egs-sim
sim: egs-sim
	$(BUILD)/bench/egs-sim

# Memory and start-up of egsd with 1,000,000 GPRs in the store (bench/mem/README.md).
$(BUILD)/bench/egs-fill: $(call obj,bench/mem/fill.c) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bench-mem: all $(BUILD)/bench/egs-fill
	/usr/bin/python3 bench/mem/run.py

$(BUILD)/bench/bench_queue: $(call obj,bench/queue/bench_queue.c) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bench-queue: deps-check $(BUILD)/bench/bench_queue
	$(BUILD)/bench/bench_queue

# The longest single insert into the hash map, where a growth happens (bench/map/bench_map.c).
$(BUILD)/bench/bench_map: $(call obj,bench/map/bench_map.c) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bench-map: deps-check $(BUILD)/bench/bench_map
	$(BUILD)/bench/bench_map

# `make install` (PREFIX=/usr/local, DESTDIR for packaging): the three programs, the docs, bash
# completion and the systemd units (their ExecStart points at $(PREFIX)/bin); docs/kubernetes-install.md.
PREFIX     ?= /usr/local
BINDIR     := $(PREFIX)/bin
DOCDIR     := $(PREFIX)/share/doc/egs
UNITDIR    ?= $(PREFIX)/lib/systemd/system
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DOCDIR)/internals $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 0755 $(BINS) $(DESTDIR)$(BINDIR)/
	install -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 docs/internals/*.md $(DESTDIR)$(DOCDIR)/internals/
	install -m 0644 contrib/bash-completion/egsctl $(DESTDIR)$(PREFIX)/share/bash-completion/completions/egsctl
	for u in egsd egs-agent; do \
		sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' contrib/systemd/$$u.service \
			> $(DESTDIR)$(UNITDIR)/$$u.service && chmod 0644 $(DESTDIR)$(UNITDIR)/$$u.service || exit 1; \
	done

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj build/fuzz/obj -name '*.d' 2>/dev/null)

# ---- fuzzing: libFuzzer targets built with clang (fuzz/README.md) ----
# `make fuzz` runs each target for FUZZ_SECONDS (default 60) on a scratch copy of its committed seed
# corpus; `make fuzz-smoke` (part of `make test`) runs each for 10 seconds.  A crash stops the run and
# leaves its input in build/fuzz/.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_EGSD_SECONDS ?= $(FUZZ_SECONDS)
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -fno-strict-aliasing -fno-omit-frame-pointer \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
                $(shell pkg-config --cflags libevent jansson yaml-0.1 2>/dev/null)
FUZZ_CORE    := src/core/common.c src/core/util.c src/core/share.c
FUZZ_TARGETS := frame parsers manifest prom http body agent query json
FUZZ_BINS    := $(patsubst %,build/fuzz/fuzz_%,$(FUZZ_TARGETS))
# The targets that run a whole egsd in the process (fuzz/egsd_harness.h) link the server, the store and
# the core built with coverage and the sanitizers into build/fuzz/obj (incremental, like build/obj).
FUZZ_EGSD_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 $(WARN) -Iinclude -Isrc -fno-strict-aliasing \
                -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
                $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -I/usr/include/postgresql
FUZZ_EGSD_OBJ := $(patsubst %.c,build/fuzz/obj/%.o,$(CORE_SRC) $(STORE_SRC) $(SERVER_SRC) src/client/manifest.c)
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC (fuzz) $<"
	@$(FUZZ_CC) $(FUZZ_EGSD_CFLAGS) -MMD -MP -c $< -o $@
build/fuzz/libegsd-fuzz.a: $(FUZZ_EGSD_OBJ)
	@rm -f $@; ar rcs $@ $^
build/fuzz/fuzz_http build/fuzz/fuzz_body build/fuzz/fuzz_agent build/fuzz/fuzz_query: build/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/egsd_harness.c \
		fuzz/egsd_harness.h build/fuzz/libegsd-fuzz.a
	$(FUZZ_CC) $(FUZZ_EGSD_CFLAGS) -fsanitize=fuzzer -o $@ fuzz/fuzz_$*.c fuzz/egsd_harness.c \
		build/fuzz/libegsd-fuzz.a $(LDLIBS)

build/fuzz/fuzz_frame: fuzz/fuzz_frame.c src/server/frame.c tests/unit/frame_feed.h $(FUZZ_CORE)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(filter-out %.h,$^) -lm
build/fuzz/fuzz_parsers: fuzz/fuzz_parsers.c $(FUZZ_CORE)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ -lm
build/fuzz/fuzz_json: fuzz/fuzz_json.c src/server/json_fast.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ -ljansson -lm
build/fuzz/fuzz_prom: fuzz/fuzz_prom.c src/agent/prom.c src/core/map.c $(FUZZ_CORE)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ -lsodium -lm
build/fuzz/fuzz_manifest: fuzz/fuzz_manifest.c src/client/manifest.c src/client/manifest_load.c $(FUZZ_CORE)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $^ -ljansson -lyaml -lm

# One target per fuzzer, so that `make -jN fuzz` (and `make test`) runs N of them at once.
FUZZ_RUNS := $(patsubst %,fuzz-run-%,$(FUZZ_TARGETS))
.PHONY: fuzz fuzz-smoke $(FUZZ_RUNS)
fuzz: $(FUZZ_RUNS)
$(FUZZ_RUNS): fuzz-run-%: build/fuzz/fuzz_%
	@t=$*; rm -rf build/fuzz/corpus-$$t; mkdir -p build/fuzz/corpus-$$t; cp fuzz/corpus/$$t/* build/fuzz/corpus-$$t/; \
	secs=$(FUZZ_SECONDS); case $$t in http|body|agent) secs=$(FUZZ_EGSD_SECONDS);; esac; \
	build/fuzz/fuzz_$$t -max_total_time=$$secs -max_len=8192 -print_final_stats=1 \
		-artifact_prefix=build/fuzz/crash-$$t- build/fuzz/corpus-$$t 2>build/fuzz/fuzz_$$t.log \
		|| { echo "== fuzz_$$t for $$secs s FAILED:"; tail -40 build/fuzz/fuzz_$$t.log; exit 1; }; \
	echo "== fuzz_$$t for $$secs s:" $$(grep -E "stat::number_of_executed_units|stat::peak_rss_mb" build/fuzz/fuzz_$$t.log)
# The in-process egsd targets take about a second to start: 9 s of fuzzing keeps each at 10 s.
fuzz-smoke:
	$(MAKE) fuzz FUZZ_SECONDS=10 FUZZ_EGSD_SECONDS=9
