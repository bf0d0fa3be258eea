package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/batch"
)

func TestReadReturnsFirstBatchWholeEvenAboveMaxBytes(t *testing.T) {
	e := newEnv(t)
	e.appendBatches(1, 4, 1000) // ~4 KiB
	e.appendBatches(1, 1, 10)
	v, err := e.log.Read(0, 100, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if v.FirstOffset != 0 || v.NextOffset != 4 || v.Size < 4000 {
		t.Fatalf("view %+v: want the whole first batch only", v)
	}
	b, _ := v.Bytes()
	if _, err := batch.Validate(b, batch.Limits{SkipTimestampCheck: true}); err != nil {
		t.Fatalf("first batch not whole: %v", err)
	}
}

func TestReadFillsUpToMaxBytesWithWholeBatches(t *testing.T) {
	e := newEnv(t)
	e.appendBatches(10, 1, 100)
	one := e.log.Size() / 10
	v, err := e.log.Read(0, int(3*one+one/2), math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	v.Release()
	if v.Size != 3*one || v.NextOffset != 3 {
		t.Fatalf("view %+v, want 3 batches of %d bytes", v, one)
	}
}

func TestReadNeverPassesMaxOffset(t *testing.T) {
	e := newEnv(t)
	e.appendBatches(5, 2, 10) // batches [0,1] [2,3] [4,5] [6,7] [8,9]
	cases := []struct {
		off, max   int64
		first, end int64
	}{
		{0, 10, 0, 10},
		{0, 5, 0, 4}, // batch [4,5] has last offset 5 >= 5: excluded
		{0, 4, 0, 4},
		{3, 6, 2, 6},
		{4, 5, 4, 4}, // the holding batch itself passes the bound: empty
		{5, 5, 5, 5}, // offset == maxOffset: empty
		{10, 10, 10, 10},
	}
	for _, c := range cases {
		v, err := e.log.Read(c.off, 1<<20, c.max)
		if err != nil {
			t.Fatalf("Read(%d, max %d): %v", c.off, c.max, err)
		}
		v.Release()
		if v.Size > 0 && (v.FirstOffset != c.first || v.NextOffset != c.end) {
			t.Fatalf("Read(%d, max %d) = [%d,%d), want [%d,%d)", c.off, c.max, v.FirstOffset, v.NextOffset, c.first, c.end)
		}
		if v.Size == 0 && c.first != c.end {
			t.Fatalf("Read(%d, max %d) empty, want [%d,%d)", c.off, c.max, c.first, c.end)
		}
	}
}

func TestReadOutOfRange(t *testing.T) {
	e := newEnv(t)
	e.appendBatches(4, 1, 10)
	if err := e.log.SetLogStartOffset(2); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{-1, 0, 1, 5, 100} {
		_, err := e.log.Read(off, 100, math.MaxInt64)
		if !errors.Is(err, ErrOffsetOutOfRange) || !errors.Is(err, kerr.OffsetOutOfRange) {
			t.Fatalf("Read(%d): %v", off, err)
		}
	}
	v, err := e.log.Read(4, 100, math.MaxInt64)
	if err != nil || v.Size != 0 || v.NextOffset != 4 {
		t.Fatalf("Read(LEO) = %+v %v, want empty", v, err)
	}
}

func TestReadOffsetInGapResolvesToNextBatch(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 300 })
	// Follower batches with gaps, as after compaction: [0,1] [10,11] [20,21] ...
	for i := int64(0); i < 6; i++ {
		if _, err := e.log.Append(withBase(makeBatch(t, 2, 50, baseTs), i*10), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if e.log.NumSegments() < 2 {
		t.Fatal("want several segments")
	}
	for off := int64(0); off < 52; off++ {
		v, err := e.log.Read(off, 1, math.MaxInt64)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		v.Release()
		want := (off + 8) / 10 * 10 // the batch holding off, or the next one
		if off%10 <= 1 {
			want = off / 10 * 10
		}
		if v.FirstOffset != want {
			t.Fatalf("Read(%d) starts at %d, want %d", off, v.FirstOffset, want)
		}
	}
}

// TestReadIndexLookupsMatchBruteForce is a property test: on random logs
// (random batch sizes, record counts, index intervals and segment sizes)
// every offset read through the indexes lands on the batch a brute-force
// scan of the files says holds it, before and after a reopen.
func TestReadIndexLookupsMatchBruteForce(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		e := newEnv(t, func(c *Config) {
			c.IndexIntervalBytes = rng.IntN(2000)
			c.SegmentBytes = int64(2000 + rng.IntN(20000))
		})
		for i := 0; i < 80+rng.IntN(80); i++ {
			n := 1 + rng.IntN(8)
			if _, err := e.log.Append(makeBatch(t, n, rng.IntN(300), baseTs+int64(i)), AppendOptions{AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
		}
		checkIndexAgainstScan(t, e.log)
		e.reopen()
		checkIndexAgainstScan(t, e.log)
		e.log.Close()
		e.open(false, 0, 0) // rebuilt from scratch
		checkIndexAgainstScan(t, e.log)
	}
}

func TestReadOffsetForTimestampMatchesBruteForce(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 3000; c.IndexIntervalBytes = 100 })
	rng := rand.New(rand.NewPCG(3, 4))
	type rec struct{ off, ts int64 }
	var recs []rec
	ts := baseTs
	for i := 0; i < 100; i++ {
		ts += int64(rng.IntN(20)) - 5 // mostly rising, sometimes back in time
		n := 1 + rng.IntN(4)
		info, err := e.log.Append(makeBatch(t, n, 20, ts), AppendOptions{AssignOffsets: true})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < n; j++ {
			recs = append(recs, rec{info.FirstOffset + int64(j), ts + int64(j)})
		}
	}
	check := func() {
		for q := baseTs - 10; q < ts+20; q++ {
			wantOff, wantTs, wantOK := int64(-1), int64(-1), false
			for _, r := range recs {
				if r.ts >= q {
					wantOff, wantTs, wantOK = r.off, r.ts, true
					break
				}
			}
			off, gotTs, ok, err := e.log.OffsetForTimestamp(q)
			if err != nil || ok != wantOK || (ok && (off != wantOff || gotTs != wantTs)) {
				t.Fatalf("OffsetForTimestamp(%d) = %d,%d,%v,%v; want %d,%d,%v", q, off, gotTs, ok, err, wantOff, wantTs, wantOK)
			}
		}
		var maxR rec
		maxR.ts = -1
		for _, r := range recs {
			if r.ts > maxR.ts {
				maxR = r
			}
		}
		if off, mts := e.log.MaxTimestampOffset(); off != maxR.off || mts != maxR.ts {
			t.Fatalf("MaxTimestampOffset = %d,%d want %d,%d", off, mts, maxR.off, maxR.ts)
		}
	}
	check()
	e.reopen()
	check()
}

func TestReadViewKeepsDeletedSegmentReadable(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.FileDeleteDelayMs = 0; c.RetentionBytes = 1 })
	e.appendBatches(3, 1, 100)
	e.log.Roll()
	e.appendBatches(1, 1, 100)
	v, err := e.log.Read(0, 1<<20, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := v.Bytes()
	if n, err := e.log.EnforceRetention(e.clock.Now()); err != nil || n != 1 {
		t.Fatalf("retention deleted %d: %v", n, err)
	}
	names, _ := e.fs.List(e.dir)
	if !contains(names, SegmentFileName(0, LogFileSuffix)+DeletedFileSuffix) {
		t.Fatalf("segment not renamed .deleted while a view holds it: %v", names)
	}
	got, err := v.Bytes()
	if err != nil || string(got) != string(want) {
		t.Fatalf("view unreadable after deletion: %v", err)
	}
	v.Release()
	names, _ = e.fs.List(e.dir)
	for _, n := range names {
		if _, suf, ok := parseSegmentFileName(n); ok && suf != SnapshotFileSuffix && n[:20] == SegmentFileName(0, "")[:20] {
			t.Fatalf("file %s left after the last reference went", n)
		}
	}
}

func contains(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// BenchmarkReadFetch measures a consumer-sized fetch (1 MiB) of small
// batches from a log on the OS file system: the cost of walking batch
// headers to find the view's end.
func BenchmarkReadFetch(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%dB", size), func(b *testing.B) {
			e := newOSEnv(b, func(c *Config) { c.IndexIntervalBytes = 4096; c.SegmentIndexBytes = 1 << 20 })
			rec := makeBatch(b, 1, size, baseTs)
			for e.log.Size() < 16<<20 {
				if _, err := e.log.Append(bytes.Clone(rec), AppendOptions{AssignOffsets: true}); err != nil {
					b.Fatal(err)
				}
			}
			leo := e.log.LogEndOffset()
			rng := rand.New(rand.NewPCG(1, 1))
			b.ResetTimer()
			var n int64
			for i := 0; i < b.N; i++ {
				v, err := e.log.Read(rng.Int64N(leo/2), 1<<20, leo)
				if err != nil {
					b.Fatal(err)
				}
				n += v.Size
				v.Release()
			}
			b.SetBytes(n / int64(b.N))
		})
	}
}

// TestReadTailMatchesScan is a property test of the tail ring (tail.go):
// on random logs (batch sizes, record counts, segment sizes), with
// truncations between appends as a follower's, every read the ring answers
// is the read the index and header scan give, for random offsets, byte
// limits and high watermarks; and tail reads are answered by the ring.
func TestReadTailMatchesScan(t *testing.T) {
	hits, tailReads := 0, 0
	for seed := uint64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		e := newEnv(t, func(c *Config) {
			c.IndexIntervalBytes = rng.IntN(3000)
			c.SegmentBytes = int64(8000 + rng.IntN(40000))
		})
		check := func() {
			leo := e.log.LogEndOffset()
			start := e.log.LocalLogStartOffset()
			for range 60 {
				off := start + rng.Int64N(leo-start+1)
				if rng.IntN(2) == 0 { // most reads are tail reads
					off = max(start, leo-rng.Int64N(12))
				}
				maxBytes := 1 + rng.IntN(6000)
				maxOffset := off + rng.Int64N(leo-off+2)
				segs, i, err := e.log.acquireAt(off)
				if err != nil {
					t.Fatal(err)
				}
				s := segs[i]
				limit := s.size.Load()
				if s.next.Load() > off && limit > 0 {
					tv, ok := s.readTail(off, maxBytes, maxOffset, limit)
					r := s.tail.Swap(nil)
					sv, found, err := s.read(off, maxBytes, maxOffset)
					s.tail.Store(r)
					if err != nil {
						t.Fatal(err)
					}
					if leo-off <= 12 && i == len(segs)-1 {
						tailReads++
					}
					if ok {
						hits++
						if !found || tv.Pos != sv.Pos || tv.Size != sv.Size || tv.FirstOffset != sv.FirstOffset || tv.NextOffset != sv.NextOffset {
							t.Fatalf("seed %d: read(%d, %d, %d) from the ring %+v, from the scan %+v (found %v)", seed, off, maxBytes, maxOffset, tv, sv, found)
						}
					}
				}
				s.release()
			}
		}
		for round := range 40 {
			for range 1 + rng.IntN(6) {
				n := 1 + rng.IntN(8)
				if _, err := e.log.Append(makeBatch(t, n, rng.IntN(600), baseTs+int64(round)), AppendOptions{AssignOffsets: true}); err != nil {
					t.Fatal(err)
				}
			}
			check()
			if rng.IntN(5) == 0 {
				leo, start := e.log.LogEndOffset(), e.log.LocalLogStartOffset()
				if err := e.log.Truncate(max(start, leo-rng.Int64N(20))); err != nil {
					t.Fatal(err)
				}
				check()
			}
		}
	}
	if tailReads == 0 || float64(hits) < 0.9*float64(tailReads) {
		t.Fatalf("the ring answered %d reads of %d tail reads", hits, tailReads)
	}
	t.Logf("the ring answered %d reads (%d tail reads)", hits, tailReads)
}
