package buildinfo

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestStringNamesVersionCommitAndGo(t *testing.T) {
	s := String()
	for _, want := range []string{"strata " + Version(), "commit " + ShortCommit(), GoVersion()} {
		if !strings.Contains(s, want) {
			t.Fatalf("String() = %q, missing %q", s, want)
		}
	}
	if Version() == "" || Commit() == "" {
		t.Fatalf("empty version %q or commit %q", Version(), Commit())
	}
}

// TestLinkTimeStampWins builds a binary with the commit stamped by
// -ldflags -X (as make build and the Dockerfile do) and with VCS stamping
// off, and checks the stamp is what it reports, "-dirty" kept.
func TestLinkTimeStampWins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "strata")
	stamp := "0123456789abcdef0123456789abcdef01234567-dirty"
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", bin,
		"-ldflags", "-X github.com/strata-io/strata/internal/buildinfo.version=9.9.9 -X github.com/strata-io/strata/internal/buildinfo.commitStamp="+stamp,
		"github.com/strata-io/strata/cmd/strata")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("strata version: %v\n%s", err, out)
	}
	if want := "strata 9.9.9 (commit 0123456789ab-dirty, "; !strings.HasPrefix(string(out), want) {
		t.Fatalf("strata version = %q, want prefix %q", out, want)
	}
}
