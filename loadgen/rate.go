package loadgen

import (
	"context"
	"math"
	"time"
)

// Clock is the time source of the rate controller and of latency
// measurement; tests inject a fake one to stall the schedule
// deterministically.
type Clock interface {
	Now() time.Time
	// SleepUntil returns at t or later, or early with ctx's error.
	SleepUntil(ctx context.Context, t time.Time) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// SleepUntil sleeps until t or ctx ends.
func (SystemClock) SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Schedule is the open-loop send schedule of one producer: record n is
// intended at start + n/rate, whatever happened to the records before it.
// When the producer falls behind (a stalled cluster blocks its sends), the
// next records are due at once — it catches up by sending immediately and
// never skips a slot, so the schedule does not drift and every stalled
// record's latency, counted from its intended time, shows the stall
// (no coordinated omission). With rate 0 the intended time is the moment
// the record is handed to the client (a closed loop bounded by the
// producer's in-flight window).
//
// Not safe for concurrent use: each producer goroutine owns one.
type Schedule struct {
	clock Clock
	start time.Time
	rate  float64 // records per second; 0 = unthrottled
	n     int64   // records scheduled so far
}

// NewSchedule starts a schedule of rate records/s at clock.Now().
func NewSchedule(clock Clock, rate float64) *Schedule {
	return NewScheduleAt(clock, clock.Now(), rate)
}

// NewScheduleAt starts a schedule of rate records/s at start (slot 0).
func NewScheduleAt(clock Clock, start time.Time, rate float64) *Schedule {
	return &Schedule{clock: clock, start: start, rate: rate}
}

// Next waits for the next record's slot and returns its intended send
// time; a slot already past is returned at once. It returns early with
// ctx's error.
func (s *Schedule) Next(ctx context.Context) (time.Time, error) {
	if s.rate == 0 {
		s.n++
		return s.clock.Now(), ctx.Err()
	}
	at := s.Intended(s.n)
	s.n++
	if s.clock.Now().Before(at) {
		if err := s.clock.SleepUntil(ctx, at); err != nil {
			return at, err
		}
	}
	return at, ctx.Err()
}

// Due returns the slot the next call of Next hands out, without waiting:
// its intended time, or now with rate 0.
func (s *Schedule) Due() time.Time {
	if s.rate == 0 {
		return s.clock.Now()
	}
	return s.Intended(s.n)
}

// Intended returns record n's slot (rate > 0): computed from the start,
// not by adding intervals, so rounding never accumulates.
func (s *Schedule) Intended(n int64) time.Time {
	return s.start.Add(time.Duration(math.Round(float64(n) * 1e9 / s.rate)))
}

// Scheduled is how many records Next has handed out.
func (s *Schedule) Scheduled() int64 { return s.n }
