# Cairn's build, test and benchmark targets. CI runs `make test` (see README).
GO       ?= go
PKGS     ?= ./...
TIMEOUT  ?= 20m

.PHONY: all build test testrace lint fmt vet fuzz bench bench-kv deps

all: build

deps:
	./scripts/deps.sh

build: deps
	$(GO) build $(PKGS)

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

# Short fuzzing of every decoder and rewriter (each for FUZZTIME).
FUZZTIME ?= 20s
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

# Benchmarks are programs that print ratios against a baseline measured in
# the same run; see bench/README.md.
bench: bench-kv

bench-kv:
	$(GO) run ./bench/kv
