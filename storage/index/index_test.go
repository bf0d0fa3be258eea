package index

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/storage/vfs"
)

// TestOffsetIndexLookupMatchesBruteForce is the property test: random logs
// (batch sizes, offsets per batch, compaction gaps, index intervals) feed an
// offset index the way the log does, and for many random targets Lookup
// must equal a linear scan of the appended entries, and must point at or
// before the batch that holds the target (so a forward scan from it finds
// the target). It then checks the same after a clean close and reopen, and
// after an unclean one (the preallocated file reopened while still mapped).
func TestOffsetIndexLookupMatchesBruteForce(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		for iter := range 30 {
			seed := uint64(iter)*7919 + 1
			rng := rand.New(rand.NewPCG(seed, seed))
			base := rng.Int64N(1 << 40)
			interval := []int{1, 64, 512, 4096}[rng.IntN(4)]
			l := genLog(rng, base, 1+rng.IntN(3000), interval)
			name := segName(base) + ".index"
			oi, err := OpenOffsetIndex(tf.fs, tf.path(name), base, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			ti := openTime(t, tf, segName(base)+".timeindex", base, 1<<20)
			l.feed(t, oi, ti)
			check := func(ix *OffsetIndex, stage string) {
				t.Helper()
				if ix.Entries() != len(l.offsetEntries) {
					t.Fatalf("seed %d %s: %d entries, want %d", seed, stage, ix.Entries(), len(l.offsetEntries))
				}
				if err := ix.SanityCheck(); err != nil {
					t.Fatalf("seed %d %s: %v", seed, stage, err)
				}
				for range 500 {
					target := base - 10 + rng.Int64N(l.end()-base+20)
					gotOff, gotPos := ix.Lookup(target)
					wantOff, wantPos := l.bruteOffset(target)
					if gotOff != wantOff || gotPos != wantPos {
						t.Fatalf("seed %d %s: Lookup(%d) = (%d, %d), brute force (%d, %d)",
							seed, stage, target, gotOff, gotPos, wantOff, wantPos)
					}
					if bi := l.batchFor(target); bi >= 0 && gotPos > l.batches[bi].position {
						t.Fatalf("seed %d %s: Lookup(%d) position %d is past the batch holding it at %d",
							seed, stage, target, gotPos, l.batches[bi].position)
					}
				}
			}
			check(oi, "live")

			// Unclean: a second open of the still preallocated file must
			// count the same entries from the trailing zero slots.
			if err := oi.Sync(); err != nil {
				t.Fatal(err)
			}
			again, err := OpenOffsetIndex(tf.fs, tf.path(name), base, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			check(again, "unclean reopen")
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
			if err := oi.Close(); err != nil {
				t.Fatal(err)
			}
			if got, want := tf.fileSize(t, name), int64(len(l.offsetEntries)*OffsetEntrySize); got != want {
				t.Fatalf("seed %d: file is %d bytes after close, want %d (trimmed)", seed, got, want)
			}
			clean := openOffset(t, tf, name, base, 0)
			check(clean, "clean reopen")
		}
	})
}

// TestTimeIndexLookupMatchesBruteForce: the time index half of the property
// test, with timestamps that rise, stall and fall back as producers' clocks
// do, fed as the log feeds them (the running maximum at each index entry).
func TestTimeIndexLookupMatchesBruteForce(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		for iter := range 30 {
			seed := uint64(iter)*104729 + 3
			rng := rand.New(rand.NewPCG(seed, seed))
			base := rng.Int64N(1 << 40)
			l := genLog(rng, base, 1+rng.IntN(3000), []int{1, 100, 4096}[rng.IntN(3)])
			oi := openOffset(t, tf, segName(base)+".index", base, 1<<20)
			name := segName(base) + ".timeindex"
			ti, err := OpenTimeIndex(tf.fs, tf.path(name), base, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			l.feed(t, oi, ti)
			minTS, maxTS := l.batches[0].maxTimestamp-1000, l.batches[len(l.batches)-1].maxTimestamp+1000
			for _, b := range l.batches {
				maxTS = max(maxTS, b.maxTimestamp+1000)
			}
			check := func(ix *TimeIndex, stage string) {
				t.Helper()
				if ix.Entries() != len(l.timeEntries) {
					t.Fatalf("seed %d %s: %d entries, want %d", seed, stage, ix.Entries(), len(l.timeEntries))
				}
				if err := ix.SanityCheck(); err != nil {
					t.Fatalf("seed %d %s: %v", seed, stage, err)
				}
				for range 500 {
					target := minTS + rng.Int64N(maxTS-minTS)
					got, gotOK := ix.Lookup(target)
					want, wantOK := l.bruteTime(target)
					if got != want || gotOK != wantOK {
						t.Fatalf("seed %d %s: Lookup(%d) = (%d, %v), brute force (%d, %v)",
							seed, stage, target, got, gotOK, want, wantOK)
					}
				}
				ts, off, ok := ix.LastEntry()
				if n := len(l.timeEntries); n > 0 {
					if !ok || ts != l.timeEntries[n-1][0] || off != l.timeEntries[n-1][1] {
						t.Fatalf("seed %d %s: LastEntry = (%d, %d, %v), want %v", seed, stage, ts, off, ok, l.timeEntries[n-1])
					}
				} else if ok || ts != NoTimestamp || off != base {
					t.Fatalf("seed %d %s: LastEntry of empty = (%d, %d, %v)", seed, stage, ts, off, ok)
				}
			}
			check(ti, "live")
			again, err := OpenTimeIndex(tf.fs, tf.path(name), base, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			check(again, "unclean reopen")
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
			if err := ti.Close(); err != nil {
				t.Fatal(err)
			}
			check(openTime(t, tf, name, base, 0), "clean reopen")
		}
	})
}

func TestOffsetIndexAppendRejectsOutOfOrderEntries(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		const base = 1000
		ix := openOffset(t, tf, "a.index", base, 4096)
		if err := ix.Append(1010, 100); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name   string
			offset int64
			pos    int32
		}{
			{"same offset", 1010, 200},
			{"lower offset", 1005, 200},
			{"below base", 999, 200},
			{"beyond 31 bits", base + math.MaxInt32 + 1, 200},
			{"negative position", 1020, -1},
			{"lower position", 1020, 99},
		} {
			if err := ix.Append(c.offset, c.pos); !errors.Is(err, ErrInvalidEntry) {
				t.Errorf("%s: Append(%d, %d) = %v, want ErrInvalidEntry", c.name, c.offset, c.pos, err)
			}
		}
		if n := ix.Entries(); n != 1 {
			t.Fatalf("%d entries after rejected appends, want 1", n)
		}
		// The largest relative offset and an equal position are fine.
		if err := ix.Append(base+math.MaxInt32, 100); err != nil {
			t.Fatal(err)
		}
		if off, pos := ix.Lookup(math.MaxInt64); off != base+math.MaxInt32 || pos != 100 {
			t.Fatalf("Lookup(MaxInt64) = (%d, %d)", off, pos)
		}
		if off, pos := ix.Lookup(-5); off != base || pos != 0 {
			t.Fatalf("Lookup(-5) = (%d, %d), want base", off, pos)
		}
	})
}

func TestTimeIndexAppendIgnoresNonIncreasingTimestamps(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		ix := openTime(t, tf, "a.timeindex", 50, 4096)
		// NoTimestamp on an empty index is not an increase.
		if err := ix.Append(NoTimestamp, 50); err != nil || ix.Entries() != 0 {
			t.Fatalf("Append(NoTimestamp) = %v, %d entries", err, ix.Entries())
		}
		steps := []struct {
			ts, off int64
			entries int
			err     error
		}{
			{100, 55, 1, nil},
			{100, 60, 1, nil},             // same timestamp: no-op
			{90, 61, 1, nil},              // lower: no-op
			{90, 10, 1, nil},              // lower, bad offset: still a no-op
			{110, 54, 1, ErrInvalidEntry}, // higher but offset went back
			{110, 55, 2, nil},             // same offset, higher timestamp: allowed
			{120, 49, 2, ErrInvalidEntry}, // below the base
			{130, 70, 3, nil},
		}
		for i, s := range steps {
			err := ix.Append(s.ts, s.off)
			if !errors.Is(err, s.err) || (s.err == nil && err != nil) {
				t.Fatalf("step %d: Append(%d, %d) = %v, want %v", i, s.ts, s.off, err, s.err)
			}
			if ix.Entries() != s.entries {
				t.Fatalf("step %d: %d entries, want %d", i, ix.Entries(), s.entries)
			}
		}
		for _, c := range []struct {
			ts  int64
			off int64
			ok  bool
		}{{99, 50, false}, {100, 55, true}, {109, 55, true}, {110, 55, true}, {129, 55, true}, {130, 70, true}, {math.MaxInt64, 70, true}} {
			if off, ok := ix.Lookup(c.ts); off != c.off || ok != c.ok {
				t.Errorf("Lookup(%d) = (%d, %v), want (%d, %v)", c.ts, off, ok, c.off, c.ok)
			}
		}
	})
}

func TestOffsetIndexFullReturnsErrIndexFull(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		// 43 bytes rounds down to 5 entries.
		ix := openOffset(t, tf, "a.index", 0, 43)
		if got := tf.fileSize(t, "a.index"); got != 40 {
			t.Fatalf("preallocated %d bytes, want 40", got)
		}
		for i := range 5 {
			if ix.IsFull() {
				t.Fatalf("full after %d entries", i)
			}
			if err := ix.Append(int64(i+1)*10, int32(i)*100); err != nil {
				t.Fatal(err)
			}
		}
		if !ix.IsFull() {
			t.Fatal("not full after 5 entries")
		}
		if err := ix.Append(60, 600); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("Append to a full index = %v, want ErrIndexFull", err)
		}
		if off, _, _ := ix.LastEntry(); off != 50 {
			t.Fatalf("last entry %d after a refused append", off)
		}
		// Two slots: one for Append, the last kept for AppendFinal.
		ti := openTime(t, tf, "a.timeindex", 0, 24)
		if err := ti.Append(1, 0); err != nil {
			t.Fatal(err)
		}
		if !ti.IsFull() {
			t.Fatal("time index not full with only the reserved slot left")
		}
		if err := ti.Append(3, 3); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("time index Append when full = %v", err)
		}
		// A no-op append on a full time index is still a no-op.
		if err := ti.Append(1, 3); err != nil {
			t.Fatalf("no-op Append on a full time index = %v", err)
		}
	})
}

// TestTimeIndexAppendFinalUsesReservedSlot: regular appends stop one slot
// short, so the entry a rolling segment writes always fits, and after it
// the last entry is the segment's max timestamp whether or not it raised
// the index's maximum.
func TestTimeIndexAppendFinalUsesReservedSlot(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		ti := openTime(t, tf, "a.timeindex", 10, 4*TimeEntrySize)
		for i := int64(1); i <= 3; i++ {
			if err := ti.Append(i*100, 10+i); err != nil {
				t.Fatal(err)
			}
		}
		if err := ti.Append(400, 14); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("Append into the reserved slot = %v, want ErrIndexFull", err)
		}
		if err := ti.AppendFinal(450, 15); err != nil {
			t.Fatalf("AppendFinal into the reserved slot = %v", err)
		}
		if ts, off, ok := ti.LastEntry(); !ok || ts != 450 || off != 15 || ti.Entries() != 4 {
			t.Fatalf("last entry %d@%d (%v), %d entries; want 450@15, 4", ts, off, ok, ti.Entries())
		}
		if err := ti.AppendFinal(500, 16); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("AppendFinal with no slot left = %v, want ErrIndexFull", err)
		}
		// Not raising the maximum: a no-op that leaves the exact entry.
		if err := ti.AppendFinal(450, 15); err != nil {
			t.Fatalf("AppendFinal of the current maximum = %v", err)
		}
		if err := ti.Seal(); err != nil {
			t.Fatal(err)
		}
		if err := ti.AppendFinal(600, 17); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("AppendFinal on a sealed index = %v, want ErrIndexFull", err)
		}
		if err := ti.Close(); err != nil {
			t.Fatal(err)
		}
		again := openTime(t, tf, "a.timeindex", 10, 0)
		if ts, off, ok := again.LastEntry(); !ok || ts != 450 || off != 15 || !again.IsFull() {
			t.Fatalf("reopened sealed: last %d@%d (%v), full %v", ts, off, ok, again.IsFull())
		}
	})
}

func TestOffsetIndexTruncateToRemovesEntriesAtAndAbove(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		const base = 100
		fill := func(ix *OffsetIndex) {
			t.Helper()
			if err := ix.Reset(); err != nil {
				t.Fatal(err)
			}
			for i := int64(1); i <= 10; i++ { // offsets 110, 120, ... 200
				if err := ix.Append(base+10*i, int32(i*1000)); err != nil {
					t.Fatal(err)
				}
			}
		}
		ix := openOffset(t, tf, "a.index", base, 4096)
		for _, c := range []struct {
			to   int64
			want int
		}{
			{250, 10}, {201, 10}, {200, 9}, {155, 5}, {150, 4}, {111, 1}, {110, 0}, {100, 0}, {5, 0},
			{math.MaxInt64, 10},
		} {
			fill(ix)
			if err := ix.TruncateTo(c.to); err != nil {
				t.Fatal(err)
			}
			if ix.Entries() != c.want {
				t.Errorf("TruncateTo(%d): %d entries, want %d", c.to, ix.Entries(), c.want)
			}
			if last, _, ok := ix.LastEntry(); ok && last >= c.to {
				t.Errorf("TruncateTo(%d): last entry %d survived", c.to, last)
			}
		}
		// After a truncation, appends continue from the cut, and an unclean
		// reopen counts exactly the surviving entries (the freed slots were
		// zeroed).
		fill(ix)
		if err := ix.TruncateTo(155); err != nil {
			t.Fatal(err)
		}
		if err := ix.Append(152, 5000); err != nil {
			t.Fatalf("append after truncate: %v", err)
		}
		again := openOffset(t, tf, "a.index", base, 4096)
		if again.Entries() != 6 {
			t.Fatalf("reopen after truncate: %d entries, want 6", again.Entries())
		}
		if off, pos := again.Lookup(199); off != 152 || pos != 5000 {
			t.Fatalf("reopen after truncate: Lookup(199) = (%d, %d)", off, pos)
		}
	})
}

func TestTimeIndexTruncateToRemovesEntriesAtAndAbove(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		ix := openTime(t, tf, "a.timeindex", 0, 4096)
		// Two entries share offset 20 (the maximum rose twice at one offset).
		for _, e := range [][2]int64{{10, 10}, {20, 20}, {25, 20}, {30, 30}} {
			if err := ix.Append(e[0], e[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := ix.TruncateTo(21); err != nil || ix.Entries() != 3 {
			t.Fatalf("TruncateTo(21) = %v, %d entries", err, ix.Entries())
		}
		if err := ix.TruncateTo(20); err != nil || ix.Entries() != 1 {
			t.Fatalf("TruncateTo(20) = %v, %d entries", err, ix.Entries())
		}
		// The dropped timestamps can be indexed again.
		if err := ix.Append(15, 12); err != nil || ix.Entries() != 2 {
			t.Fatalf("Append after truncate = %v, %d entries", err, ix.Entries())
		}
		if err := ix.Reset(); err != nil || ix.Entries() != 0 {
			t.Fatalf("Reset = %v, %d entries", err, ix.Entries())
		}
		if off, ok := ix.Lookup(math.MaxInt64); ok || off != 0 {
			t.Fatalf("Lookup after Reset = (%d, %v)", off, ok)
		}
	})
}

func TestOffsetIndexResetEmptiesAndSurvivesReopen(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		ix := openOffset(t, tf, "a.index", 0, 4096)
		for i := int64(1); i <= 20; i++ {
			if err := ix.Append(i, int32(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := ix.Reset(); err != nil {
			t.Fatal(err)
		}
		if ix.Entries() != 0 || ix.SizeBytes() != 0 {
			t.Fatalf("after Reset: %d entries, %d bytes", ix.Entries(), ix.SizeBytes())
		}
		if _, _, ok := ix.LastEntry(); ok {
			t.Fatal("LastEntry after Reset")
		}
		if again := openOffset(t, tf, "a.index", 0, 4096); again.Entries() != 0 {
			t.Fatalf("reopen after Reset: %d entries", again.Entries())
		}
		if err := ix.Append(1, 1); err != nil {
			t.Fatalf("append after Reset: %v", err)
		}
	})
}

func TestOffsetIndexSealTrimsAndResizeReopens(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		const base = 500
		ix, err := OpenOffsetIndex(tf.fs, tf.path("a.index"), base, 10<<20)
		if err != nil {
			t.Fatal(err)
		}
		if got := tf.fileSize(t, "a.index"); got != 10<<20 {
			t.Fatalf("preallocated %d bytes, want %d", got, 10<<20)
		}
		for i := int64(1); i <= 100; i++ {
			if err := ix.Append(base+i*3, int32(i*4096)); err != nil {
				t.Fatal(err)
			}
		}
		if err := ix.Seal(); err != nil {
			t.Fatal(err)
		}
		if got := tf.fileSize(t, "a.index"); got != 800 {
			t.Fatalf("sealed file is %d bytes, want 800", got)
		}
		if !ix.IsFull() {
			t.Fatal("sealed index not full")
		}
		if err := ix.Append(base+1000, 1<<20); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("Append after Seal = %v, want ErrIndexFull", err)
		}
		if off, pos := ix.Lookup(base + 151); off != base+150 || pos != 50*4096 {
			t.Fatalf("Lookup after Seal = (%d, %d)", off, pos)
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}

		// Reopen sealed (maxBytes 0): same entries, still full.
		ix = openOffset(t, tf, "a.index", base, 0)
		if ix.Entries() != 100 || !ix.IsFull() {
			t.Fatalf("reopened sealed index: %d entries, full %v", ix.Entries(), ix.IsFull())
		}
		if err := ix.SanityCheck(); err != nil {
			t.Fatal(err)
		}
		// The log truncates back into this segment: it becomes active again.
		if err := ix.TruncateTo(base + 150); err != nil {
			t.Fatal(err)
		}
		if err := ix.Resize(4096); err != nil {
			t.Fatal(err)
		}
		if got := tf.fileSize(t, "a.index"); got != 4096 {
			t.Fatalf("resized file is %d bytes, want 4096", got)
		}
		if ix.IsFull() || ix.Entries() != 49 {
			t.Fatalf("after Resize: full %v, %d entries", ix.IsFull(), ix.Entries())
		}
		if err := ix.Append(base+150, 1<<20); err != nil {
			t.Fatalf("Append after Resize: %v", err)
		}
		// Resize never drops entries: asking for less keeps them all.
		if err := ix.Resize(8); err != nil {
			t.Fatal(err)
		}
		if ix.Entries() != 50 || !ix.IsFull() {
			t.Fatalf("Resize below the used size: %d entries, full %v", ix.Entries(), ix.IsFull())
		}
		if off, _ := ix.Lookup(math.MaxInt64); off != base+150 {
			t.Fatalf("last offset after shrinking Resize = %d", off)
		}
	})
}

func TestTimeIndexSealTrimsAndReopens(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		ix, err := OpenTimeIndex(tf.fs, tf.path("a.timeindex"), 7, 12000)
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(1); i <= 10; i++ {
			if err := ix.Append(i*1000, 7+i); err != nil {
				t.Fatal(err)
			}
		}
		if err := ix.Seal(); err != nil {
			t.Fatal(err)
		}
		if got := tf.fileSize(t, "a.timeindex"); got != 120 {
			t.Fatalf("sealed size %d, want 120", got)
		}
		if err := ix.Append(20000, 30); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("Append after Seal = %v", err)
		}
		if err := ix.Resize(240); err != nil {
			t.Fatal(err)
		}
		if err := ix.Append(20000, 30); err != nil {
			t.Fatal(err)
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		again := openTime(t, tf, "a.timeindex", 7, 0)
		if ts, off, ok := again.LastEntry(); !ok || ts != 20000 || off != 30 || again.Entries() != 11 {
			t.Fatalf("reopened: LastEntry (%d, %d, %v), %d entries", ts, off, ok, again.Entries())
		}
	})
}

// TestOffsetIndexReopenTreatsLoneZeroEntryAsEmpty documents the one
// ambiguity of counting entries by trailing zeros: a single entry
// (base offset, position 0) reads back as no entries, which answers every
// lookup identically; followed by other entries it is kept.
func TestOffsetIndexReopenTreatsLoneZeroEntryAsEmpty(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		ix := openOffset(t, tf, "a.index", 40, 4096)
		if err := ix.Append(40, 0); err != nil {
			t.Fatal(err)
		}
		again := openOffset(t, tf, "a.index", 40, 4096)
		if again.Entries() != 0 {
			t.Fatalf("lone zero entry reopened as %d entries", again.Entries())
		}
		if off, pos := again.Lookup(1000); off != 40 || pos != 0 {
			t.Fatalf("Lookup = (%d, %d)", off, pos)
		}
		if err := ix.Append(41, 0); err != nil {
			t.Fatal(err)
		}
		third := openOffset(t, tf, "a.index", 40, 4096)
		if third.Entries() != 2 {
			t.Fatalf("zero entry followed by another reopened as %d entries", third.Entries())
		}
	})
}

func TestOffsetIndexSanityCheckDetectsCorruption(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		for _, c := range []struct {
			name string
			raw  []byte
			bad  bool
		}{
			{"good", rawOffsetEntries([2]uint32{0, 0}, [2]uint32{5, 100}, [2]uint32{9, 100}), false},
			{"offsets out of order", rawOffsetEntries([2]uint32{3, 0}, [2]uint32{9, 100}, [2]uint32{5, 200}), true},
			{"repeated offset", rawOffsetEntries([2]uint32{3, 0}, [2]uint32{3, 100}), true},
			{"positions go back", rawOffsetEntries([2]uint32{1, 500}, [2]uint32{2, 400}), true},
			{"negative position", rawOffsetEntries([2]uint32{1, 0x80000000}), true},
			{"relative offset beyond 31 bits", rawOffsetEntries([2]uint32{1, 1}, [2]uint32{0x80000000, 2}), true},
			{"torn tail", append(rawOffsetEntries([2]uint32{1, 1}), 0, 0, 2), true},
			{"hole of zeros", rawOffsetEntries([2]uint32{1, 1}, [2]uint32{0, 0}, [2]uint32{7, 9}), true},
		} {
			name := "c.index"
			tf.writeRaw(t, name, c.raw)
			ix, err := OpenOffsetIndex(tf.fs, tf.path(name), 0, 0)
			if err != nil {
				t.Fatalf("%s: open: %v", c.name, err)
			}
			err = ix.SanityCheck()
			if c.bad != errors.Is(err, ErrCorruptIndex) || (!c.bad && err != nil) {
				t.Errorf("%s: SanityCheck = %v, want corrupt %v", c.name, err, c.bad)
			}
			// Lookups on a corrupt index stay in bounds.
			for _, target := range []int64{-1, 0, 4, 6, 1 << 40} {
				ix.Lookup(target)
			}
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestTimeIndexSanityCheckDetectsCorruption(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		for _, c := range []struct {
			name string
			raw  []byte
			bad  bool
		}{
			{"good", rawTimeEntries([2]int64{10, 0}, [2]int64{20, 5}, [2]int64{30, 5}), false},
			{"timestamps go back", rawTimeEntries([2]int64{10, 0}, [2]int64{5, 5}), true},
			{"offsets go back", rawTimeEntries([2]int64{10, 4}, [2]int64{20, 3}), true},
			{"negative timestamp", rawTimeEntries([2]int64{-5, 4}), true},
			{"relative offset beyond 31 bits", rawTimeEntries([2]int64{1, 1}, [2]int64{2, 1 << 31}), true},
			{"torn tail", rawTimeEntries([2]int64{10, 0}, [2]int64{20, 5})[:20], true},
		} {
			tf.writeRaw(t, "c.timeindex", c.raw)
			ix, err := OpenTimeIndex(tf.fs, tf.path("c.timeindex"), 0, 0)
			if err != nil {
				t.Fatalf("%s: open: %v", c.name, err)
			}
			err = ix.SanityCheck()
			if c.bad != errors.Is(err, ErrCorruptIndex) || (!c.bad && err != nil) {
				t.Errorf("%s: SanityCheck = %v, want corrupt %v", c.name, err, c.bad)
			}
			for _, target := range []int64{-1, 0, 15, 1 << 62} {
				ix.Lookup(target)
			}
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestOffsetIndexClosedRefusesWritesAndReadsAsEmpty(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		ix, err := OpenOffsetIndex(tf.fs, tf.path("a.index"), 9, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.Append(10, 10); err != nil {
			t.Fatal(err)
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		if err := ix.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		for name, err := range map[string]error{
			"Append": ix.Append(11, 11), "TruncateTo": ix.TruncateTo(0), "Reset": ix.Reset(),
			"Seal": ix.Seal(), "Resize": ix.Resize(100), "Sync": ix.Sync(),
		} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", name, err)
			}
		}
		if off, pos := ix.Lookup(100); off != 9 || pos != 0 {
			t.Errorf("Lookup after Close = (%d, %d)", off, pos)
		}
	})
}

// TestOffsetIndexConcurrentReadersDuringAppends runs lock-free readers
// against a writer that appends, and now and then truncates, seals and
// resizes (remaps). Entry i maps offset 10*i to position 100*i, so any
// answer a reader gets can be checked on its own: it must be a real entry
// at or below the target. Run under -race.
func TestOffsetIndexConcurrentReadersDuringAppends(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		const base = 1 << 33
		ix := openOffset(t, tf, "a.index", base, 64<<10)
		ti := openTime(t, tf, "a.timeindex", base, 96<<10)
		var stop atomic.Bool
		var wg sync.WaitGroup
		errc := make(chan error, 8)
		for r := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(r), 1))
				for !stop.Load() {
					target := base + rng.Int64N(100_000)
					off, pos := ix.Lookup(target)
					rel := off - base
					if off > target || rel%10 != 0 || int64(pos) != rel*10 {
						errc <- fmt.Errorf("Lookup(%d) = (%d, %d): not an entry at or below", target, off, pos)
						return
					}
					toff, ok := ti.Lookup(target) // timestamps equal offsets here
					if ok && (toff > target || (toff-base)%10 != 0) {
						errc <- fmt.Errorf("time Lookup(%d) = %d", target, toff)
						return
					}
					ix.LastEntry()
					ix.Entries()
				}
			}()
		}
		deadline := time.Now().Add(2 * time.Second)
		next := int64(1)
		remaps := 0
		for i := 0; time.Now().Before(deadline) && i < 200_000; i++ {
			off := base + 10*next
			err := ix.Append(off, int32(100*next))
			if errors.Is(err, ErrIndexFull) {
				// Roll-like churn: seal, then truncate back and reopen.
				if err := ix.Seal(); err != nil {
					t.Fatal(err)
				}
				cut := base + 10*(next/2)
				if err := ix.TruncateTo(cut); err != nil {
					t.Fatal(err)
				}
				if err := ti.TruncateTo(cut); err != nil {
					t.Fatal(err)
				}
				if err := ix.Resize(64 << 10); err != nil {
					t.Fatal(err)
				}
				next /= 2
				remaps++
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := ti.Append(off, off); err != nil && !errors.Is(err, ErrIndexFull) {
				t.Fatal(err)
			}
			next++
		}
		stop.Store(true)
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		if remaps == 0 {
			t.Error("the writer never filled the index: no remap was exercised")
		}
	})
}

// TestOffsetIndexReadersSurviveClose: readers racing Close get answers
// (the empty index's), never a fault on an unmapped page.
func TestOffsetIndexReadersSurviveClose(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		ix, err := OpenOffsetIndex(tf.fs, tf.path("a.index"), 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(1); i <= 1000; i++ {
			if err := ix.Append(i, int32(i)); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20000 {
					if off, pos := ix.Lookup(int64(i % 1200)); int64(pos) != off {
						t.Errorf("Lookup = (%d, %d)", off, pos)
						return
					}
				}
			}()
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	})
}

// TestOffsetIndexSyncMakesEntriesDurable: on MemFS, entries written through
// the mapping survive a power loss once synced, and the unsynced ones after
// them are lost (a crash clone keeping no unsynced bytes).
func TestOffsetIndexSyncMakesEntriesDurable(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	ix, err := OpenOffsetIndex(mem, "/d/a.index", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ti, err := OpenTimeIndex(mem, "/d/a.timeindex", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer ti.Close()
	if err := mem.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 10; i++ {
		if err := ix.Append(i, int32(i*10)); err != nil {
			t.Fatal(err)
		}
		if err := ti.Append(i*100, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := ti.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := int64(11); i <= 20; i++ {
		if err := ix.Append(i, int32(i*10)); err != nil {
			t.Fatal(err)
		}
		if err := ti.Append(i*100, i); err != nil {
			t.Fatal(err)
		}
	}
	crashed := mem.CrashClone(0, rand.New(rand.NewPCG(1, 1)))
	got, err := OpenOffsetIndex(crashed, "/d/a.index", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if got.Entries() != 10 {
		t.Fatalf("after a crash: %d offset entries, want the 10 synced", got.Entries())
	}
	if err := got.SanityCheck(); err != nil {
		t.Fatal(err)
	}
	gotT, err := OpenTimeIndex(crashed, "/d/a.timeindex", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer gotT.Close()
	if ts, off, ok := gotT.LastEntry(); !ok || ts != 1000 || off != 10 || gotT.Entries() != 10 {
		t.Fatalf("after a crash: time index last entry (%d, %d, %v), %d entries", ts, off, ok, gotT.Entries())
	}
}

// TestIndexReopenCountsEntriesAcrossScanChunks: the entry count of a
// preallocated file is found by reading it backwards in 64 KiB chunks; the
// last entry may end just before, at, or just after a chunk boundary, or
// straddle it.
func TestIndexReopenCountsEntriesAcrossScanChunks(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		for _, n := range []int{1, 8191, 8192, 8193, 16384, 32767} {
			name := fmt.Sprintf("%d.index", n)
			ix := openOffset(t, tf, name, 0, 256<<10)
			for i := 1; i <= n; i++ {
				if err := ix.Append(int64(i), int32(i)); err != nil {
					t.Fatal(err)
				}
			}
			if again := openOffset(t, tf, name, 0, 256<<10); again.Entries() != n {
				t.Errorf("offset index of %d entries reopened with %d", n, again.Entries())
			}
		}
		for _, n := range []int{5461, 5462, 10922, 10923} { // 12-byte entries straddle 64 KiB at 5461.33
			name := fmt.Sprintf("%d.timeindex", n)
			ix := openTime(t, tf, name, 0, 256<<10)
			for i := 1; i <= n; i++ {
				if err := ix.Append(int64(i), int64(i)); err != nil {
					t.Fatal(err)
				}
			}
			again := openTime(t, tf, name, 0, 256<<10)
			if again.Entries() != n {
				t.Errorf("time index of %d entries reopened with %d", n, again.Entries())
			}
			if ts, _, _ := again.LastEntry(); ts != int64(n) {
				t.Errorf("time index of %d entries: last timestamp %d", n, ts)
			}
		}
	})
}
