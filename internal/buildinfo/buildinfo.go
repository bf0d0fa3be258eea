// Package buildinfo says which Strata this binary is: its release version and
// the commit it was built from. Every place that reports a version (the
// `strata version` command, the start-up log line, `strata_build_info` in
// /metrics, loadgen results and reports) reads it from here, so they agree.
//
// The version is set at link time for releases:
//
//	go build -ldflags "-X github.com/strata-io/strata/internal/buildinfo.version=0.4.0" ./cmd/strata
//
// and the commit comes from the VCS stamp `go build` records in a git
// checkout (runtime/debug.ReadBuildInfo). Where that stamp is missing —
// `go run`, test binaries, GOFLAGS=-buildvcs=false, or a build context
// without .git such as the Docker image's — `make build` and the
// Dockerfile set it at link time instead:
//
//	go build -ldflags "-X github.com/strata-io/strata/internal/buildinfo.commitStamp=$(git rev-parse HEAD)" ./cmd/strata
//
// With neither, Commit is "unknown".
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// version is the release version; overridden with -ldflags -X at release
// builds. A development build says "dev".
var version = "dev"

// commitStamp is the commit set with -ldflags -X; it wins over the VCS
// stamp when set.
var commitStamp = ""

var (
	once     sync.Once
	commit   = "unknown"
	modified bool
)

func load() {
	once.Do(func() {
		if commitStamp != "" {
			commit, modified = strings.CutSuffix(commitStamp, "-dirty")
			return
		}
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			return
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	})
}

// Version returns the release version ("dev" for development builds).
func Version() string { return version }

// Commit returns the full commit hash the binary was built from, with a
// "-dirty" suffix when the work tree had uncommitted changes, or "unknown"
// when the build recorded none.
func Commit() string {
	load()
	if modified && commit != "unknown" {
		return commit + "-dirty"
	}
	return commit
}

// ShortCommit returns the first 12 characters of [Commit] (and its "-dirty"
// suffix), or "unknown".
func ShortCommit() string {
	c := Commit()
	if c == "unknown" {
		return c
	}
	dirty := ""
	if modified {
		dirty = "-dirty"
	}
	load()
	if len(commit) > 12 {
		return commit[:12] + dirty
	}
	return c
}

// GoVersion returns the Go toolchain the binary was built with.
func GoVersion() string { return runtime.Version() }

// String is the one-line form used in logs and `strata version`:
// "strata dev (commit 57a89cd0b1c2, go1.26.8)".
func String() string {
	return "strata " + Version() + " (commit " + ShortCommit() + ", " + GoVersion() + ")"
}
