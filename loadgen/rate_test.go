package loadgen

import (
	"context"
	"testing"
	"time"
)

// fakeClock advances only when told: SleepUntil jumps to the wake time,
// stall jumps ahead as a blocked send would.
type fakeClock struct {
	now    time.Time
	sleeps int
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) error {
	c.sleeps++
	if t.After(c.now) {
		c.now = t
	}
	return ctx.Err()
}

func (c *fakeClock) stall(d time.Duration) { c.now = c.now.Add(d) }

// TestScheduleHoldsUnderStallAndCountsFromIntendedTime drives the
// schedule at 1000 records/s with a 500 ms stall at record 100 (a send
// that blocks, as Produce does on a full buffer). The schedule must not
// move: every record keeps its slot start+i ms; the records due during
// the stall go out at once afterwards (no sleeping) until it has caught
// up; and their latencies, measured from the slots, show the stall: 400
// records above 100 ms, where a closed loop would show one.
func TestScheduleHoldsUnderStallAndCountsFromIntendedTime(t *testing.T) {
	ctx := context.Background()
	start := time.Unix(1000, 0)
	clk := &fakeClock{now: start}
	s := NewSchedule(clk, 1000)
	rec := NewRecorder()
	rec.Measure(start)
	var caughtUpAt int64 = -1
	for i := int64(0); i < 1000; i++ {
		sleepsBefore := clk.sleeps
		intended, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := start.Add(time.Duration(i) * time.Millisecond); !intended.Equal(want) {
			t.Fatalf("record %d intended at %v, want its slot %v (the schedule drifted)", i, intended.Sub(start), want.Sub(start))
		}
		if i > 100 && i < 600 && clk.sleeps != sleepsBefore {
			t.Fatalf("record %d: slept while %v behind schedule; it must be sent at once", i, clk.now.Sub(intended))
		}
		if i >= 600 && caughtUpAt < 0 {
			caughtUpAt = i
		}
		if i == 100 {
			clk.stall(500 * time.Millisecond) // the send of record 100 blocks
		}
		rec.Record(intended, clk.Now()) // acknowledged now
	}
	if got, want := clk.Now(), start.Add(999*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after 1000 records the clock is at %v, want %v (schedule caught up, no drift)", got.Sub(start), want.Sub(start))
	}
	h := rec.CutPhase()
	if h.TotalCount() != 1000 {
		t.Fatalf("%d latencies, want 1000", h.TotalCount())
	}
	if mx := ms(h.Max()); mx < 499 || mx > 501 {
		t.Fatalf("max latency %.1f ms, want the 500 ms stall", mx)
	}
	// Records 100..499 waited more than 100 ms (500 - (i-100) ms): 40%.
	if p60, p61 := ms(h.ValueAtPercentile(60)), ms(h.ValueAtPercentile(61)); p60 > 100.1 || p61 <= 100.1 {
		t.Fatalf("p60 %.1f ms, p61 %.1f ms: want 400 of 1000 latencies above 100 ms", p60, p61)
	}
	sum := latencyOf(h)
	if sum.P99 < 400 {
		t.Fatalf("p99 %.1f ms hides the stall", sum.P99)
	}
}

// TestScheduleSleepsUntilEachSlot: on time, the schedule waits for each
// slot and never sends early.
func TestScheduleSleepsUntilEachSlot(t *testing.T) {
	start := time.Unix(0, 0)
	clk := &fakeClock{now: start}
	s := NewSchedule(clk, 4) // every 250 ms
	for i := range 8 {
		at, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if clk.Now().Before(at) {
			t.Fatalf("record %d returned at %v before its slot %v", i, clk.Now().Sub(start), at.Sub(start))
		}
		if want := time.Duration(i) * 250 * time.Millisecond; at.Sub(start) != want || clk.Now().Sub(start) != want {
			t.Fatalf("record %d at %v (clock %v), want %v", i, at.Sub(start), clk.Now().Sub(start), want)
		}
	}
}

// TestScheduleUnthrottledIsEnqueueTime: rate 0 measures from the moment
// the record is handed over.
func TestScheduleUnthrottledIsEnqueueTime(t *testing.T) {
	clk := &fakeClock{now: time.Unix(5, 0)}
	s := NewSchedule(clk, 0)
	for i := range 3 {
		clk.stall(time.Duration(i+1) * time.Second)
		at, _ := s.Next(context.Background())
		if !at.Equal(clk.Now()) || clk.sleeps != 0 {
			t.Fatalf("record %d intended %v, now %v, %d sleeps", i, at, clk.Now(), clk.sleeps)
		}
	}
	if s.Scheduled() != 3 {
		t.Fatalf("scheduled %d", s.Scheduled())
	}
}

// TestScheduleStopsOnContext: a canceled context ends a wait.
func TestScheduleStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := NewSchedule(SystemClock{}, 0.001) // next slot in 1000 s
	s.Next(ctx)
	if _, err := s.Next(ctx); err == nil {
		t.Fatal("Next ignored a canceled context")
	}
}

// TestRecorderExcludesWarmup: latencies of records intended before the
// measured phase stay out of the total but feed the interval.
func TestRecorderExcludesWarmup(t *testing.T) {
	r := NewRecorder()
	t0 := time.Unix(100, 0)
	r.Measure(t0)
	r.Record(t0.Add(-time.Second), t0.Add(-time.Second+900*time.Millisecond)) // warm-up
	r.Record(t0, t0.Add(2*time.Millisecond))
	tot, iv := newHist(), newHist()
	r.mergeTotal(tot)
	r.drainInterval(iv)
	if tot.TotalCount() != 1 || ms(tot.Max()) > 2.01 {
		t.Fatalf("total: %d values, max %.2f ms; want only the measured 2 ms", tot.TotalCount(), ms(tot.Max()))
	}
	if iv.TotalCount() != 2 {
		t.Fatalf("interval: %d values, want 2", iv.TotalCount())
	}
	iv2 := newHist()
	r.drainInterval(iv2)
	if iv2.TotalCount() != 0 {
		t.Fatal("interval not reset after drain")
	}
}
