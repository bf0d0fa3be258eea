package tiering

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/tiering/objstore"
)

// Every offset of a multi-segment log, read back through the reader with
// random maxBytes (KIP-74 first batches larger than maxBytes included),
// equals the local Log.Read byte for byte; chunks of 64 KiB cross batch
// boundaries, and a 1 MiB cache forces evictions along the way.
func TestReaderReadMatchesLocalLogByteForByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := rdNewLog(t)
	l.fillRandom(rng, 4, 600<<10)
	store := objstore.NewMemStore()
	segs := l.upload(store, "p")
	r := rdReader(t, store, func(c *ReaderConfig) { c.ChunkBytes = 64 << 10; c.CacheBytes = 1 << 20 })
	ctx := rdCtx(t, 60*time.Second)

	sizes := []int{0, 1, 100, 4096, 32 << 10, 200 << 10}
	kip74 := 0
	last := segs[len(segs)-1].EndOffset
	for off := int64(0); off <= last; off++ {
		seg := l.segFor(off)
		mb := sizes[rng.IntN(len(sizes))]
		want, wf, wn := l.localRead(off, mb, seg)
		got, err := r.Read(ctx, seg, off, mb)
		if err != nil {
			t.Fatalf("Read(%d, %d): %v", off, mb, err)
		}
		if !bytes.Equal(got.Records, want) || got.FirstOffset != wf || got.NextOffset != wn {
			t.Fatalf("Read(%d, %d): %d bytes [%d, %d), local %d bytes [%d, %d)",
				off, mb, len(got.Records), got.FirstOffset, got.NextOffset, len(want), wf, wn)
		}
		if len(want) > mb {
			kip74++
		}
	}
	if kip74 == 0 {
		t.Fatal("no read returned a first batch larger than maxBytes")
	}
	st := r.Stats()
	if st.Evictions == 0 || st.Hits == 0 {
		t.Fatalf("stats %+v: want evictions and hits", st)
	}
	if len(segs) != 4 {
		t.Fatalf("%d segments uploaded", len(segs))
	}
}

// OffsetForTimestamp over the remote segments in order gives what the
// local log gives, for timestamps before, across and after the data;
// from packed segments and from segments archived before packing.
func TestReaderOffsetForTimestampMatchesLocalLog(t *testing.T) {
	t.Run("packed", func(t *testing.T) { testReaderOffsetForTimestamp(t, false) })
	t.Run("old-layout", func(t *testing.T) { testReaderOffsetForTimestamp(t, true) })
}

func testReaderOffsetForTimestamp(t *testing.T, oldLayout bool) {
	rng := rand.New(rand.NewPCG(3, 4))
	l := rdNewLog(t)
	l.fillRandom(rng, 3, 300<<10)
	store := objstore.NewMemStore()
	l.oldLayout = oldLayout
	segs := l.upload(store, "p")
	r := rdReader(t, store, func(c *ReaderConfig) { c.ChunkBytes = 32 << 10 })
	ctx := rdCtx(t, 60*time.Second)

	maxTS := segs[len(segs)-1].MaxTimestamp
	checked, found := 0, 0
	for ts := rdBaseTs - 100; ts <= maxTS+50; ts += int64(1 + rng.IntN(7)) {
		wo, wt, wok, err := l.log.OffsetForTimestamp(ts)
		if err != nil {
			t.Fatal(err)
		}
		var go_, gt int64
		var gok bool
		for _, seg := range segs {
			o, tt, ok, err := r.OffsetForTimestamp(ctx, seg, ts)
			if err != nil {
				t.Fatalf("OffsetForTimestamp(%d): %v", ts, err)
			}
			if ok {
				go_, gt, gok = o, tt, true
				break
			}
		}
		if gok != wok || (wok && (go_ != wo || gt != wt)) {
			t.Fatalf("ts %d: remote (%d, %d, %v), local (%d, %d, %v)", ts, go_, gt, gok, wo, wt, wok)
		}
		checked++
		if wok {
			found++
		}
	}
	if found == 0 || found == checked {
		t.Fatalf("%d of %d timestamps found: the sweep must cover both", found, checked)
	}
}

// Under a concurrent random workload the chunk files in CacheDir never
// exceed CacheBytes (sampled while it runs), and every read is right.
func TestReaderCacheNeverExceedsCacheBytesUnderConcurrentLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	l := rdNewLog(t)
	l.fillRandom(rng, 4, 400<<10)
	store := objstore.NewMemStore()
	segs := l.upload(store, "p")
	dir := filepath.Join(t.TempDir(), "cache")
	const capacity = 5 * 64 << 10 // five chunks
	r := rdReader(t, store, func(c *ReaderConfig) {
		c.CacheDir, c.ChunkBytes, c.CacheBytes, c.Threads = dir, 64<<10, capacity, 3
	})
	ctx := rdCtx(t, 60*time.Second)
	last := segs[len(segs)-1].EndOffset

	// Expected bytes are computed before the readers start (the local
	// log is not read concurrently with them, to keep the check simple).
	type want struct {
		off  int64
		mb   int
		data []byte
	}
	var cases []want
	for range 400 {
		off := rng.Int64N(last + 1)
		mb := 1 + rng.IntN(150<<10)
		b, _, _ := l.localRead(off, mb, l.segFor(off))
		cases = append(cases, want{off, mb, b})
	}

	stop := make(chan struct{})
	var over atomic.Int64
	var samples atomic.Int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := rdDirBytes(t, dir); n > capacity {
				over.Store(n)
			}
			if n := r.Stats().CachedBytes; n > capacity {
				over.Store(n)
			}
			samples.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(cases); i += 8 {
				c := cases[i]
				got, err := r.Read(ctx, l.segFor(c.off), c.off, c.mb)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got.Records, c.data) {
					errs <- errors.New("bytes differ from the local log")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := over.Load(); n != 0 {
		t.Fatalf("cache held %d bytes, bound %d", n, capacity)
	}
	if samples.Load() == 0 || r.Stats().Evictions == 0 {
		t.Fatalf("no samples or no evictions: %+v", r.Stats())
	}
}

// A hot set of chunks read repeatedly keeps a hit ratio >= 0.8 while a
// sequential scanner streams 4x the cache through it. Between two rounds
// of the hot set the scanner streams more than the cache has beside it,
// so LRU would miss every hot chunk's first read of each round (~0.67).
func TestReaderHotSetSurvivesSequentialScan(t *testing.T) {
	const chunk = 64 << 10
	const capacity = 16 * chunk
	hot := rdNewLog(t)
	hot.fillFixed(1, 16*chunk+chunk/2, 4000)
	scan := rdNewLog(t)
	scan.fillFixed(1, 4*capacity+chunk, 4000)
	store := objstore.NewMemStore()
	scan.idBase = 5000 // its own segment ids, so its own keys
	hotSeg := hot.upload(store, "p")[0]
	scanSeg := scan.upload(store, "p")[0]
	r := rdReader(t, store, func(c *ReaderConfig) { c.ChunkBytes, c.CacheBytes = chunk, capacity })
	ctx := rdCtx(t, 60*time.Second)

	// Three batches in each even chunk: one hot round is 24 reads of 8
	// chunks, none adjacent (no read-ahead for the hot reader).
	hb := hot.batchesOf(hotSeg)
	var hotOffs []int64
	for c := int64(0); c < 16; c += 2 {
		for _, m := range []int64{8 << 10, 24 << 10, 40 << 10} {
			hotOffs = append(hotOffs, rdBatchInChunk(t, hb, c, chunk, m))
		}
	}

	hotReads := 0
	off := scanSeg.BaseOffset
	scanned := int64(0)
	for round := 0; off <= scanSeg.EndOffset; round++ {
		for _, o := range hotOffs {
			if _, err := r.Read(ctx, hotSeg, o, 1); err != nil {
				t.Fatal(err)
			}
			hotReads++
		}
		// 12 chunks of scanning between rounds (plus its read-ahead).
		for target := scanned + 12*chunk; scanned < target && off <= scanSeg.EndOffset; {
			rr, err := r.Read(ctx, scanSeg, off, 32<<10)
			if err != nil {
				t.Fatal(err)
			}
			scanned += int64(len(rr.Records))
			off = rr.NextOffset
		}
	}
	if scanned < 4*capacity {
		t.Fatalf("scanned %d bytes, want >= %d", scanned, 4*capacity)
	}
	misses := rdGetsOf(store, hotSeg.Key("p", ExtLog))
	ratio := 1 - float64(misses)/float64(hotReads)
	t.Logf("hot reads %d, hot GETs %d, hit ratio %.3f, stats %+v", hotReads, misses, ratio, r.Stats())
	if ratio < 0.8 {
		t.Fatalf("hot-set hit ratio %.3f < 0.8 (%d GETs for %d reads)", ratio, misses, hotReads)
	}
}

// N concurrent readers of one cold chunk cause one GET of it.
func TestReaderConcurrentReadersOfColdChunkShareOneGet(t *testing.T) {
	sr := newRdSlowRead(t, 50*time.Millisecond)
	mem, r, ctx, seg, want := sr.mem, sr.r, sr.ctx, sr.seg, sr.want

	const n = 16
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rr, err := r.Read(ctx, seg, seg.BaseOffset+5, 2000)
			if err == nil && !bytes.Equal(rr.Records, want) {
				err = errors.New("wrong bytes")
			}
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if g := rdGetsOf(mem, seg.Key("p", ExtLog)); g != 1 {
		t.Fatalf("%d GETs of the .log for %d concurrent readers, want 1", g, n)
	}
	if g := rdGetsOf(mem, seg.Key("p", ExtMeta)); g != 1 {
		t.Fatalf("%d GETs of the .meta, want 1", g)
	}
}

// A sequential reader gets chunks fetched ahead of it (and every chunk
// once); a reader jumping around gets none.
func TestReaderReadAheadOnlyForSequentialReaders(t *testing.T) {
	const chunk = 64 << 10
	l := rdNewLog(t)
	l.fillFixed(1, 16*chunk, 4000)
	mem := objstore.NewMemStore()
	seg := l.upload(mem, "p")[0]
	nchunks := int((seg.SizeBytes + chunk - 1) / chunk)
	ctx := rdCtx(t, 30*time.Second)
	logKey := seg.Key("p", ExtLog)

	t.Run("sequential", func(t *testing.T) {
		mem.ResetCalls()
		r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = chunk; c.ReadAheadChunks = 2 })
		for off := seg.BaseOffset; off <= seg.EndOffset; {
			rr, err := r.Read(ctx, seg, off, 16<<10)
			if err != nil {
				t.Fatal(err)
			}
			off = rr.NextOffset
		}
		r.Close() // waits for read-ahead
		st := r.Stats()
		if g := rdGetsOf(mem, logKey); g != nchunks {
			for _, c := range mem.Calls() {
				t.Logf("%s %s %d %d %v", c.Op, c.Key[len(c.Key)-8:], c.Off, c.Length, c.Err)
			}
			t.Fatalf("%d GETs for %d chunks: each chunk must be fetched once", g, nchunks)
		}
		// The foreground fetches chunk 0 itself; a read from the
		// segment's first batch is sequential, and from then on every
		// chunk is fetched ahead of it (registered before the reader
		// moves on, so the reader joins or finds it, never fetches it a
		// second time).
		if st.ReadAheadChunks != int64(nchunks-1) {
			t.Fatalf("%d chunks read ahead of %d: %+v", st.ReadAheadChunks, nchunks, st)
		}
	})
	t.Run("random", func(t *testing.T) {
		mem.ResetCalls()
		r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = chunk; c.ReadAheadChunks = 2 })
		bs := l.batchesOf(seg)
		order := []int64{9, 3, 12, 6, 0, 14, 4, 11, 1, 7, 13, 2, 10} // never c then c+1
		for _, c := range order {
			off := rdBatchInChunk(t, bs, c, chunk, 8<<10)
			if _, err := r.Read(ctx, seg, off, 1); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
		if st := r.Stats(); st.ReadAheadChunks != 0 {
			t.Fatalf("read-ahead for a random reader: %+v", st)
		}
		if g := rdGetsOf(mem, logKey); g != len(order) {
			t.Fatalf("%d GETs for %d random reads", g, len(order))
		}
	})
}

// At most Threads GETs are in flight however many partitions read at
// once, and reads of different segments do run in parallel.
func TestReaderThreadsBoundConcurrentGets(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(12, 100<<10, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	cs := &rdCountingStore{ObjectStore: objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpGet, Latency: 20 * time.Millisecond})}
	r := rdReader(t, cs, func(c *ReaderConfig) { c.Threads = 3; c.ReadAheadChunks = -1 })
	ctx := rdCtx(t, 30*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, len(segs))
	for _, seg := range segs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Read(ctx, seg, seg.BaseOffset+3, 1<<10)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	maxC, gets := cs.stats()
	if maxC > 3 {
		t.Fatalf("%d GETs in flight at once, Threads is 3", maxC)
	}
	if maxC < 2 {
		t.Fatalf("at most %d GET in flight: reads of different segments did not overlap", maxC)
	}
	if gets != 2*len(segs) { // one .index and one chunk each
		t.Fatalf("%d GETs, want %d", gets, 2*len(segs))
	}
}

// A read queued behind a stuck GET returns its context's error and
// leaves the queue; a full queue refuses at once.
func TestReaderQueuedReadHonoursContextAndQueueBound(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(3, 100<<10, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	// Every GET of segment 0's .index hangs until its caller gives up.
	stuck := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpGet, Key: "p/*/*/" + "*", Latency: time.Hour, Nth: 1})
	r := rdReader(t, stuck, func(c *ReaderConfig) { c.Threads = 1; c.MaxQueuedReads = 1 })

	holderCtx, stopHolder := context.WithCancel(context.Background())
	defer stopHolder()
	holderDone := make(chan error, 1)
	go func() {
		_, err := r.Read(holderCtx, segs[0], segs[0].BaseOffset, 100)
		holderDone <- err
	}()
	rdWaitFor(t, func() bool { return r.Stats().InFlight == 1 })

	qctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	queuedDone := make(chan error, 1)
	go func() {
		_, err := r.Read(qctx, segs[1], segs[1].BaseOffset, 100)
		queuedDone <- err
	}()
	rdWaitFor(t, func() bool { return r.Stats().Queued == 1 })
	// The queue holds one: a third read is refused without waiting.
	if _, err := r.Read(rdCtx(t, 10*time.Second), segs[2], segs[2].BaseOffset, 100); !errors.Is(err, ErrReadQueueFull) {
		t.Fatalf("third read: %v, want ErrReadQueueFull", err)
	}
	select {
	case err := <-queuedDone:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("queued read: %v, want deadline exceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("queued read did not return when its context ended")
	}
	if st := r.Stats(); st.Queued != 0 {
		t.Fatalf("queue still holds %d after the cancelled read left", st.Queued)
	}
	stopHolder()
	if err := <-holderDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("holder: %v", err)
	}
	// The slot is free again: a read now succeeds (the rule fired once).
	if _, err := r.Read(rdCtx(t, 10*time.Second), segs[1], segs[1].BaseOffset, 100); err != nil {
		t.Fatal(err)
	}
}

// rdWaitFor polls cond until it holds (bounded).
func rdWaitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, cond, "reader condition")
}

// A flipped byte inside a batch is ErrCorruptObject with no bytes, for
// reads that start at it and reads that would include it; a .log shorter
// than its recorded size too. Batches before the damage still read.
func TestReaderCorruptObjectIsAnErrorWithoutBytes(t *testing.T) {
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
	r := rdReader(t, mem)
	for _, c := range []struct {
		off int64
		mb  int
	}{{victim.base, 1}, {bs[len(bs)/2-3].base, 1 << 20}} {
		rr, err := r.Read(ctx, seg, c.off, c.mb)
		if !errors.Is(err, ErrCorruptObject) || rr.Records != nil {
			t.Fatalf("Read(%d, %d) = %d bytes, %v; want ErrCorruptObject and no bytes", c.off, c.mb, len(rr.Records), err)
		}
	}
	want, _, _ := l.localRead(bs[1].base, 2000, seg)
	if rr, err := r.Read(ctx, seg, bs[1].base, 2000); err != nil || !bytes.Equal(rr.Records, want) {
		t.Fatalf("read before the damage: %v", err)
	}

	short := seg
	short.SizeBytes += 500 // the object is shorter than the segment says
	last := bs[len(bs)-1]
	// The chunk cached by the reads above holds the whole object: the
	// true last batch is served from it.
	want, _, _ = l.localRead(last.base, 1<<20, seg)
	if rr, err := r.Read(ctx, short, last.base, 1<<20); err != nil || !bytes.Equal(rr.Records, want) {
		t.Fatalf("last batch from the cached chunk: %d bytes, %v; want %d bytes", len(rr.Records), err, len(want))
	}
	// Fetched afresh, the chunk the segment's size promises is 500 bytes
	// short: a corrupt object, and no bytes.
	r.Forget(seg)
	if rr, err := r.Read(ctx, short, last.base, 1<<20); !errors.Is(err, ErrCorruptObject) || rr.Records != nil {
		t.Fatalf("short object: %d bytes, %v; want ErrCorruptObject and no bytes", len(rr.Records), err)
	}
}

// A store error fails the read and caches nothing; the same read then
// succeeds.
func TestReaderStoreErrorIsRetriable(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(1, 100<<10, 1000)
	mem := objstore.NewMemStore()
	seg := l.upload(mem, "p")[0]
	f := objstore.WithFaults(mem)
	r := rdReader(t, f)
	ctx := rdCtx(t, 30*time.Second)
	off := seg.BaseOffset + 10
	want, _, _ := l.localRead(off, 5000, seg)
	for _, rule := range []objstore.Rule{
		{Op: objstore.OpGet, Key: "p/*/*/*.meta", Nth: 1, Err: objstore.ErrInjected},
		{Op: objstore.OpGet, Key: "p/*/*/*.meta", Nth: 1, FailReadAfter: 10},
		{Op: objstore.OpGet, Key: "p/*/*/*.log", Nth: 1, Err: objstore.ErrInjected},
		{Op: objstore.OpGet, Key: "p/*/*/*.log", Nth: 1, FailReadAfter: 100},
	} {
		f.Clear()
		r.Forget(seg)
		f.Add(rule)
		if rr, err := r.Read(ctx, seg, off, 5000); err == nil || rr.Records != nil {
			t.Fatalf("rule %+v: read succeeded", rule)
		} else if !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("rule %+v: %v, want the store's error wrapped", rule, err)
		}
		rr, err := r.Read(ctx, seg, off, 5000)
		if err != nil || !bytes.Equal(rr.Records, want) {
			t.Fatalf("rule %+v: retry: %v", rule, err)
		}
	}
}

// A cache file that is truncated or overwritten on disk is dropped and
// the chunk fetched again; the reader never returns its bytes.
func TestReaderDamagedCacheFileIsRefetched(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(1, 100<<10, 1000)
	mem := objstore.NewMemStore()
	seg := l.upload(mem, "p")[0]
	dir := filepath.Join(t.TempDir(), "c")
	r := rdReader(t, mem, func(c *ReaderConfig) { c.CacheDir = dir })
	// Chunks lose their buffer once written, so reads go to the files.
	r.cache.memMax = 0
	ctx := rdCtx(t, 30*time.Second)
	off := seg.BaseOffset + 20
	want, _, _ := l.localRead(off, 3000, seg)
	for _, damage := range []func(path string) error{
		func(p string) error { return os.Truncate(p, 10) },
		func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for i := range b {
				b[i] ^= 0x5a
			}
			return os.WriteFile(p, b, 0o600)
		},
	} {
		if _, err := r.Read(ctx, seg, off, 3000); err != nil {
			t.Fatal(err)
		}
		r.wg.Wait() // the chunk's file is written in the background
		des, _ := os.ReadDir(dir)
		if len(des) == 0 {
			t.Fatal("nothing cached")
		}
		for _, de := range des {
			if err := damage(filepath.Join(dir, de.Name())); err != nil {
				t.Fatal(err)
			}
		}
		before := rdGetsOf(mem, seg.Key("p", ExtLog))
		rr, err := r.Read(ctx, seg, off, 3000)
		if err != nil || !bytes.Equal(rr.Records, want) {
			t.Fatalf("read over a damaged cache file: %v", err)
		}
		if rdGetsOf(mem, seg.Key("p", ExtLog)) == before {
			t.Fatal("damaged chunk served without a refetch")
		}
	}
}

// Forget removes a segment's chunk files; Close removes the rest; a new
// reader wipes chunk files left in its CacheDir but nothing else.
func TestReaderForgetCloseAndStartWipe(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(2, 100<<10, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	dir := filepath.Join(t.TempDir(), "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "99.chunk"), []byte("stale"), 0o600)
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("not ours"), 0o600)
	r := rdReader(t, mem, func(c *ReaderConfig) { c.CacheDir = dir })
	if _, err := os.Stat(filepath.Join(dir, "99.chunk")); !os.IsNotExist(err) {
		t.Fatalf("stale chunk not wiped: %v", err)
	}
	ctx := rdCtx(t, 30*time.Second)
	for _, s := range segs {
		if _, err := r.Read(ctx, s, s.BaseOffset, 100); err != nil {
			t.Fatal(err)
		}
	}
	n := r.Stats().CachedChunks
	r.Forget(segs[0])
	if got := r.Stats().CachedChunks; got >= n || got == 0 {
		t.Fatalf("chunks %d → %d after forgetting one of two segments", n, got)
	}
	r.Close()
	if b := rdDirBytes(t, dir); b != int64(len("not ours")) {
		t.Fatalf("%d bytes left in the cache dir after Close", b)
	}
	if _, err := r.Read(ctx, segs[0], 0, 1); !errors.Is(err, ErrReaderClosed) {
		t.Fatalf("read after Close: %v", err)
	}
}

// Two readers share a registry; the metrics count what happened.
func TestReaderMetricsShareARegistry(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(1, 100<<10, 1000)
	mem := objstore.NewMemStore()
	seg := l.upload(mem, "p")[0]
	reg := prometheus.NewRegistry()
	r1 := rdReader(t, mem, func(c *ReaderConfig) { c.Registerer = reg })
	r2 := rdReader(t, mem, func(c *ReaderConfig) { c.Registerer = reg })
	ctx := rdCtx(t, 30*time.Second)
	for _, r := range []*Reader{r1, r2, r1} {
		// Past the segment's first offset: the read looks the index up.
		if _, err := r.Read(ctx, seg, seg.BaseOffset+1, 100); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r1.Read(ctx, seg, seg.EndOffset+1, 100); !errors.Is(err, ErrOffsetNotInSegment) {
		t.Fatalf("offset past the segment: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			name := mf.GetName()
			for _, lp := range m.GetLabel() {
				name += "{" + lp.GetValue() + "}"
			}
			got[name] += v
		}
	}
	for name, want := range map[string]float64{
		MetricCacheHits: 1, MetricCacheMisses: 2, MetricIndexCacheHits: 1, MetricIndexCacheMisses: 2,
		MetricRemoteReads + "{ok}": 3, MetricRemoteReads + "{error}": 1, MetricRemoteReadSeconds: 4,
		MetricReadQueueWaitSeconds: 4,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if g := r1.Stats().GETs + r2.Stats().GETs; got[MetricRemoteGets] != float64(g) || g == 0 {
		t.Errorf("%s = %v, the readers made %d GETs", MetricRemoteGets, got[MetricRemoteGets], g)
	}
	if got[MetricRemoteGetBytes] < 2*float64(seg.SizeBytes) {
		t.Errorf("%s = %v, want both readers' chunk GETs (%d bytes each) at least", MetricRemoteGetBytes, got[MetricRemoteGetBytes], seg.SizeBytes)
	}
	if got[MetricCacheBytes] <= 0 || got[MetricRemoteReadBytes] <= 0 {
		t.Errorf("cache bytes %v, read bytes %v", got[MetricCacheBytes], got[MetricRemoteReadBytes])
	}
}

// The byte-rate budget holds the long-run rate: fetching N bytes at R
// bytes/s takes at least (N-R)/R seconds of token waits. Checked on the
// bucket with a fake clock, not on wall time.
func TestTokenBucketChargesDebt(t *testing.T) {
	now := time.Unix(0, 0)
	tb := newTokenBucket(1000, func() time.Time { return now })
	if d := tb.take(1000); d != 0 {
		t.Fatalf("first second of burst waited %v", d)
	}
	if d := tb.take(500); d != 500*time.Millisecond {
		t.Fatalf("debt of 500 bytes at 1000/s: wait %v", d)
	}
	now = now.Add(2 * time.Second)
	if d := tb.take(1000); d != 0 {
		t.Fatalf("after paying the debt and refilling: wait %v", d)
	}
	if d := tb.take(4000); d != 4*time.Second {
		t.Fatalf("a GET larger than the burst: wait %v, want 4s", d)
	}
}

// A fetch that joined a read-ahead flight which the full background queue
// then refused does not inherit that refusal: it reads the chunk itself.
// (The race: read-ahead sees room in the background queue, another
// read-ahead takes it, a fetch joins the first one's flight, and the
// flight fails with ErrReadQueueFull — CI once saw it surface as a read
// error under eight concurrent readers.)
func TestReaderFetchJoiningRefusedReadAheadRetries(t *testing.T) {
	l := rdNewLog(t)
	l.fillFixed(1, 100<<10, 1000)
	store := objstore.NewMemStore()
	seg := l.upload(store, "p")[0]
	r := rdReader(t, store, func(c *ReaderConfig) { c.ChunkBytes = 64 << 10 })
	ctx := rdCtx(t, 30*time.Second)
	want, _, _ := l.localRead(seg.BaseOffset, 1000, seg)
	// Warm the index so the read's only flight is chunk 0's.
	if _, err := r.index(ctx, seg, ExtIndex, true); err != nil {
		t.Fatal(err)
	}

	k := chunkKey{seg.Key("p", ExtLog), 0}
	f := &chunkFlight{done: make(chan struct{}), bg: true}
	r.fmu.Lock()
	r.chunkFlights[k] = f
	r.fmu.Unlock()

	type res struct {
		rec []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		got, err := r.Read(ctx, seg, seg.BaseOffset, 1000)
		done <- res{got.Records, err}
	}()
	// The fetch has joined once it promoted the flight's ticket.
	rdWaitFor(t, func() bool {
		r.budget.mu.Lock()
		defer r.budget.mu.Unlock()
		return f.ticket.fg
	})
	r.fmu.Lock()
	delete(r.chunkFlights, k)
	r.fmu.Unlock()
	f.err = ErrReadQueueFull
	close(f.done)

	select {
	case got := <-done:
		if got.err != nil {
			t.Fatalf("read after a refused read-ahead: %v", got.err)
		}
		if !bytes.Equal(got.rec, want) {
			t.Fatal("bytes differ from the local log")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("read did not return")
	}
}
