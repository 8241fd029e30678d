# Cairn's build, test and benchmark targets. CI runs `make test` (see README).
GO       ?= go
PKGS     ?= ./...
TIMEOUT  ?= 20m

.PHONY: all build demo test testrace lint fmt vet fuzz bench bench-kv bench-cluster bench-colocation bench-packedrows bench-readplan bench-joinchoice deps chaos

all: build

deps:
	./scripts/deps.sh

build: deps
	$(GO) build $(PKGS)

# The README's "run it": an in-memory node with sample tables and a SQL
# shell on it (psql works too: the URL is printed first).
demo: deps
	$(GO) run ./cmd/cairn demo

# The README's test command. Lint first: it is cheap and fails fast.
test: deps lint
	$(GO) test -count=1 -timeout $(TIMEOUT) $(PKGS)

testrace: deps
	$(GO) test -race -count=1 -timeout 40m $(PKGS)

lint: fmt vet

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# The long chaos run (test/chaos): real cairn processes, every nemesis
# mixed (kills, pauses, partitions, clock offsets, lease transfers,
# splits, nodes added and decommissioned) under every workload (bank,
# list-append at SERIALIZABLE and REPEATABLE READ, registers, sets), for
# CHAOS_DURATION; CHAOS_SEED replays a run. `make test` runs the short
# subset (go test ./test/chaos/).
CHAOS_DURATION ?= 30m
CHAOS_SEED     ?= 0
chaos: deps
	CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_SEED=$(CHAOS_SEED) $(GO) test -count=1 -v -timeout 0 -run '^TestChaosLong$$' ./test/chaos/

# Short fuzzing of every decoder and rewriter (each for FUZZTIME).
FUZZTIME ?= 20s
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

# Benchmarks are programs that print ratios against a baseline measured in
# the same run; see bench/README.md.
bench: bench-kv bench-cluster

bench-kv:
	$(GO) run ./bench/kv

# Point reads and writes on an in-process cluster of 1 node (RF 1) and 3
# nodes (RF 3) over loopback gRPC, and leaseholder failover time.
BENCHFLAGS ?=
bench-cluster:
	$(GO) run ./bench/cluster $(BENCHFLAGS)

# The seed's colocation demo (seeds/colocated-tables.txt) on the simulated
# 3-region cluster of `cairn demo --nodes 3 --global`, leaders in us-west
# and spread (minutes: it loads 4 × 100,000 rows per placement).
bench-colocation:
	$(GO) run ./bench/colocation $(BENCHFLAGS)

# The packed-rows seed's comparisons (seeds/packed-rows.txt): packed rows
# against one key per column on a plain `cairn start` (tens of minutes at
# the seed's 1M rows; -rows scales it down).
bench-packedrows:
	$(GO) build -o bin/cairn-bench ./cmd/cairn
	$(GO) run ./bench/packedrows -cairn bin/cairn-bench $(BENCHFLAGS)

# Reads in storage order and the storage-aware join choice (issue 19) on a
# disk that plays an HDD or an object store (storage/simfs); minutes each.
# Both refuse to run at a load average of 4 or more (-force overrides).
bench-readplan:
	$(GO) run ./bench/readplan $(BENCHFLAGS)

bench-joinchoice:
	$(GO) run ./bench/joinchoice $(BENCHFLAGS)

# SQL logic tests (test/logic/) against a throwaway PostgreSQL 15: this is how
# every expected result in test/logic/testdata is validated. LOGICFLAGS passes
# runner flags, e.g. LOGICFLAGS='-file=joins -rewrite'.
LOGIC_PG_DIR  ?= /tmp/cairn-logic-pg
LOGIC_PG_PORT ?= 30900
LOGICFLAGS    ?=
.PHONY: logic-pg
logic-pg:
	./scripts/pg15.sh start $(LOGIC_PG_DIR) $(LOGIC_PG_PORT) >/dev/null
	CAIRN_LOGIC_ENGINE=postgres \
	CAIRN_LOGIC_URL='postgres://postgres@127.0.0.1:$(LOGIC_PG_PORT)/postgres?sslmode=disable' \
	$(GO) test -count=1 -run 'TestLogic' ./test/logic/ $(LOGICFLAGS); \
	rc=$$?; ./scripts/pg15.sh stop $(LOGIC_PG_DIR) $(LOGIC_PG_PORT); exit $$rc

# Real PostgreSQL clients (psql compared with PostgreSQL 15's output, pgbench
# -s 10 for 30 s in two protocols, sysbench oltp_read_write, psycopg2,
# psycopg 3, asyncpg, SQLAlchemy, Alembic, Django, pgjdbc, pgx, GORM,
# node-postgres, pg_dump, and the admin UI in headless Chromium) against a
# `cairn start` process, then the tests test/compat/audit.txt names for each
# item of issue 20; writes docs/compatibility.md. Installs the clients it
# needs (Debian packages, a Python venv, Maven, Go modules, npm), so it is
# outside `make test`. compat-regen rewrites
# test/compat/psql.expected from a throwaway PostgreSQL 15. See
# test/compat/run.sh.
.PHONY: compat compat-regen bench-pgbench
compat:
	./test/compat/run.sh

compat-regen:
	./test/compat/run.sh --regen

# pgbench against Cairn and PostgreSQL 15 in one run (ratios; median of 3).
bench-pgbench:
	./bench/pgbench/run.sh

# The admin UI rendered by headless Chromium (Debian's, installed if
# missing), with screenshots; outside `make test` because of the browser
# (also the "ui" step of `make compat`).
.PHONY: e2e
e2e:
	./test/e2e/admin_ui.sh
