package testutil

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGoTestRunReportsEveryFailedTest: of a real `go test -json` run in
// which a failing test's lines come first, interleaved with a parallel
// test's 200 KiB of output (a third test skips), the report keeps the
// failed test's lines (its own and its failed subtest's), leaves the
// passing test's out, and names a file that holds the whole output.
func TestGoTestRunReportsEveryFailedTest(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs a test package")
	}
	dir := t.TempDir()
	src := `package p

import (
	"strings"
	"testing"
)

var half = make(chan struct{})

func TestNoise(t *testing.T) {
	t.Parallel()
	for i := range 4000 {
		if i == 2000 {
			close(half)
		}
		t.Log("noise", i, strings.Repeat("x", 40))
	}
}

func TestBroken(t *testing.T) {
	t.Parallel()
	t.Log("needle-early")
	<-half
	t.Run("sub", func(t *testing.T) { t.Error("needle-sub") })
	t.Error("needle-late")
}

func TestSkipped(t *testing.T) { t.Skip("not here") }
`
	for name, body := range map[string]string{"go.mod": "module p\n\ngo 1.24\n", "p_test.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := RunGoTest(ctx, dir, append(os.Environ(), "GOFLAGS=-mod=mod"), "-parallel", "2")
	if err == nil {
		t.Fatal("the run passed, want it to fail")
	}
	if !r.Passed("TestNoise") || !slices.Equal(r.Fail, []string{"TestBroken/sub", "TestBroken"}) || !slices.Equal(r.Skip, []string{"TestSkipped"}) {
		t.Fatalf("passed %v, failed %v, skipped %v", r.Pass, r.Fail, r.Skip)
	}
	if len(r.Text) < 200<<10 {
		t.Fatalf("the run printed %d bytes, want more than 200 KiB", len(r.Text))
	}
	rep := r.Report(t, "selftest")
	for _, want := range []string{"needle-early", "needle-sub", "needle-late", "--- FAIL: TestBroken"} {
		if !strings.Contains(rep, want) {
			t.Errorf("the report lacks %q:\n%s", want, rep)
		}
	}
	if strings.Contains(rep, "noise 10 ") {
		t.Errorf("the report holds the passing test's early lines:\n%.2000s", rep)
	}
	m := regexp.MustCompile(`kept in (\S+)`).FindStringSubmatch(rep)
	if m == nil {
		t.Fatalf("the report names no file:\n%.2000s", rep)
	}
	t.Cleanup(func() { os.Remove(m[1]) })
	if kept, err := os.ReadFile(m[1]); err != nil || !bytes.Equal(kept, r.Text) {
		t.Fatalf("kept file %s: %v, %d bytes, want the %d of the output", m[1], err, len(kept), len(r.Text))
	}
}
