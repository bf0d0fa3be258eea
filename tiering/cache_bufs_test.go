package tiering

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/tiering/objstore"
)

// A chunk's buffer goes back for reuse only once the cache let go of it
// and nobody holds the chunk: a reader that pinned it keeps reading the
// same bytes after the cache dropped the buffer, and the buffer is
// recycled at its unpin.
func TestChunkCacheRecyclesABufferOnlyAfterItsLastPin(t *testing.T) {
	const chunk = 4 << 10
	c, err := openChunkCache(filepath.Join(t.TempDir(), "c"), 4*chunk, chunk, 1)
	if err != nil {
		t.Fatal(err)
	}
	var recycled [][]byte
	c.recycle = func(b []byte) { recycled = append(recycled, b) }
	put := func(k chunkKey, fill byte) []byte {
		t.Helper()
		data := bytes.Repeat([]byte{fill}, chunk)
		e := c.reserve(k, data, false)
		if e == nil {
			t.Fatalf("chunk %v refused", k)
		}
		if err := writeChunkFile(e.path, data); err != nil {
			t.Fatal(err)
		}
		c.written(e)
		c.unpin(e)
		return data
	}
	a := chunkKey{"obj", 0}
	bufA := put(a, 'a')
	e, mem := c.lookup(a) // a reader holds chunk a and its buffer
	if e == nil || &mem[0] != &bufA[0] {
		t.Fatal("chunk a not held in memory")
	}
	put(chunkKey{"obj", 1}, 'b') // memMax 1: a's buffer is dropped from the cache
	if e.mem != nil {
		t.Fatal("a kept its buffer")
	}
	if len(recycled) != 0 {
		t.Fatalf("a buffer recycled while a reader holds it: %d", len(recycled))
	}
	if !bytes.Equal(mem, bytes.Repeat([]byte{'a'}, chunk)) {
		t.Fatal("the held buffer changed")
	}
	c.unpin(e)
	if len(recycled) != 1 || &recycled[0][0] != &bufA[0] {
		t.Fatalf("after the last unpin: %d buffers recycled, want a's", len(recycled))
	}
	// Unpinned, a buffer goes back as soon as the cache drops it.
	put(chunkKey{"obj", 2}, 'c')
	if len(recycled) != 2 {
		t.Fatalf("%d buffers recycled, want b's too", len(recycled))
	}
}

// A sequential scan through a small cache GETs into recycled buffers:
// far fewer bytes allocated than the chunks fetched; whole chunks, and
// segments shorter than a chunk (each its one short chunk).
func TestReaderRecyclesGetBuffers(t *testing.T) {
	const chunk = 256 << 10
	for _, tc := range []struct {
		name     string
		segs     int
		segBytes int64
	}{{"whole-chunks", 1, 32 * chunk}, {"short-segments", 32, 3 * chunk / 4}} {
		t.Run(tc.name, func(t *testing.T) {
			l := rdNewLog(t)
			l.fillFixed(tc.segs, tc.segBytes, 4000)
			mem := objstore.NewMemStore()
			segs := l.upload(mem, "p")
			r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = chunk; c.CacheBytes = 4 * chunk; c.ReadAheadChunks = -1 })
			ctx := rdCtx(t, 30*time.Second)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for _, seg := range segs {
				for off := seg.BaseOffset; off <= seg.EndOffset; {
					v, err := r.ReadView(ctx, seg, off, 128<<10)
					if err != nil {
						t.Fatal(err)
					}
					off = v.NextOffset
					v.Release()
					r.wg.Wait()
				}
			}
			runtime.ReadMemStats(&after)
			var fetched int64
			for _, seg := range segs {
				fetched += int64(rdGetsOf(mem, seg.Key("p", ExtLog))) * min(chunk, seg.SizeBytes)
			}
			alloc := int64(after.TotalAlloc - before.TotalAlloc)
			t.Logf("%d bytes allocated for %d bytes fetched", alloc, fetched)
			if alloc > fetched/2 && !raceBuild {
				t.Fatalf("%d bytes allocated for %d bytes fetched: GET buffers not reused", alloc, fetched)
			}
		})
	}
}

// Concurrent views, reads and Forgets over a cache much smaller than the
// data: every view returns the local log's bytes although buffers and
// files are recycled under it (run with -race).
func TestReaderViewsStayIntactUnderRecycling(t *testing.T) {
	const chunk = 64 << 10
	l := rdNewLog(t)
	l.fillFixed(3, 8*chunk, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = chunk; c.CacheBytes = 4 * chunk })
	ctx := rdCtx(t, 60*time.Second)
	type want struct {
		b      []byte
		wf, wn int64
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 60 {
				seg := segs[rng.IntN(len(segs))]
				off := seg.BaseOffset + rng.Int64N(seg.EndOffset-seg.BaseOffset+1)
				mb := 1 + rng.IntN(3*chunk)
				b, wf, wn := l.localRead(off, mb, seg)
				w := want{b, wf, wn}
				v, err := r.ReadView(ctx, seg, off, mb)
				if err != nil {
					errs <- err.Error()
					return
				}
				if rng.IntN(4) == 0 {
					r.Forget(segs[rng.IntN(len(segs))]) // chunks dead under views
				}
				got, err := v.Bytes()
				v.Release()
				if err != nil || !bytes.Equal(got, w.b) || v.FirstOffset != w.wf || v.NextOffset != w.wn {
					errs <- "a view's bytes are not the local log's"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	r.Close()
	if p := r.cache.pinned(); p != 0 {
		t.Fatalf("%d pins left", p)
	}
}
