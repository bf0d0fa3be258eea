package index

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// BenchmarkOffsetIndexAppend measures one Append into a preallocated,
// mapped 10 MiB index (the page faults of first touches included).
func BenchmarkOffsetIndexAppend(b *testing.B) {
	dir := b.TempDir()
	var ix *OffsetIndex
	open := func(i int) {
		var err error
		ix, err = OpenOffsetIndex(vfs.Default, filepath.Join(dir, fmt.Sprintf("%d.index", i)), 0, 10<<20)
		if err != nil {
			b.Fatal(err)
		}
	}
	open(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		off := int64(i%(10<<20/OffsetEntrySize)) + 1
		if off == 1 && i > 0 {
			b.StopTimer()
			_ = ix.Close()
			open(i)
			b.StartTimer()
		}
		if err := ix.Append(off, int32(off)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = ix.Close()
}

// BenchmarkOffsetIndexLookup measures Lookup in a full 10 MiB index
// (1,310,720 entries), with and without the warm-section search, for
// targets spread over the whole index and for targets in its last 1000
// entries (tail reads, the common case). The page cache is hot here, so
// this measures the search alone; the warm section's real benefit, fewer
// distinct pages touched by tail lookups when memory is short, does not
// show in it.
func BenchmarkOffsetIndexLookup(b *testing.B) {
	ix, err := OpenOffsetIndex(vfs.Default, filepath.Join(b.TempDir(), "a.index"), 0, 10<<20)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	for i := int64(1); !ix.IsFull(); i++ {
		if err := ix.Append(i*10, int32(i)); err != nil {
			b.Fatal(err)
		}
	}
	last, _, _ := ix.LastEntry()
	defer func() { useWarmSection = true }()
	for _, warm := range []bool{true, false} {
		for _, tail := range []bool{false, true} {
			b.Run(fmt.Sprintf("warm=%v/targets=%s", warm, map[bool]string{false: "random", true: "tail"}[tail]), func(b *testing.B) {
				useWarmSection = warm
				rng := rand.New(rand.NewPCG(1, 1))
				b.ResetTimer()
				for range b.N {
					var target int64
					if tail {
						target = last - rng.Int64N(10_000)
					} else {
						target = rng.Int64N(last)
					}
					if off, _ := ix.Lookup(target); off > target {
						b.Fatal("bad lookup")
					}
				}
			})
		}
	}
}

// BenchmarkOffsetIndexOpenUnclean measures opening an active index left
// preallocated by a crash (10 MiB file, 1000 entries): the backward scan
// for the last non-zero slot reads the whole zero tail.
func BenchmarkOffsetIndexOpenUnclean(b *testing.B) {
	path := filepath.Join(b.TempDir(), "a.index")
	ix, err := OpenOffsetIndex(vfs.Default, path, 0, 10<<20)
	if err != nil {
		b.Fatal(err)
	}
	for i := int64(1); i <= 1000; i++ {
		if err := ix.Append(i, int32(i)); err != nil {
			b.Fatal(err)
		}
	}
	// Leave ix open and untrimmed, as a crash would leave the file.
	defer ix.Close()
	b.ResetTimer()
	for range b.N {
		again, err := OpenOffsetIndex(vfs.Default, path, 0, 10<<20)
		if err != nil {
			b.Fatal(err)
		}
		if again.Entries() != 1000 {
			b.Fatalf("%d entries", again.Entries())
		}
		b.StopTimer()
		// Close would trim the file: unmap through a fresh handle instead.
		again.m.mapMu.Lock()
		_ = again.m.f.Munmap(again.m.mmap)
		_ = again.m.f.Close()
		again.m.closed = true
		again.m.mapMu.Unlock()
		b.StartTimer()
	}
}
