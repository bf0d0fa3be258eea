// Package testutil holds the helpers tests in several packages share. It
// owns test-side synchronisation (polling a condition with a bounded
// deadline) and running a client's own test suite (RunGoTest: every failed
// test's output kept); it imports nothing from the product and is imported only by
// _test.go files.
//
//	testutil.Eventually(t, 10*time.Second, func() bool { return n.Load() == 3 }, "three deliveries")
//	testutil.Eventually(t, 10*time.Second, func() error { return probe() }, "broker ready")
package testutil

import (
	"fmt"
	"testing"
	"time"
)

// Cond is what Eventually polls: a predicate, or a check whose nil error
// means "holds" (the last non-nil error is reported on timeout).
type Cond interface {
	func() bool | func() error
}

// Poll intervals: the first retry is quick (most conditions hold within a
// few milliseconds), later ones back off so a slow condition does not spin.
const (
	firstInterval = time.Millisecond
	maxInterval   = 20 * time.Millisecond
)

// Eventually polls cond until it holds, and fails the test with msg if it
// has not held within timeout. It is called on the test's goroutine (it
// uses t.Fatalf). cond runs at least once, even with a zero timeout.
func Eventually[C Cond](t testing.TB, timeout time.Duration, cond C, msg string, args ...any) {
	t.Helper()
	if err := Within(timeout, cond); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, fmt.Sprintf(msg, args...), err)
	}
}

// Within polls cond until it holds and returns nil, or returns an error
// once timeout has passed without it holding (the condition's own last
// error when it has one). For callers that decide themselves what a
// timeout means.
func Within[C Cond](timeout time.Duration, cond C) error {
	check := asCheck(cond)
	deadline := time.Now().Add(timeout)
	interval := firstInterval
	for {
		err := check()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(interval, time.Until(deadline)))
		interval = min(2*interval, maxInterval)
	}
}

var errNotYet = fmt.Errorf("condition still false")

func asCheck[C Cond](cond C) func() error {
	switch f := any(cond).(type) {
	case func() bool:
		return func() error {
			if f() {
				return nil
			}
			return errNotYet
		}
	case func() error:
		return f
	}
	panic(fmt.Sprintf("testutil: unsupported condition type %T", cond))
}
