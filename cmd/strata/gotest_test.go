package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// goTestRun is one `go test -json` run of a client's own test suite
// (franz-go's kgo tests): the `go test -v` text its events carry, and each
// test's own output, so that a failure shows every failed test's lines
// however early they were printed in a run of hundreds of parallel tests,
// not only the run's last kilobytes.
type goTestRun struct {
	text       []byte            // the -v text, as `go test -v` prints it
	pass, fail []string          // tests and subtests, in the order they ended
	own        map[string][]byte // per test: the output test2json attributes to it
	other      []byte            // output of no test: build errors, the package's verdict
}

// runGoTest runs `go test -count=1 -json args... .` in dir with env; ctx
// bounds it.
func runGoTest(ctx context.Context, dir string, env []string, args ...string) (*goTestRun, error) {
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"test", "-count=1", "-json"}, args...), ".")...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return parseGoTestJSON(out), err
}

// parseGoTestJSON reads a `go test -json` stream; a line that is not an
// event (go's own messages on stderr, a crash of test2json) is output of
// no test.
func parseGoTestJSON(out []byte) *goTestRun {
	r := &goTestRun{own: map[string][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev struct{ Action, Test, Output string }
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			r.text = append(append(r.text, line...), '\n')
			r.other = append(append(r.other, line...), '\n')
			continue
		}
		switch ev.Action {
		case "output", "build-output":
			r.text = append(r.text, ev.Output...)
			if ev.Test != "" {
				r.own[ev.Test] = append(r.own[ev.Test], ev.Output...)
			} else {
				r.other = append(r.other, ev.Output...)
			}
		case "pass":
			if ev.Test != "" {
				r.pass = append(r.pass, ev.Test)
			}
		case "fail":
			if ev.Test != "" {
				r.fail = append(r.fail, ev.Test)
			}
		}
	}
	return r
}

// Bounds of a failure report: a failed test's own lines beyond
// reportPerTest keep their end (where a test's verdict is), and the run's
// last reportTail bytes follow (a panic, a timeout's goroutine dump start).
const (
	reportPerTest = 32 << 10
	reportTail    = 8 << 10
)

// report is what a failed run shows: every failed test's own output, the
// output of no test, then the tail of the whole text. The whole text is
// kept in a file whose path the report names (outside t.TempDir, which
// the test's end removes), unless it cannot be written.
func (r *goTestRun) report(t *testing.T, name string) string {
	t.Helper()
	var b bytes.Buffer
	if f, err := os.CreateTemp("", "strata-"+name+"-*.log"); err == nil {
		_, werr := f.Write(r.text)
		if cerr := f.Close(); werr == nil && cerr == nil {
			fmt.Fprintf(&b, "the whole output (%d bytes) is kept in %s\n", len(r.text), f.Name())
		}
	}
	for _, name := range r.fail {
		own := r.own[name]
		fmt.Fprintf(&b, "=== the output of failed %s (%d bytes)\n", name, len(own))
		if len(own) > reportPerTest {
			fmt.Fprintf(&b, "[... its first %d bytes left out]\n", len(own)-reportPerTest)
			own = own[len(own)-reportPerTest:]
		}
		b.Write(own)
	}
	if len(r.other) > 0 {
		other := r.other[max(0, len(r.other)-reportPerTest):]
		fmt.Fprintf(&b, "=== output of no test\n%s", other)
	}
	tail := r.text[max(0, len(r.text)-reportTail):]
	fmt.Fprintf(&b, "=== the last %d bytes of the output\n%s", len(tail), tail)
	return b.String()
}

// passed reports whether every test of names passed.
func (r *goTestRun) passed(names ...string) bool {
	for _, n := range names {
		if !slices.Contains(r.pass, n) {
			return false
		}
	}
	return true
}

// TestGoTestRunReportsEveryFailedTest: of a real `go test -json` run in
// which a failing test's lines come first, interleaved with a parallel
// test's 200 KiB of output, the report keeps the failed test's lines (its
// own and its failed subtest's), leaves the passing test's out, and
// names a file that holds the whole output.
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
`
	for name, body := range map[string]string{"go.mod": "module p\n\ngo 1.24\n", "p_test.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := runGoTest(ctx, dir, append(os.Environ(), "GOFLAGS=-mod=mod"), "-parallel", "2")
	if err == nil {
		t.Fatal("the run passed, want it to fail")
	}
	if !r.passed("TestNoise") || !slices.Equal(r.fail, []string{"TestBroken/sub", "TestBroken"}) {
		t.Fatalf("passed %v, failed %v", r.pass, r.fail)
	}
	if len(r.text) < 200<<10 {
		t.Fatalf("the run printed %d bytes, want more than 200 KiB", len(r.text))
	}
	rep := r.report(t, "selftest")
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
	if kept, err := os.ReadFile(m[1]); err != nil || !bytes.Equal(kept, r.text) {
		t.Fatalf("kept file %s: %v, %d bytes, want the %d of the output", m[1], err, len(kept), len(r.text))
	}
}
