# Only the benchmark lives here for now; everything else is plain `go`.
.PHONY: build bench
# The commit is stamped at link time as well as by Go's VCS stamp, so the
# version Strata reports (strata version, strata_build_info, the start-up
# log, loadgen results) names it even where -buildvcs is off.
STAMP := github.com/strata-io/strata/internal/buildinfo
COMMIT := $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
VERSION ?= dev

build: ## build ./strata with its version and commit stamped
	go build -ldflags "-X $(STAMP).version=$(VERSION) -X $(STAMP).commitStamp=$(COMMIT)" -o strata ./cmd/strata

bench: ## run the benchmark scenarios against Strata and kfake; writes docs/benchmarks.md
	bench/run
