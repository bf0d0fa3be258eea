package tiering

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/tiering/objstore"
)

// Helpers of the remote reader's tests (prefixed rd so they never clash
// with the uploader's helpers in this package).

const rdBaseTs = int64(1_700_000_000_000)

var rdTopicID = uuid.MustParse("3b241101-e2bb-4255-8caf-4136c566a962")

// rdLog is a real storage.Log on t.TempDir(), whose sealed segments are
// uploaded as the uploader would, byte for byte.
type rdLog struct {
	tb     testing.TB
	log    *storage.Log
	segs   []RemoteSegment
	idBase int64 // segment ids are segUUID(idBase + index)
	// oldLayout uploads segments as archived before packing (issue 20).
	oldLayout bool
}

// rdBatch builds a v2 batch of n records with values of valueSize bytes
// and the given record timestamps (n of them), compressed with codec.
func rdBatch(tb testing.TB, codec batch.Codec, valueSize int, tss []int64) []byte {
	tb.Helper()
	maxTS := tss[0]
	for _, t := range tss {
		maxTS = max(maxTS, t)
	}
	b := batch.NewBuilder(batch.Header{
		PartitionLeaderEpoch: -1, Attributes: int16(codec), LastOffsetDelta: int32(len(tss) - 1),
		FirstTimestamp: tss[0], MaxTimestamp: maxTS, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	})
	for i, t := range tss {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)
		b.Add(batch.Record{OffsetDelta: int32(i), TimestampDelta: t - tss[0], Key: fmt.Appendf(nil, "k%d", i), Value: v})
	}
	out, err := b.AppendTo(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// rdNewLog opens a log in a temp dir with a 1 KiB index interval.
func rdNewLog(tb testing.TB) *rdLog {
	tb.Helper()
	cfg := storage.DefaultConfig()
	cfg.IndexIntervalBytes = 1024
	cfg.FileDeleteDelayMs = 0
	l, err := storage.OpenLog(storage.LogOptions{
		Dir: filepath.Join(tb.TempDir(), "t-0"), Topic: "t", Partition: 0, Config: cfg, CleanShutdown: true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return &rdLog{tb: tb, log: l}
}

// append appends one batch as a leader.
func (l *rdLog) append(b []byte) {
	l.tb.Helper()
	if _, err := l.log.Append(b, storage.AppendOptions{LeaderEpoch: 1, AssignOffsets: true}); err != nil {
		l.tb.Fatal(err)
	}
}

// fillRandom appends batches until the active segment holds about
// segBytes, then rolls, nsegs times: batch sizes from tiny to larger than
// 256 KiB (KIP-74 cases), some compressed, record timestamps jittered so
// they are not monotonic.
func (l *rdLog) fillRandom(rng *rand.Rand, nsegs int, segBytes int64) {
	l.tb.Helper()
	ts := rdBaseTs
	for range nsegs {
		start := l.log.Size()
		for l.log.Size()-start < segBytes {
			n := 1 + rng.IntN(20)
			vs := 10 + rng.IntN(2000)
			if rng.IntN(25) == 0 {
				vs = 300 << 10 / n // a batch above the test's maxBytes
			}
			tss := make([]int64, n)
			for i := range tss {
				ts += int64(rng.IntN(5))
				tss[i] = ts - int64(rng.IntN(40)) // out of order within the batch
			}
			codec := batch.CodecNone
			if rng.IntN(6) == 0 {
				codec = batch.CodecGzip
			}
			l.append(rdBatch(l.tb, codec, vs, tss))
		}
		if err := l.log.Roll(); err != nil {
			l.tb.Fatal(err)
		}
	}
}

// fillFixed appends batches of exactly batchBytes-ish (one record of
// value size) until size bytes, then rolls, nsegs times.
func (l *rdLog) fillFixed(nsegs int, segBytes int64, valueSize int) {
	l.tb.Helper()
	ts := rdBaseTs
	for range nsegs {
		start := l.log.Size()
		for l.log.Size()-start < segBytes {
			ts++
			l.append(rdBatch(l.tb, batch.CodecNone, valueSize, []int64{ts}))
		}
		if err := l.log.Roll(); err != nil {
			l.tb.Fatal(err)
		}
	}
}

// upload puts every sealed segment's .log and a packed .meta of its
// .index and .timeindex (with oldLayout, the .log, .index and .timeindex
// objects of a segment archived before packing) into store under their
// keys, and records the RemoteSegments.
func (l *rdLog) upload(store objstore.ObjectStore, prefix string) []RemoteSegment {
	l.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l.segs = nil
	for i, s := range l.log.Segments() {
		if !s.Sealed {
			continue
		}
		seg := RemoteSegment{
			Partition: Partition{Topic: "t", TopicID: rdTopicID, Index: 0},
			SegmentID: segUUID(l.idBase + 1000 + int64(i)), BaseOffset: s.BaseOffset, EndOffset: s.NextOffset - 1,
			MaxTimestamp: s.MaxTimestamp, SizeBytes: s.Size,
		}
		objs := map[string][]byte{}
		for ext, path := range map[string]string{ExtLog: s.LogPath, ExtIndex: s.IndexPath, ExtTimeIndex: s.TimeIndexPath} {
			data, err := os.ReadFile(path)
			if err != nil {
				l.tb.Fatal(err)
			}
			objs[ext] = data
		}
		if !l.oldLayout {
			objs = map[string][]byte{ExtLog: objs[ExtLog], ExtMeta: encodePack(objs)}
		}
		for ext, data := range objs {
			if _, err := store.Put(ctx, seg.Key(prefix, ext), bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
				l.tb.Fatal(err)
			}
		}
		l.segs = append(l.segs, seg)
	}
	return l.segs
}

// segFor returns the remote segment holding offset.
func (l *rdLog) segFor(off int64) RemoteSegment {
	for _, s := range l.segs {
		if off >= s.BaseOffset && off <= s.EndOffset {
			return s
		}
	}
	l.tb.Fatalf("no segment holds %d", off)
	return RemoteSegment{}
}

// localRead is Log.Read bounded by the segment's end, as bytes.
func (l *rdLog) localRead(off int64, maxBytes int, seg RemoteSegment) ([]byte, int64, int64) {
	l.tb.Helper()
	v, err := l.log.Read(off, maxBytes, seg.EndOffset+1)
	if err != nil {
		l.tb.Fatalf("local Read(%d): %v", off, err)
	}
	defer v.Release()
	b, err := v.Bytes()
	if err != nil {
		l.tb.Fatal(err)
	}
	return b, v.FirstOffset, v.NextOffset
}

// rdReader builds a reader over store with a cache in a temp dir; mods
// adjust the config.
func rdReader(tb testing.TB, store objstore.ObjectStore, mods ...func(*ReaderConfig)) *Reader {
	tb.Helper()
	cfg := ReaderConfig{
		Store: store, Prefix: "p", CacheDir: filepath.Join(tb.TempDir(), "remote-cache"),
		CacheBytes: 8 << 20, ChunkBytes: 256 << 10, IndexCacheBytes: 1 << 20, Threads: 4,
	}
	for _, m := range mods {
		m(&cfg)
	}
	r, err := NewReader(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// rdDirBytes sums the sizes of the chunk files in dir.
func rdDirBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, de := range des {
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		n += info.Size()
	}
	return n
}

// rdCountingStore counts concurrent Gets (max seen) around a store.
type rdCountingStore struct {
	objstore.ObjectStore
	mu       sync.Mutex
	cur, max int
	gets     int
}

func (s *rdCountingStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.cur++
	s.gets++
	s.max = max(s.max, s.cur)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cur--
		s.mu.Unlock()
	}()
	return s.ObjectStore.Get(ctx, key, off, length)
}

func (s *rdCountingStore) stats() (maxConcurrent, gets int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.gets
}

// rdGetsOf counts the recorded Gets of key.
func rdGetsOf(m *objstore.MemStore, key string) int {
	n := 0
	for _, c := range m.Calls() {
		if c.Op == objstore.OpGet && c.Key == key {
			n++
		}
	}
	return n
}

// rdCtx is a context that ends with the test or after d.
func rdCtx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// rdBatchPos is one batch of a local segment: its file position and offsets.
type rdBatchPos struct {
	pos, size  int64
	base, last int64
}

// batchesOf lists the batches of seg, from the local log.
func (l *rdLog) batchesOf(seg RemoteSegment) []rdBatchPos {
	l.tb.Helper()
	var out []rdBatchPos
	for off := seg.BaseOffset; off <= seg.EndOffset; {
		v, err := l.log.Read(off, 1, seg.EndOffset+1)
		if err != nil {
			l.tb.Fatal(err)
		}
		out = append(out, rdBatchPos{pos: v.Pos, size: v.Size, base: v.FirstOffset, last: v.NextOffset - 1})
		v.Release()
		off = v.NextOffset
	}
	return out
}

// batchInChunk returns the base offset of a batch lying wholly inside
// chunk c, at least margin bytes from its start (so the index entry the
// reader starts from lies in c too).
func rdBatchInChunk(tb testing.TB, bs []rdBatchPos, c, chunk, margin int64) int64 {
	tb.Helper()
	for _, b := range bs {
		if b.pos >= c*chunk+margin && b.pos+b.size <= (c+1)*chunk {
			return b.base
		}
	}
	tb.Fatalf("no batch inside chunk %d", c)
	return 0
}

// rdSlowRead is a reader (read-ahead off) over two uploaded segments in a
// MemStore whose GETs take latency, with an offset of the second segment
// and the local log's bytes there (2000 bytes at most); the store's calls
// are reset.
type rdSlowRead struct {
	mem  *objstore.MemStore
	r    *Reader
	ctx  context.Context
	seg  RemoteSegment
	off  int64
	want []byte
}

func newRdSlowRead(t *testing.T, latency time.Duration) rdSlowRead {
	t.Helper()
	l := rdNewLog(t)
	l.fillFixed(2, 300<<10, 1000)
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	store := objstore.WithFaults(mem, objstore.Rule{Op: objstore.OpGet, Latency: latency})
	r := rdReader(t, store, func(c *ReaderConfig) { c.ReadAheadChunks = -1 })
	seg := segs[1]
	want, _, _ := l.localRead(seg.BaseOffset+5, 2000, seg)
	mem.ResetCalls()
	return rdSlowRead{mem: mem, r: r, ctx: rdCtx(t, 30*time.Second), seg: seg, off: seg.BaseOffset + 5, want: want}
}
