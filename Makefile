# Only the benchmark lives here for now; everything else is plain `go`.
.PHONY: bench
bench: ## run the benchmark scenarios against Strata and kfake; writes docs/benchmarks.md
	bench/run
