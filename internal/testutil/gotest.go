package testutil

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// GoTestRun is one `go test -json` run of a client's own test suite
// (franz-go's kgo tests): the `go test -v` text its events carry, and each
// test's own output, so that a failure shows every failed test's lines
// however early they were printed in a run of hundreds of parallel tests,
// not only the run's last kilobytes.
type GoTestRun struct {
	Text             []byte            // the -v text, as `go test -v` prints it
	Pass, Fail, Skip []string          // tests and subtests, in the order they ended
	Own              map[string][]byte // per test: the output test2json attributes to it
	Other            []byte            // output of no test: build errors, the package's verdict
}

// RunGoTest runs `go test -count=1 -json args... .` in dir with env; ctx
// bounds it.
func RunGoTest(ctx context.Context, dir string, env []string, args ...string) (*GoTestRun, error) {
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"test", "-count=1", "-json"}, args...), ".")...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return ParseGoTestJSON(out), err
}

// ParseGoTestJSON reads a `go test -json` stream; a line that is not an
// event (go's own messages on stderr, a crash of test2json) is output of
// no test.
func ParseGoTestJSON(out []byte) *GoTestRun {
	r := &GoTestRun{Own: map[string][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev struct{ Action, Test, Output string }
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			r.Text = append(append(r.Text, line...), '\n')
			r.Other = append(append(r.Other, line...), '\n')
			continue
		}
		switch ev.Action {
		case "output", "build-output":
			r.Text = append(r.Text, ev.Output...)
			if ev.Test != "" {
				r.Own[ev.Test] = append(r.Own[ev.Test], ev.Output...)
			} else {
				r.Other = append(r.Other, ev.Output...)
			}
		case "pass":
			if ev.Test != "" {
				r.Pass = append(r.Pass, ev.Test)
			}
		case "fail":
			if ev.Test != "" {
				r.Fail = append(r.Fail, ev.Test)
			}
		case "skip":
			if ev.Test != "" {
				r.Skip = append(r.Skip, ev.Test)
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

// Report is what a failed run shows: every failed test's own output, the
// output of no test, then the tail of the whole text. The whole text is
// kept in a file whose path the report names (outside t.TempDir, which
// the test's end removes), unless it cannot be written.
func (r *GoTestRun) Report(t *testing.T, name string) string {
	t.Helper()
	var b bytes.Buffer
	if f, err := os.CreateTemp("", "strata-"+name+"-*.log"); err == nil {
		_, werr := f.Write(r.Text)
		if cerr := f.Close(); werr == nil && cerr == nil {
			fmt.Fprintf(&b, "the whole output (%d bytes) is kept in %s\n", len(r.Text), f.Name())
		}
	}
	for _, name := range r.Fail {
		own := r.Own[name]
		fmt.Fprintf(&b, "=== the output of failed %s (%d bytes)\n", name, len(own))
		if len(own) > reportPerTest {
			fmt.Fprintf(&b, "[... its first %d bytes left out]\n", len(own)-reportPerTest)
			own = own[len(own)-reportPerTest:]
		}
		b.Write(own)
	}
	if len(r.Other) > 0 {
		other := r.Other[max(0, len(r.Other)-reportPerTest):]
		fmt.Fprintf(&b, "=== output of no test\n%s", other)
	}
	tail := r.Text[max(0, len(r.Text)-reportTail):]
	fmt.Fprintf(&b, "=== the last %d bytes of the output\n%s", len(tail), tail)
	return b.String()
}

// Passed reports whether every test of names passed.
func (r *GoTestRun) Passed(names ...string) bool {
	for _, n := range names {
		if !slices.Contains(r.Pass, n) {
			return false
		}
	}
	return true
}
