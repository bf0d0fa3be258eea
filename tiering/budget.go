package tiering

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// The read budget: every object-store GET the remote reader makes (chunks,
// indexes, read-ahead) first takes one of Threads slots, then the bytes it
// will fetch from a token bucket. Waiters queue in two FIFO lists, the
// foreground one (a fetch is waiting) always served before the background
// one (read-ahead), so read-ahead never delays a consumer. A background
// ticket is promoted when a foreground reader comes to wait for the same
// chunk. Both queues are bounded: a burst of historical fetches gets
// [ErrReadQueueFull] instead of piling up goroutines and buffers, and a
// caller whose context ends leaves the queue at once.
//
// Memory bound: a chunk buffer is allocated only after a slot is granted,
// so at most Threads chunk buffers exist for GETs in flight.

// ErrReadQueueFull is returned by [Reader.Read] and
// [Reader.OffsetForTimestamp] when more foreground reads wait for the
// object store than the queue holds. It is retriable: the broker answers
// the partition with an error the client retries (or returns it empty).
var ErrReadQueueFull = errors.New("tiering: remote read queue full")

// readTicket is one place in the budget's queue.
type readTicket struct {
	ready   chan struct{} // closed when granted
	elem    *list.Element // in fg or bg while queued
	fg      bool          // in the foreground queue
	granted bool
}

// readBudget bounds concurrent GETs and their byte rate node-wide.
type readBudget struct {
	slots  int
	maxFG  int
	maxBG  int
	bucket *tokenBucket // nil: unlimited

	mu     sync.Mutex // guards inUse, fg, bg and every queued ticket's fields
	inUse  int
	fg, bg list.List // of *readTicket, oldest first
}

func newReadBudget(slots, maxFG, maxBG int, bytesPerSec int64) *readBudget {
	b := &readBudget{slots: slots, maxFG: maxFG, maxBG: maxBG}
	if bytesPerSec > 0 {
		b.bucket = newTokenBucket(bytesPerSec, time.Now)
	}
	return b
}

// acquire waits for a slot. The ticket starts in the foreground queue if
// fg, else the background one; it returns ErrReadQueueFull at once when
// that queue is full, and ctx's error when ctx ends first (the ticket
// leaves the queue). On success the caller must call release once.
func (b *readBudget) acquire(ctx context.Context, t *readTicket, fg bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	t.ready = make(chan struct{})
	fg = fg || t.fg // promoted before it was queued
	t.fg = fg
	if b.inUse < b.slots && (fg && b.fg.Len() == 0 || !fg && b.fg.Len() == 0 && b.bg.Len() == 0) {
		b.inUse++
		t.granted = true
		close(t.ready)
		b.mu.Unlock()
		return nil
	}
	q, limit := &b.bg, b.maxBG
	if fg {
		q, limit = &b.fg, b.maxFG
	}
	if q.Len() >= limit {
		b.mu.Unlock()
		return ErrReadQueueFull
	}
	t.elem = q.PushBack(t)
	b.mu.Unlock()

	select {
	case <-t.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	if t.granted {
		// Granted while we gave up: hand the slot on.
		b.releaseLocked()
	} else {
		b.queueOf(t).Remove(t.elem)
		t.elem = nil
	}
	b.mu.Unlock()
	return ctx.Err()
}

func (b *readBudget) queueOf(t *readTicket) *list.List {
	if t.fg {
		return &b.fg
	}
	return &b.bg
}

// promote moves a queued background ticket to the back of the foreground
// queue: a fetch now waits for what was only read-ahead. A granted ticket
// or one already in the foreground is left alone.
func (b *readBudget) promote(t *readTicket) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.granted || t.fg || t.elem == nil {
		t.fg = true // a ticket not yet queued will start in the foreground
		return
	}
	b.bg.Remove(t.elem)
	t.fg = true
	t.elem = b.fg.PushBack(t)
}

// release returns a slot granted by acquire.
func (b *readBudget) release() {
	b.mu.Lock()
	b.releaseLocked()
	b.mu.Unlock()
}

// releaseLocked frees a slot and grants it to the oldest foreground
// waiter, else the oldest background one.
func (b *readBudget) releaseLocked() {
	b.inUse--
	for b.inUse < b.slots {
		q := &b.fg
		if q.Len() == 0 {
			q = &b.bg
		}
		front := q.Front()
		if front == nil {
			return
		}
		t := q.Remove(front).(*readTicket)
		t.elem = nil
		t.granted = true
		b.inUse++
		close(t.ready)
	}
}

// bgRoom reports whether a background ticket would be accepted now, so
// read-ahead starts no goroutine that would only be refused.
func (b *readBudget) bgRoom() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bg.Len() < b.maxBG
}

// counts returns the slots in use and the tickets queued.
func (b *readBudget) counts() (inUse, queued int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse, b.fg.Len() + b.bg.Len()
}

// tokenBucket is remote.log.manager.fetch.max.bytes.per.second: a GET of
// n bytes takes n tokens, going into debt if it must (a chunk may exceed
// the one second of burst the bucket holds), and waits until the debt is
// paid at the configured rate. So the long-run rate is bounded while a
// single GET is never refused.
type tokenBucket struct {
	rate  float64 // bytes per second
	burst float64 // seconds of rate the bucket holds; 0: one
	now   func() time.Time

	mu     sync.Mutex // guards tokens, last
	tokens float64    // may be negative: debt
	last   time.Time
}

func newTokenBucket(rate int64, now func() time.Time) *tokenBucket {
	return &tokenBucket{rate: float64(rate), now: now, tokens: float64(rate), last: now()}
}

// take reserves n bytes and returns how long the caller must wait before
// using them.
func (tb *tokenBucket) take(n int64) time.Duration {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	now := tb.now()
	tb.tokens = min(tb.capacity(), tb.tokens+now.Sub(tb.last).Seconds()*tb.rate)
	tb.last = now
	tb.tokens -= float64(n)
	if tb.tokens >= 0 {
		return 0
	}
	return time.Duration(-tb.tokens / tb.rate * float64(time.Second))
}

// capacity is the most the bucket holds: burst seconds of its rate.
func (tb *tokenBucket) capacity() float64 {
	if tb.burst > 0 {
		return tb.rate * tb.burst
	}
	return tb.rate
}

// setRate changes the rate and the burst (the seconds of rate the bucket
// holds; 0: one); fresh starts with a full burst (a bucket that was not
// in use), else what was saved is kept up to the new burst's worth.
func (tb *tokenBucket) setRate(rate float64, burst time.Duration, fresh bool) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	now := tb.now()
	saved := tb.tokens + now.Sub(tb.last).Seconds()*tb.rate
	tb.rate, tb.burst, tb.last = rate, burst.Seconds(), now
	if fresh {
		tb.tokens = tb.capacity()
	} else {
		tb.tokens = min(tb.capacity(), saved)
	}
}

// takeIfPaid reserves n bytes when no debt is outstanding (so the debt
// is at most one GET's bytes however many wait) and returns 0; else how
// long until the debt is paid.
func (tb *tokenBucket) takeIfPaid(n int64) time.Duration {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	now := tb.now()
	tb.tokens = min(tb.capacity(), tb.tokens+now.Sub(tb.last).Seconds()*tb.rate)
	tb.last = now
	if tb.tokens >= 0 {
		tb.tokens -= float64(n)
		return 0
	}
	return time.Duration(-tb.tokens / tb.rate * float64(time.Second))
}

// giveBack returns n reserved bytes that were not used (a cancelled wait
// or a GET that failed before its body).
func (tb *tokenBucket) giveBack(n int64) {
	tb.mu.Lock()
	tb.tokens = min(tb.capacity(), tb.tokens+float64(n))
	tb.mu.Unlock()
}

// wait reserves n bytes and sleeps until they are paid for, or ctx ends
// (the reservation is then given back).
func (tb *tokenBucket) wait(ctx context.Context, n int64) error {
	d := tb.take(n)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		tb.giveBack(n)
		return ctx.Err()
	}
}
