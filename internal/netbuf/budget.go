package netbuf

import (
	"context"
	"sync"
	"sync/atomic"
)

// Budget is a count of bytes that callers take before allocating a frame
// and give back when it is freed. Acquire waits, first come first served,
// while the bytes are not free; the waiting reader stops reading its socket
// and TCP pushes back on the sender, as Kafka's memory pool mutes a channel.
//
// A request larger than the whole limit is admitted when nothing else is
// held, so a limit below the largest frame slows such frames down (they run
// alone) but never refuses or deadlocks them. Every admitted frame can be
// read to its end without waiting for another, so readers holding bytes
// never wait on each other.
//
// [Budget.ReadFrame] reads a frame whose bytes were acquired and accounts
// the buffers it allocates while the frame's bytes arrive ([Budget.Reading],
// [Budget.ReadingPeak]): exact figures of what peers made the node allocate,
// which tests assert on instead of the process's heap.
//
// Thread-safety: all methods are safe for concurrent use. A nil *Budget,
// or one built with a limit <= 0, admits everything at once (Kafka's -1);
// a nil one accounts nothing.
// Errors: Acquire returns ctx.Err() when ctx ends first, holding nothing.
// Idempotence: none; every successful Acquire(n) needs one Release(n).
type Budget struct {
	limit int64

	// mu guards used and waiters.
	mu      sync.Mutex
	used    int64
	waiters []*waiter // FIFO: only the head may be admitted

	// reading is the bytes of buffers allocated by ReadFrame calls that
	// have not returned; readingPeak the most it has been.
	reading, readingPeak atomic.Int64
}

type waiter struct {
	n     int64
	ready chan struct{} // closed when admitted
}

// NewBudget returns a budget of limit bytes; limit <= 0 is unbounded.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Limit returns the limit given to [NewBudget].
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used returns the bytes currently held.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Reading returns the bytes of frame buffers that [Budget.ReadFrame] calls
// in progress have allocated and not yet returned or dropped: what the
// frames being read cost now. A returned frame is bounded by the bytes
// acquired for it instead.
func (b *Budget) Reading() int64 {
	if b == nil {
		return 0
	}
	return b.reading.Load()
}

// ReadingPeak returns the most [Budget.Reading] has been, counting a
// growing buffer and its successor together while both are held.
func (b *Budget) ReadingPeak() int64 {
	if b == nil {
		return 0
	}
	return b.readingPeak.Load()
}

// addReading adds d to reading and raises readingPeak to match.
func (b *Budget) addReading(d int64) {
	if b == nil {
		return
	}
	v := b.reading.Add(d)
	for {
		p := b.readingPeak.Load()
		if v <= p || b.readingPeak.CompareAndSwap(p, v) {
			return
		}
	}
}

// Waiting returns how many callers wait in Acquire.
func (b *Budget) Waiting() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// fitsLocked reports whether n more bytes may be held now.
func (b *Budget) fitsLocked(n int64) bool {
	return b.used == 0 || b.used+n <= b.limit
}

// Acquire takes n bytes, waiting while they are not free (and while
// earlier callers wait) until ctx ends.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	if b == nil || b.limit <= 0 || n <= 0 {
		return nil
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fitsLocked(n) {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // admitted meanwhile: give it back
		b.used -= n
		b.admitLocked()
		return ctx.Err()
	default:
	}
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	if len(b.waiters) > 0 {
		b.admitLocked() // the head may fit now that w no longer blocks it
	}
	return ctx.Err()
}

// Release gives back n bytes taken by Acquire.
func (b *Budget) Release(n int64) {
	if b == nil || b.limit <= 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic("netbuf: Budget released more than it held")
	}
	b.admitLocked()
}

// admitLocked admits waiters from the head while they fit.
func (b *Budget) admitLocked() {
	for len(b.waiters) > 0 && b.fitsLocked(b.waiters[0].n) {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}
