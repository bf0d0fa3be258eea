package tiering

import (
	"testing"
	"time"

	"github.com/strata-io/strata/tiering/objstore"
)

func TestReadAheadDepth(t *testing.T) {
	const mb = 1 << 20
	base := raInput{Depth: 2, ChunkBytes: 4 * mb, Min: 1, Max: 16}
	with := func(f func(*raInput)) raInput { in := base; f(&in); return in }
	for _, c := range []struct {
		name string
		in   raInput
		want int
	}{
		{"nothing measured, no stall: stays", base, 2},
		{"a stall doubles", with(func(in *raInput) { in.Stalled = true }), 4},
		{"stalls double up to Max", with(func(in *raInput) { in.Stalled, in.Depth = true, 12 }), 16},
		// 400 MB/s from a store answering 4 MiB in 50 ms: ~4.8 chunks in the air, +1.
		{"a fast reader on a slow store gets what its rate needs",
			with(func(in *raInput) { in.Rate, in.GetLatency = 400e6, 50*time.Millisecond }), 6},
		{"a stall takes the larger of double and need",
			with(func(in *raInput) { in.Stalled, in.Rate, in.GetLatency = true, 400e6, 50*time.Millisecond }), 6},
		{"a stall beyond need doubles",
			with(func(in *raInput) { in.Stalled, in.Depth, in.Rate, in.GetLatency = true, 8, 400e6, 50*time.Millisecond }), 16},
		// 10 MB/s, 20 ms GETs: well under one chunk in the air: need 2.
		{"a slow reader shrinks one chunk at a time",
			with(func(in *raInput) { in.Depth, in.Rate, in.GetLatency = 9, 10e6, 20*time.Millisecond }), 8},
		{"down to need+1, then holds",
			with(func(in *raInput) { in.Depth, in.Rate, in.GetLatency = 3, 10e6, 20*time.Millisecond }), 3},
		{"wasted read-ahead halves",
			with(func(in *raInput) { in.Depth, in.Wasted = 8, 3 }), 4},
		{"wasted read-ahead halves even when stalled",
			with(func(in *raInput) { in.Depth, in.Wasted, in.Stalled = 8, 1, true }), 4},
		{"never below Min", with(func(in *raInput) { in.Depth, in.Wasted = 1, 1 }), 1},
		{"Min raises a small depth", with(func(in *raInput) { in.Depth, in.Min = 1, 2 }), 2},
		{"need above Max is capped",
			with(func(in *raInput) { in.Rate, in.GetLatency = 4e9, time.Second }), 16},
	} {
		if got := readAheadDepth(c.in); got != c.want {
			t.Errorf("%s: readAheadDepth(%+v) = %d, want %d", c.name, c.in, got, c.want)
		}
	}
}

// A reader consuming faster than a 20 ms store answers: the window
// deepens past the configured 2 chunks, more GETs are in the air at once,
// and the segment reads in well under the time it takes with the window
// held at 2, waiting for fewer chunks.
func TestReaderReadAheadDeepensForAFastReaderOnASlowStore(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(1, 4<<20, 16<<10)
	mem := objstore.NewMemStore()
	seg := l.upload(mem, "p")[0]
	store := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpGet, Latency: 20 * time.Millisecond})
	run := func(fixed bool) (el time.Duration, misses int64, depth int) {
		r := rdReader(t, store, func(c *ReaderConfig) {
			c.ChunkBytes, c.ReadAheadChunks, c.Threads, c.CacheBytes = 64<<10, 2, 8, 16<<20
		})
		if fixed {
			r.raMax = r.readAhead
		}
		ctx := rdCtx(t, 60*time.Second)
		start := time.Now()
		for off := seg.BaseOffset; off <= seg.EndOffset; {
			rr, err := r.Read(ctx, seg, off, 64<<10)
			if err != nil {
				t.Fatal(err)
			}
			off = rr.NextOffset
		}
		el = time.Since(start)
		st := r.segState(seg.Key("p", ExtLog))
		st.mu.Lock()
		defer st.mu.Unlock()
		return el, r.Stats().Misses, st.depth
	}
	fixedEl, fixedMisses, fixedDepth := run(true)
	el, misses, depth := run(false)
	t.Logf("64 chunks of a 20 ms store: %v and %d misses with the window held at %d; %v and %d misses adaptive (depth %d at the end)",
		fixedEl, fixedMisses, fixedDepth, el, misses, depth)
	if depth <= 2 || misses >= fixedMisses || el*10 > fixedEl*6 {
		t.Fatalf("adaptive: depth %d, %d misses, %v; fixed: %d misses, %v; want a deeper window, fewer misses and under 0.6× the time",
			depth, misses, el, fixedMisses, fixedEl)
	}
}

// A read-ahead chunk evicted before anyone looked it up is wasted
// read-ahead (what halves the window); one a reader used, or a chunk a
// fetch cached, is not.
func TestChunkCacheCountsWastedReadAhead(t *testing.T) {
	c, err := openChunkCache(t.TempDir(), 3*1024, 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	wasted := 0
	c.onWasted = func() { wasted++ }
	put := func(i int64, ra bool) {
		e := c.reserve(chunkKey{"o", i}, make([]byte, 1024), ra)
		if e == nil {
			t.Fatalf("chunk %d not cached", i)
		}
		c.written(e)
		c.unpin(e)
	}
	put(0, true) // read ahead, never read
	put(1, true) // read ahead, then read
	put(2, false)
	if e, _ := c.lookup(chunkKey{"o", 1}); e != nil {
		c.unpin(e)
	} else {
		t.Fatal("chunk 1 not found")
	}
	for i := int64(3); i < 6; i++ { // evicts 0, 1, 2 in that order
		put(i, false)
	}
	if c.wasted() != 1 || wasted != 1 {
		t.Fatalf("wasted %d (hook %d), want 1: chunk 0 only", c.wasted(), wasted)
	}
	c.removeAll()
}
