package tiering

import (
	"bytes"
	"testing"
	"time"

	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/tiering/objstore"
)

// A sequential scan of 16 chunks through a 4-chunk cache writes each
// chunk over the file of one evicted before it instead of creating a file
// per chunk, returns the local log's bytes, and keeps the directory
// within the cache's bytes; Close leaves no chunk file.
func TestChunkCacheReusesFilesOfEvictedChunks(t *testing.T) {
	const chunk = 64 << 10
	l := rdNewLog(t)
	l.fillFixed(1, 16*chunk, 1000)
	mem := objstore.NewMemStore()
	seg := l.upload(mem, "p")[0]
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = chunk; c.CacheBytes = 4 * chunk; c.ReadAheadChunks = -1 })
	r.cache.memMax = 0 // reads go to the files
	ctx := rdCtx(t, 30*time.Second)
	for off := seg.BaseOffset; off <= seg.EndOffset; {
		want, _, wn := l.localRead(off, 20<<10, seg)
		rr, err := r.Read(ctx, seg, off, 20<<10)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rr.Records, want) || rr.NextOffset != wn {
			t.Fatalf("read at %d: %d bytes to %d, local %d bytes to %d", off, len(rr.Records), rr.NextOffset, len(want), wn)
		}
		r.wg.Wait() // the chunk's file is written in the background
		if b := rdDirBytes(t, r.cache.dir); b > 4*chunk {
			t.Fatalf("%d bytes of chunk files in a %d-byte cache", b, 4*chunk)
		}
		off = rr.NextOffset
	}
	nchunks := (seg.SizeBytes + chunk - 1) / chunk
	r.cache.mu.Lock()
	created := r.cache.seq
	r.cache.mu.Unlock()
	gets := rdGetsOf(mem, seg.Key("p", ExtLog))
	if int64(gets) < nchunks || created > 4 {
		t.Fatalf("%d chunk files created for %d GETs of %d chunks through a 4-chunk cache, want 4", created, gets, nchunks)
	}
	r.Close()
	names, err := vfs.Default.List(r.cache.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 {
		t.Fatalf("files left after Close: %v", names)
	}
}

// A view holding a chunk's file keeps its bytes while the chunk is
// forgotten and every other chunk cached meanwhile reuses freed files:
// the held file is reused only after the view lets go.
func TestReaderViewHeldWhileFilesAreReused(t *testing.T) {
	const chunk = 64 << 10
	l := rdNewLog(t)
	l.fillFixed(2, 12*chunk, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = chunk; c.CacheBytes = 4 * chunk; c.ReadAheadChunks = -1 })
	r.cache.memMax = 0
	ctx := rdCtx(t, 30*time.Second)
	a, b := segs[0], segs[1]
	want, _, _ := l.localRead(a.BaseOffset, 2*chunk, a)
	if _, err := r.Read(ctx, a, a.BaseOffset, 2*chunk); err != nil {
		t.Fatal(err)
	}
	r.wg.Wait()
	v, err := r.ReadView(ctx, a, a.BaseOffset, 2*chunk)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	_ = v.sp.Regions(0, v.Size, func(f vfs.File, _ []byte, _, _ int64) error {
		if f != nil {
			files++
		}
		return nil
	})
	if files == 0 {
		t.Fatal("the view holds no chunk file")
	}
	r.Forget(a) // a's chunks are dead, held by the view
	scan := func() {
		t.Helper()
		for off := b.BaseOffset; off <= b.EndOffset; {
			w, _, _ := l.localRead(off, 30<<10, b)
			rr, err := r.Read(ctx, b, off, 30<<10)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rr.Records, w) {
				t.Fatalf("read of b at %d: not the local bytes", off)
			}
			r.wg.Wait()
			off = rr.NextOffset
		}
	}
	scan()
	got, err := v.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[:len(got)]) || len(got) == 0 {
		t.Fatalf("the held view's %d bytes changed while files were reused", len(got))
	}
	v.Release()
	r.Forget(b)
	scan() // a's files free now, and reused
	if p := r.cache.pinned(); p != 0 {
		t.Fatalf("%d pins left", p)
	}
}
