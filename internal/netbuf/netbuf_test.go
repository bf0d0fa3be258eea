package netbuf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
)

func acquireAsync(b *Budget, ctx context.Context, n int64) chan error {
	c := make(chan error, 1)
	go func() { c <- b.Acquire(ctx, n) }()
	return c
}

func waitQueued(t *testing.T, b *Budget, n int) {
	t.Helper()
	if err := testutil.Within(5*time.Second, func() error {
		b.mu.Lock()
		got := len(b.waiters)
		b.mu.Unlock()
		if got != n {
			return fmt.Errorf("%d waiters, want %d", got, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func notDone(t *testing.T, c chan error) {
	t.Helper()
	select {
	case err := <-c:
		t.Fatalf("admitted early (err %v)", err)
	default:
	}
}

func done(t *testing.T, c chan error) {
	t.Helper()
	select {
	case err := <-c:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not admitted")
	}
}

func TestBudgetWaitsFIFOAndAdmitsOversizedAlone(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(100)
	if err := b.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	big := acquireAsync(b, ctx, 500) // larger than the limit: runs alone
	waitQueued(t, b, 1)
	small := acquireAsync(b, ctx, 10) // would fit, but waits behind big
	waitQueued(t, b, 2)
	notDone(t, big)
	notDone(t, small)
	b.Release(60)
	done(t, big)
	notDone(t, small)
	if got := b.Used(); got != 500 {
		t.Fatalf("used %d, want 500", got)
	}
	b.Release(500)
	done(t, small)
	b.Release(10)
	if got := b.Used(); got != 0 {
		t.Fatalf("used %d after releasing all", got)
	}
}

func TestBudgetCancelledWaiterHoldsNothing(t *testing.T) {
	b := NewBudget(100)
	if err := b.Acquire(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	head := acquireAsync(b, ctx, 50)
	waitQueued(t, b, 1)
	next := acquireAsync(b, context.Background(), 1)
	waitQueued(t, b, 2)
	cancel()
	if err := <-head; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	notDone(t, next) // 100 still held
	b.Release(100)
	done(t, next)
	if got := b.Used(); got != 1 {
		t.Fatalf("used %d, want 1", got)
	}
}

func TestBudgetUnbounded(t *testing.T) {
	for _, b := range []*Budget{nil, NewBudget(0), NewBudget(-1)} {
		if err := b.Acquire(context.Background(), 1<<40); err != nil {
			t.Fatal(err)
		}
		b.Release(1 << 40)
	}
}

// trickle returns at most step bytes per Read, then fails with err once
// limit bytes were returned.
type trickle struct {
	left, step int
	err        error
}

func (r *trickle) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, r.err
	}
	n := min(len(p), r.step, r.left)
	for i := range n {
		p[i] = byte(i)
	}
	r.left -= n
	return n, nil
}

func TestReadFrameAllocatesAsBytesArrive(t *testing.T) {
	const claimed = 100 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(&trickle{left: 10, step: 10, err: io.EOF}, claimed)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v, want unexpected EOF", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*FirstChunk {
		t.Fatalf("allocated %d bytes for 10 sent of %d claimed", alloc, claimed)
	}

	// 1 MiB sent of 100 MiB claimed: the full first chunk and the one it
	// grew into, about Growth+1 times what arrived.
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = ReadFrame(&trickle{left: 1 << 20, step: 4096, err: errors.New("stall")}, claimed)
	runtime.ReadMemStats(&after)
	if err == nil || err.Error() != "stall" {
		t.Fatalf("err %v, want the reader's", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > (Growth+1)<<20+64<<10 {
		t.Fatalf("allocated %d bytes for 1 MiB sent of %d claimed", alloc, claimed)
	}
}

func TestReadFrameReadsExactly(t *testing.T) {
	for _, n := range []int{0, 1, FirstChunk - 1, FirstChunk, FirstChunk + 1, 3*FirstChunk + 7} {
		src := make([]byte, n+5)
		for i := range src {
			src[i] = byte(i * 7)
		}
		r := bytes.NewReader(src)
		got, err := ReadFrame(r, n)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !bytes.Equal(got, src[:n]) || r.Len() != 5 {
			t.Fatalf("n=%d: read %d bytes, %d left", n, len(got), r.Len())
		}
	}
	if _, err := ReadFrame(bytes.NewReader(nil), 10); err != io.EOF {
		t.Fatalf("empty reader: %v, want EOF", err)
	}
}

// BenchmarkReadFrame compares ReadFrame's growing buffer with one
// allocation from the size prefix (what the broker did before), for the
// frame sizes a producer sends.
func BenchmarkReadFrame(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20, 7 << 19} { // 3.5 MiB: a multi-partition produce request (issue 20)
		src := make([]byte, size)
		b.Run(fmt.Sprintf("size=%dKiB/grow", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			r := bytes.NewReader(src)
			for range b.N {
				r.Reset(src)
				if _, err := ReadFrame(r, size); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("size=%dKiB/prefix", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			r := bytes.NewReader(src)
			for range b.N {
				r.Reset(src)
				buf := make([]byte, size)
				if _, err := io.ReadFull(r, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestBudgetReadFrameAccountsItsBuffers(t *testing.T) {
	b := NewBudget(-1)
	// 10 bytes of a claimed 100 MiB: one FirstChunk, given back on error.
	if _, err := b.ReadFrame(&trickle{left: 10, step: 10, err: io.EOF}, 100<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err %v, want unexpected EOF", err)
	}
	if r, p := b.Reading(), b.ReadingPeak(); r != 0 || p != FirstChunk {
		t.Fatalf("reading %d, peak %d; want 0, %d", r, p, FirstChunk)
	}
	// A whole frame of 3 MiB grows 1, 3 MiB (by Growth, capped at the
	// frame): at most 1+3 MiB held at once (while copying), none once the
	// caller has it.
	buf, err := b.ReadFrame(&trickle{left: 3 << 20, step: 64 << 10}, 3<<20)
	if err != nil || len(buf) != 3<<20 {
		t.Fatalf("read %d bytes, err %v", len(buf), err)
	}
	if r, p := b.Reading(), b.ReadingPeak(); r != 0 || p != 4<<20 {
		t.Fatalf("reading %d, peak %d; want 0, %d", r, p, 4<<20)
	}
	// 20 MiB: 1, 4, 16, 20 MiB; the peak is the last copy, 16+20 MiB.
	b2 := NewBudget(-1)
	if buf, err := b2.ReadFrame(&trickle{left: 20 << 20, step: 1 << 20}, 20<<20); err != nil || len(buf) != 20<<20 {
		t.Fatalf("read %d bytes, err %v", len(buf), err)
	}
	if r, p := b2.Reading(), b2.ReadingPeak(); r != 0 || p != 36<<20 {
		t.Fatalf("20 MiB: reading %d, peak %d; want 0, %d", r, p, 36<<20)
	}
}
