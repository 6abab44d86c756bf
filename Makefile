# edge-agent build, test and lint entry points. `make` runs lint, test, build.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin

# Use an installed staticcheck if there is one; otherwise run the pinned
# version through the module proxy, so a fresh machine needs nothing but Go.
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo "$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2")

.PHONY: all build build-arm64 test race short lint tidy-check demo failover handover fuzz fuzz-short clean

all: lint test build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/edge-agent ./cmd/edge-agent

# A static, stripped binary for the ARM64 gateways.
build-arm64:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/edge-agent-linux-arm64 ./cmd/edge-agent

test:
	$(GO) test -race -count=1 -timeout 20m ./...

race: test

short:
	$(GO) test -count=1 ./...

lint:
	@files="$$(gofmt -l .)"; if [ -n "$$files" ]; then \
		echo "gofmt: these files need formatting:"; echo "$$files"; exit 1; \
	fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

# Fails if go.mod or go.sum are not what `go mod tidy` makes them.
tidy-check:
	$(GO) mod tidy
	git diff --exit-code go.mod go.sum

demo:
	$(GO) run ./cmd/edge-agent demo

# Crash failover of 5 agent processes (H=100ms, k=3): p50/p99 over TRIALS.
TRIALS ?= 30
failover:
	$(GO) run ./internal/failoverbench -trials $(TRIALS)

# Graceful handover (SIGTERM to the leader), same measurement.
handover:
	$(GO) run ./internal/failoverbench -trials $(TRIALS) -mode term

# Native fuzzing, FUZZTIME per target (CI runs fuzz-short).
FUZZTIME ?= 10m
FUZZ_TARGETS := ./election:FuzzElection ./agent:FuzzDecode
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) || exit 1; done

fuzz-short:
	$(MAKE) fuzz FUZZTIME=20s

clean:
	rm -rf $(BIN)
