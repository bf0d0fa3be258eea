package tiering

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/tiering/objstore"
)

// pinned returns the pins the cache's entries hold.
func (c *chunkCache) pinned() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.entries {
		n += e.pins
	}
	return n
}

// Every offset of a multi-segment log read as a view with random maxBytes
// equals the local Log.Read byte for byte, also while earlier views are
// still held (pinned chunks) and a 1 MiB cache evicts around them; once
// every view is released no chunk stays pinned.
func TestReaderViewMatchesLocalLogByteForByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	l := rdNewLog(t)
	l.fillRandom(rng, 4, 600<<10)
	store := objstore.NewMemStore()
	segs := l.upload(store, "p")
	r := rdReader(t, store, func(c *ReaderConfig) { c.ChunkBytes = 64 << 10; c.CacheBytes = 1 << 20 })
	ctx := rdCtx(t, 60*time.Second)

	sizes := []int{0, 1, 100, 4096, 32 << 10, 200 << 10}
	var held []RemoteView
	files := 0
	last := segs[len(segs)-1].EndOffset
	for off := int64(0); off <= last; off++ {
		seg := l.segFor(off)
		mb := sizes[rng.IntN(len(sizes))]
		want, wf, wn := l.localRead(off, mb, seg)
		v, err := r.ReadView(ctx, seg, off, mb)
		if err != nil {
			t.Fatalf("ReadView(%d, %d): %v", off, mb, err)
		}
		got, err := v.Bytes()
		if err != nil || !bytes.Equal(got, want) || v.FirstOffset != wf || v.NextOffset != wn || v.Size != int64(len(want)) {
			t.Fatalf("ReadView(%d, %d): %d bytes [%d, %d) (%v), local %d bytes [%d, %d)",
				off, mb, len(got), v.FirstOffset, v.NextOffset, err, len(want), wf, wn)
		}
		_ = v.sp.Regions(0, v.Size, func(f vfs.File, _ []byte, _, _ int64) error {
			if f != nil {
				files++
			}
			return nil
		})
		if rng.IntN(50) == 0 {
			held = append(held, v)
		} else {
			v.Release()
		}
		if len(held) > 8 {
			held[0].Release()
			held = held[1:]
		}
	}
	for _, v := range held {
		v.Release()
	}
	r.wg.Wait()
	if n := r.cache.pinned(); n != 0 {
		t.Fatalf("%d pins left after every view was released", n)
	}
	if st := r.Stats(); st.Evictions == 0 || files == 0 {
		t.Fatalf("stats %+v, %d file regions: want evictions and views over cache files", st, files)
	}
}

// A view of cached chunks is regions of the chunk files (OS files, for
// sendfile), not a copy: building and releasing a 1 MiB view allocates a
// few KiB, where Read allocates the MiB.
func TestReaderViewOfCachedChunksIsFileRegionsWithoutCopy(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(1, 4<<20, 16<<10)
	mem := objstore.NewMemStore()
	seg := l.upload(mem, "p")[0]
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = 1 << 20; c.ReadAheadChunks = -1 })
	r.cache.memMax = 0 // chunks lose their buffer once written: reads go to the files
	ctx := rdCtx(t, 30*time.Second)
	off := seg.BaseOffset + 40
	if _, err := r.Read(ctx, seg, off, 3<<20); err != nil {
		t.Fatal(err)
	}
	r.wg.Wait() // chunk files are written in the background
	v, err := r.ReadView(ctx, seg, off, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	regions := 0
	err = v.sp.Regions(0, v.Size, func(f vfs.File, mem []byte, _, _ int64) error {
		regions++
		if _, ok := f.(vfs.OSFile); !ok || mem != nil {
			t.Errorf("region %d: file %T, %d buffer bytes; want an OS file", regions, f, len(mem))
		}
		return nil
	})
	v.Release()
	if err != nil || regions == 0 {
		t.Fatalf("regions: %d, %v", regions, err)
	}
	allocs := func(f func()) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	const n = 10
	viewBytes := allocs(func() {
		for range n {
			v, err := r.ReadView(ctx, seg, off, 1<<20)
			if err != nil || v.Size < 1<<19 {
				t.Fatalf("view: %d bytes, %v", v.Size, err)
			}
			v.Release()
		}
	}) / n
	readBytes := allocs(func() {
		for range n {
			if _, err := r.Read(ctx, seg, off, 1<<20); err != nil {
				t.Fatal(err)
			}
		}
	}) / n
	t.Logf("allocated per 1 MiB read: view %d bytes, Read %d bytes", viewBytes, readBytes)
	if viewBytes > 64<<10 || readBytes < 1<<19 {
		t.Fatalf("allocated per 1 MiB read: view %d bytes, Read %d bytes; want the view under 64 KiB", viewBytes, readBytes)
	}
	if p := r.cache.pinned(); p != 0 {
		t.Fatalf("%d pins left", p)
	}
}

// A flipped byte inside a batch is ErrCorruptObject and no view, for a
// view starting at it and one that would include it; nothing stays pinned.
func TestReaderViewCorruptObjectIsAnError(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(1, 200<<10, 1000)
	mem := objstore.NewMemStore()
	seg := l.upload(mem, "p")[0]
	bs := l.batchesOf(seg)
	victim := bs[len(bs)/2]
	data, err := os.ReadFile(l.log.Segments()[0].LogPath)
	if err != nil {
		t.Fatal(err)
	}
	data[victim.pos+100] ^= 0xff
	ctx := rdCtx(t, 30*time.Second)
	if _, err := mem.Put(ctx, seg.Key("p", ExtLog), bytes.NewReader(data), int64(len(data)), objstore.PutOptions{Mode: objstore.Overwrite}); err != nil {
		t.Fatal(err)
	}
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = 32 << 10 })
	for _, c := range []struct {
		off int64
		mb  int
	}{{victim.base, 1}, {bs[len(bs)/2-3].base, 1 << 20}} {
		v, err := r.ReadView(ctx, seg, c.off, c.mb)
		if !errors.Is(err, ErrCorruptObject) || v.sp != nil {
			t.Fatalf("ReadView(%d, %d) = %d bytes, %v; want ErrCorruptObject and no view", c.off, c.mb, v.Size, err)
		}
	}
	want, _, _ := l.localRead(bs[1].base, 2000, seg)
	v, err := r.ReadView(ctx, seg, bs[1].base, 2000)
	got, _ := v.Bytes()
	v.Release()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("view before the damage: %v", err)
	}
	r.wg.Wait()
	if p := r.cache.pinned(); p != 0 {
		t.Fatalf("%d pins left", p)
	}
}

// A cache file truncated on disk never reaches a view: it is dropped and
// the chunk fetched again.
func TestReaderViewTruncatedCacheFileIsRefetched(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(1, 100<<10, 1000)
	mem := objstore.NewMemStore()
	seg := l.upload(mem, "p")[0]
	dir := filepath.Join(t.TempDir(), "c")
	r := rdReader(t, mem, func(c *ReaderConfig) { c.CacheDir = dir })
	r.cache.memMax = 0
	ctx := rdCtx(t, 30*time.Second)
	off := seg.BaseOffset + 20
	want, _, _ := l.localRead(off, 3000, seg)
	if _, err := r.Read(ctx, seg, off, 3000); err != nil {
		t.Fatal(err)
	}
	r.wg.Wait()
	des, _ := os.ReadDir(dir)
	if len(des) == 0 {
		t.Fatal("nothing cached")
	}
	for _, de := range des {
		if err := os.Truncate(filepath.Join(dir, de.Name()), 10); err != nil {
			t.Fatal(err)
		}
	}
	before := rdGetsOf(mem, seg.Key("p", ExtLog))
	v, err := r.ReadView(ctx, seg, off, 3000)
	got, _ := v.Bytes()
	v.Release()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("view over a truncated cache file: %v", err)
	}
	if rdGetsOf(mem, seg.Key("p", ExtLog)) == before {
		t.Fatal("truncated chunk served without a refetch")
	}
}

// Two fetches sharing one flight each get a view of their own: the first
// released, the second still reads its bytes; both released, no pin is
// left. ConcatViews of two segments' views reads as both in order.
func TestReaderFetchSharedViewsAndConcat(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(2, 300<<10, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = 64 << 10 })
	ctx := rdCtx(t, 30*time.Second)
	seg := segs[0]
	want, _, _ := l.localRead(seg.BaseOffset, 100<<10, seg)
	type out struct {
		v   RemoteView
		err error
	}
	ch := make(chan out, 2)
	for range 2 {
		go func() {
			v, pending, err := r.Fetch(ctx, seg, seg.BaseOffset, 100<<10, 20*time.Second)
			if pending {
				err = errors.New("pending")
			}
			ch <- out{v, err}
		}()
	}
	a, b := <-ch, <-ch
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	a.v.Release()
	if got, err := b.v.Bytes(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("second fetch's view after the first was released: %v", err)
	}
	b.v.Release()

	v1, err := r.ReadView(ctx, segs[0], segs[0].EndOffset-2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := r.ReadView(ctx, segs[1], v1.NextOffset, 50<<10)
	if err != nil {
		t.Fatal(err)
	}
	w1, _, _ := l.localRead(segs[0].EndOffset-2, 1<<20, segs[0])
	w2, _, n2 := l.localRead(v1.NextOffset, 50<<10, segs[1])
	cv := ConcatViews(v1, v2)
	got, err := cv.Bytes()
	if err != nil || !bytes.Equal(got, append(w1, w2...)) || cv.NextOffset != n2 {
		t.Fatalf("concatenated view: %d bytes up to %d (%v), want %d up to %d", len(got), cv.NextOffset, err, len(w1)+len(w2), n2)
	}
	cv.Release()
	r.wg.Wait()
	if p := r.cache.pinned(); p != 0 {
		t.Fatalf("%d pins left", p)
	}
}
