package group

import "time"

// Clock is the coordinator's source of time: Now for timestamps and
// AfterFunc for the session, join and sync timers. Production uses the
// real clock; tests pass a fake one whose Advance fires due timers on the
// caller's goroutine, so a whole rebalance runs deterministically.
// Implementations must be safe for concurrent use; f runs on a goroutine
// of the clock's choosing and must not be called with the caller of
// AfterFunc holding locks f takes (the coordinator never does).
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled call of a [Clock]. Stop reports whether it
// prevented the call; the coordinator does not rely on it (a call that
// raced with Stop finds its timer superseded and does nothing).
type Timer interface {
	Stop() bool
}

// realClock is the production [Clock]; now overrides time.Now when set.
type realClock struct{ now func() time.Time }

func (c realClock) Now() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
