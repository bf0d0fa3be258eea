package buildinfo

import (
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
