package testutil

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records Fatalf instead of stopping the goroutine.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	f := &fakeTB{}
	Eventually(f, 10*time.Second, func() bool { return n.Add(1) == 3 }, "third call")
	if f.failed != "" || n.Load() != 3 {
		t.Fatalf("failed=%q after %d calls, want success after 3", f.failed, n.Load())
	}
}

func TestEventuallyFailsAtTheDeadlineWithTheLastError(t *testing.T) {
	f := &fakeTB{}
	start := time.Now()
	Eventually(f, 50*time.Millisecond, func() error { return errors.New("still down") }, "broker %d", 7)
	if took := time.Since(start); took < 50*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %v, want about 50ms", took)
	}
	if !strings.Contains(f.failed, "broker 7") || !strings.Contains(f.failed, "still down") {
		t.Errorf("failure message %q lacks the what or the last error", f.failed)
	}
}

func TestWithinChecksAtLeastOnce(t *testing.T) {
	calls := 0
	if err := Within(0, func() bool { calls++; return true }); err != nil || calls != 1 {
		t.Fatalf("Within(0, true) = %v after %d calls", err, calls)
	}
	if err := Within(0, func() bool { return false }); err == nil {
		t.Fatal("Within(0, false) = nil, want an error")
	}
}
