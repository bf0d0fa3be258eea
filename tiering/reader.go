package tiering

// The remote reader: fetches and timestamp lookups below a partition's
// local log start, served from the segment objects the uploader wrote.
//
// Files:
//
//	reader.go          Reader: Read, OffsetForTimestamp, chunk flights, read-ahead
//	reader_index.go    lookups in fetched .index/.timeindex bytes, the batch scanner
//	reader_metrics.go  Prometheus metrics (names in api.go)
//	cache.go           the on-disk chunk cache (2Q eviction; why there)
//	cache_index.go     the in-memory index cache (LRU)
//	budget.go          Threads slots, priority queue, byte-rate token bucket
//
// A read, in order: the segment's .index (index cache, else one GET) gives
// the greatest entry at or below the offset; from its position the reader
// walks batch headers to the batch holding the offset; it then reads
// [that batch, + maxBytes) chunk by chunk (chunk cache, else one ranged
// GET per chunk, shared by every concurrent reader of it), keeps the whole
// batches that fit (the first always, KIP-74) and checks each one's CRC
// before returning it. Moving forward into the next chunk of a segment
// marks the reader sequential: the next ReadAheadChunks chunks are fetched
// in the background, at background priority.
//
// Lock order: Reader.closeMu → Reader.fmu; Reader.smu and segState.mu are
// leaves; chunkCache.mu, indexCache.mu and readBudget.mu are leaves taken
// without any other held (fmu excepted: joining a flight may promote its
// ticket under fmu).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/tiering/objstore"
)

// ReaderConfig configures a [Reader]. Zero values take the defaults given.
type ReaderConfig struct {
	Store  objstore.ObjectStore
	Prefix string
	// CacheDir holds the chunk files: <first log dir>/remote-cache. Chunk
	// files left there by an earlier run are removed by NewReader.
	CacheDir   string
	CacheBytes int64 // remote.log.cache.bytes (1 GiB): hard bound on chunk bytes on disk
	// ChunkBytes (remote.log.cache.chunk.bytes, 4 MiB) is the unit of
	// ranged GETs and of caching: chunk i of a segment covers
	// [i*ChunkBytes, (i+1)*ChunkBytes) of its .log.
	ChunkBytes      int64
	IndexCacheBytes int64 // remote.log.index.cache.bytes (64 MiB)
	Threads         int   // remote.log.reader.threads (8): concurrent GETs node-wide
	// MaxBytesPerSecond (remote.log.manager.fetch.max.bytes.per.second)
	// bounds bytes fetched from the store; 0 is unlimited.
	MaxBytesPerSecond int64
	// ReadAheadChunks (remote.log.reader.readahead.chunks, 2) is how many
	// chunks are prefetched ahead of a sequential reader; < 0 disables
	// read-ahead. Read-ahead continues into the segment named by
	// [Reader.Follows] when it reaches the end of one.
	ReadAheadChunks int
	// MaxQueuedReads bounds the GETs of fetches waiting for a thread
	// (default 64 × Threads); beyond it reads fail with
	// [ErrReadQueueFull]. Read-ahead waits in its own queue of Threads.
	MaxQueuedReads int
	// FetchTimeout plus the fetch's wait bounds a [Reader.Fetch] flight
	// (remote.storage.request.timeout.ms); 0 means DefaultFetchTimeout.
	FetchTimeout time.Duration
	Registerer   prometheus.Registerer // may be nil
	Logger       *slog.Logger          // nil: discard
}

// Defaults of [ReaderConfig].
const (
	DefaultRemoteCacheBytes      = 1 << 30
	DefaultRemoteChunkBytes      = 4 << 20
	DefaultRemoteIndexCacheBytes = 64 << 20
	DefaultRemoteReaderThreads   = 8
	DefaultRemoteReadAheadChunks = 2
)

// maxIndexObject bounds the bytes read of one .index or .timeindex object
// (Kafka's segment.index.bytes is at most a few MiB; a larger object is
// corrupt, not something to hold in memory).
const maxIndexObject = 64 << 20

var (
	// ErrCorruptObject is returned (wrapped) by [Reader.Read] and
	// [Reader.OffsetForTimestamp] when a segment object does not hold
	// whole, valid batches where it must (bad CRC, bad framing, shorter
	// than its recorded size). No bytes are returned with it.
	ErrCorruptObject = errors.New("tiering: corrupt remote segment object")
	// ErrOffsetNotInSegment is returned by [Reader.Read] for an offset
	// above the segment's EndOffset: the caller picked the wrong segment.
	ErrOffsetNotInSegment = errors.New("tiering: offset not in remote segment")
	// ErrReaderClosed is returned by every call after [Reader.Close].
	ErrReaderClosed = errors.New("tiering: remote reader closed")
)

// RemoteRead is what [Reader.Read] returns: whole record batches, owned by
// the caller.
type RemoteRead struct {
	Records     []byte
	FirstOffset int64 // base offset of the first batch
	NextOffset  int64 // offset after the last batch
}

// ReaderStats are counters of a [Reader] (for status and tests).
type ReaderStats struct {
	Hits, Misses    int64 // chunk lookups of foreground reads
	CachedBytes     int64 // chunk bytes on disk, writes in progress included
	CachedChunks    int
	Evictions       int64
	Dropped         int64 // cache files that failed to read back
	InFlight        int   // GETs holding a thread
	Queued          int   // GETs waiting for one
	ReadAheadChunks int64 // chunks prefetched
	IndexHits       int64
	IndexMisses     int64
	GETs            int64 // object-store GETs issued
	FetchReads      int64 // reads [Reader.Fetch] started (fetches that joined one not counted)
}

// Reader reads remote segments for fetches and ListOffsets. It is safe
// for concurrent use: the broker calls Read for many partitions of one
// fetch at once, and reads of different segments proceed in parallel up
// to Threads GETs.
//
// Buffers: the Records of a [RemoteRead] are a fresh slice the caller
// owns. Idempotence: Read, OffsetForTimestamp and Forget are; Close is.
type Reader struct {
	store      objstore.ObjectStore
	prefix     string
	chunkBytes int64
	readAhead  int
	maxRA      int64
	cache      *chunkCache
	idx        *indexCache
	budget     *readBudget
	m          *readerMetrics
	log        *slog.Logger

	ctx    context.Context // ends at Close: read-ahead runs under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // read-ahead goroutines

	closeMu sync.RWMutex // guards closed against wg.Add
	closed  bool

	fmu          sync.Mutex // guards chunkFlights, idxFlights, fetchFlights
	chunkFlights map[chunkKey]*chunkFlight
	idxFlights   map[string]*idxFlight
	fetchFlights map[fetchKey]*fetchFlight // reader_fetch.go
	fetchTimeout time.Duration

	smu  sync.Mutex // guards segs
	segs map[string]*segState

	missing missingSet // segments reads found objects of missing

	raPending                atomic.Int64
	hits, misses, raChunks   atomic.Int64
	idxHits, idxMisses, gets atomic.Int64
	fetchReads               atomic.Int64
}

// segState is what the reader remembers of one segment's .log between
// reads: its size, and where its last reader was (read-ahead).
type segState struct {
	mu        sync.Mutex     // guards the fields below
	size      int64          // 0: unknown
	lastChunk int64          // last chunk a foreground read touched; -1: none
	raUpTo    int64          // highest chunk read-ahead was issued for; -1: none
	next      *RemoteSegment // the segment after this one ([Reader.Follows]); nil: unknown
}

// chunkFlight is one GET of one chunk, shared by everyone who wants the
// chunk meanwhile (singleflight). done closes once data or err is set.
type chunkFlight struct {
	done   chan struct{}
	data   []byte
	err    error
	ticket readTicket
	bg     bool // led by read-ahead
}

type idxFlight struct {
	done   chan struct{}
	data   []byte
	err    error
	ticket readTicket
	bg     bool // led by read-ahead
}

// retryJoined reports whether a caller that joined a flight, and whose
// own ctx is still live, should start afresh rather than take the
// flight's error as its own: the leader gave up (its ctx ended), or the
// leader was read-ahead refused by the full background queue, a refusal
// that says nothing about a fetch's own place in the foreground queue.
func retryJoined(err error, leaderBG bool) bool {
	return isCtxErr(err) || leaderBG && errors.Is(err, ErrReadQueueFull)
}

// maxSegStates bounds the read-ahead state kept; beyond it an arbitrary
// segment's state is dropped (it only costs a missed read-ahead).
const maxSegStates = 8192

// NewReader checks cfg, prepares CacheDir (removing old chunk files) and
// registers the metrics.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	if cfg.Store == nil {
		return nil, errors.New("tiering: reader: no object store")
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = DefaultRemoteCacheBytes
	}
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = DefaultRemoteChunkBytes
	}
	if cfg.IndexCacheBytes == 0 {
		cfg.IndexCacheBytes = DefaultRemoteIndexCacheBytes
	}
	if cfg.Threads == 0 {
		cfg.Threads = DefaultRemoteReaderThreads
	}
	if cfg.ReadAheadChunks == 0 {
		cfg.ReadAheadChunks = DefaultRemoteReadAheadChunks
	}
	if cfg.MaxQueuedReads == 0 {
		cfg.MaxQueuedReads = 64 * cfg.Threads
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	switch {
	case cfg.ChunkBytes < batch.HeaderSize || cfg.ChunkBytes > 1<<30:
		return nil, fmt.Errorf("tiering: reader: remote.log.cache.chunk.bytes %d not in [%d, 1 GiB]", cfg.ChunkBytes, batch.HeaderSize)
	case cfg.CacheBytes < cfg.ChunkBytes:
		return nil, fmt.Errorf("tiering: reader: remote.log.cache.bytes %d below one chunk (%d)", cfg.CacheBytes, cfg.ChunkBytes)
	case cfg.IndexCacheBytes < 0:
		return nil, fmt.Errorf("tiering: reader: remote.log.index.cache.bytes %d is negative", cfg.IndexCacheBytes)
	case cfg.Threads < 1:
		return nil, fmt.Errorf("tiering: reader: remote.log.reader.threads %d below 1", cfg.Threads)
	case cfg.MaxBytesPerSecond < 0:
		return nil, fmt.Errorf("tiering: reader: remote.log.manager.fetch.max.bytes.per.second %d is negative", cfg.MaxBytesPerSecond)
	case cfg.MaxQueuedReads < 1:
		return nil, fmt.Errorf("tiering: reader: max queued reads %d below 1", cfg.MaxQueuedReads)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newReaderMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("tiering: reader: metrics: %w", err)
	}
	// Chunks kept in memory (see cache.go): two per thread, and at least
	// a sequential reader's chunk and its read-ahead; never more than the
	// disk cache holds.
	memMax := int(min(int64(max(2*cfg.Threads, cfg.ReadAheadChunks+2)), cfg.CacheBytes/cfg.ChunkBytes))
	cache, err := openChunkCache(cfg.CacheDir, cfg.CacheBytes, cfg.ChunkBytes, memMax)
	if err != nil {
		return nil, err
	}
	cache.onBytes = func(d int64) { m.cacheBytes.Add(float64(d)) }
	cache.onEvict = m.cacheEvictions.Inc
	ctx, cancel := context.WithCancel(context.Background())
	return &Reader{
		store: cfg.Store, prefix: cfg.Prefix, chunkBytes: cfg.ChunkBytes,
		readAhead: max(cfg.ReadAheadChunks, 0), maxRA: int64(2 * cfg.Threads),
		cache: cache, idx: newIndexCache(cfg.IndexCacheBytes),
		budget: newReadBudget(cfg.Threads, cfg.MaxQueuedReads, cfg.Threads, cfg.MaxBytesPerSecond),
		m:      m, log: cfg.Logger, ctx: ctx, cancel: cancel,
		chunkFlights: map[chunkKey]*chunkFlight{}, idxFlights: map[string]*idxFlight{},
		fetchFlights: map[fetchKey]*fetchFlight{}, fetchTimeout: cfg.FetchTimeout,
		segs: map[string]*segState{},
	}, nil
}

// Close stops read-ahead, waits for it and removes the cached chunk
// files. Reads after Close return [ErrReaderClosed].
func (r *Reader) Close() error {
	r.closeMu.Lock()
	if r.closed {
		r.closeMu.Unlock()
		return nil
	}
	r.closed = true
	r.closeMu.Unlock()
	r.cancel()
	r.wg.Wait()
	r.cache.removeAll()
	return nil
}

func (r *Reader) isClosed() bool {
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	return r.closed
}

// Forget drops the cached chunks, indexes and read-ahead state of a
// deleted segment.
func (r *Reader) Forget(seg RemoteSegment) {
	logKey := seg.Key(r.prefix, ExtLog)
	r.idx.remove(seg.Key(r.prefix, ExtIndex))
	r.idx.remove(seg.Key(r.prefix, ExtTimeIndex))
	r.cache.forget(logKey)
	r.smu.Lock()
	delete(r.segs, logKey)
	r.smu.Unlock()
	r.missing.mu.Lock()
	delete(r.missing.m, seg.SegmentID)
	r.missing.mu.Unlock()
}

// Follows tells the reader that next comes right after seg in their
// partition, so that read-ahead of a sequential reader reaching the end of
// seg goes on with next's index and first chunks (the reader cannot know
// the order of a partition's segments by itself). Cheap; the broker calls
// it before every remote read that has a following remote segment.
func (r *Reader) Follows(seg, next RemoteSegment) {
	if next.SizeBytes <= 0 || next.BaseOffset <= seg.EndOffset {
		return
	}
	st := r.segState(seg.Key(r.prefix, ExtLog))
	st.mu.Lock()
	if st.next == nil || *st.next != next {
		st.next = &next
	}
	st.mu.Unlock()
}

// Stats returns the reader's counters.
func (r *Reader) Stats() ReaderStats {
	used, chunks, cs := r.cache.snapshot()
	inUse, queued := r.budget.counts()
	return ReaderStats{
		Hits: r.hits.Load(), Misses: r.misses.Load(), CachedBytes: used, CachedChunks: chunks,
		Evictions: cs.evictions, Dropped: cs.dropped, InFlight: inUse, Queued: queued,
		ReadAheadChunks: r.raChunks.Load(), IndexHits: r.idxHits.Load(), IndexMisses: r.idxMisses.Load(),
		GETs: r.gets.Load(), FetchReads: r.fetchReads.Load(),
	}
}

// Read returns whole batches of seg starting with the batch that holds
// offset (the next batch when offset lies in a gap, the segment's first
// when offset is below its base), up to maxBytes, the first batch whole
// even if larger (KIP-74), never past seg.EndOffset. When no batch of the
// segment reaches offset it returns no records with NextOffset =
// seg.EndOffset+1: continue in the next segment.
//
// Errors: ctx's; [ErrOffsetNotInSegment]; [ErrReadQueueFull]; object-store
// errors wrapped (retriable: nothing is cached from a failed GET);
// [ErrCorruptObject] wrapped. With an error no bytes are returned.
func (r *Reader) Read(ctx context.Context, seg RemoteSegment, offset int64, maxBytes int) (RemoteRead, error) {
	start := time.Now()
	if err := r.knownMissing(seg); err != nil {
		r.observe(start, err)
		return RemoteRead{}, err
	}
	rr, err := r.read(ctx, seg, offset, maxBytes)
	err = r.noteRead(seg, err)
	r.observe(start, err)
	if err != nil {
		return RemoteRead{}, err
	}
	r.m.readBytes.Add(float64(len(rr.Records)))
	return rr, nil
}

func (r *Reader) observe(start time.Time, err error) {
	r.m.readSeconds.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		r.m.readsOK.Inc()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		r.m.readsTimeout.Inc()
	default:
		r.m.readsError.Inc()
	}
}

func (r *Reader) read(ctx context.Context, seg RemoteSegment, offset int64, maxBytes int) (RemoteRead, error) {
	if r.isClosed() {
		return RemoteRead{}, ErrReaderClosed
	}
	if seg.EndOffset < seg.BaseOffset || seg.BaseOffset < 0 {
		return RemoteRead{}, fmt.Errorf("tiering: reader: segment %s has offsets [%d, %d]", seg.SegmentID, seg.BaseOffset, seg.EndOffset)
	}
	if offset > seg.EndOffset {
		return RemoteRead{}, fmt.Errorf("%w: offset %d, segment %s holds [%d, %d]", ErrOffsetNotInSegment, offset, seg.SegmentID, seg.BaseOffset, seg.EndOffset)
	}
	offset = max(offset, seg.BaseOffset)
	// A chunk that reads back damaged from the cache looks like a corrupt
	// object: drop the object's cached chunks and try once more from the
	// store before calling the object corrupt.
	for attempt := 0; ; attempt++ {
		rr, err := r.readOnce(ctx, seg, offset, maxBytes)
		if err != nil && errors.Is(err, ErrCorruptObject) && attempt == 0 {
			r.cache.forget(seg.Key(r.prefix, ExtLog))
			continue
		}
		return rr, err
	}
}

func (r *Reader) readOnce(ctx context.Context, seg RemoteSegment, offset int64, maxBytes int) (RemoteRead, error) {
	lr, err := r.openLog(ctx, seg)
	if err != nil {
		return RemoteRead{}, err
	}
	defer lr.noteAccess()
	ix, err := r.index(ctx, seg, ExtIndex, true)
	if err != nil {
		return RemoteRead{}, err
	}
	pos := offsetIndexLookup(ix, seg.BaseOffset, offset, lr.size)

	// Walk headers to the batch holding offset.
	sc := headerScanner{lr: lr}
	var h batch.Header
	for {
		if pos >= lr.size {
			return RemoteRead{FirstOffset: offset, NextOffset: seg.EndOffset + 1}, nil
		}
		if h, err = sc.header(ctx, pos); err != nil {
			return RemoteRead{}, err
		}
		if h.LastOffset() >= offset {
			break
		}
		pos += int64(h.Size())
	}
	// A read from the segment's first batch is where a sequential reader
	// enters a segment: read ahead of it from there.
	lr.fromStart = pos == 0
	if h.LastOffset() > seg.EndOffset {
		return RemoteRead{}, fmt.Errorf("%w: %s: batch [%d, %d] at %d past the segment's end offset %d",
			ErrCorruptObject, lr.key, h.BaseOffset, h.LastOffset(), pos, seg.EndOffset)
	}

	// One read of [first batch, + maxBytes), then keep what is whole.
	want := min(max(int64(maxBytes), int64(h.Size())), lr.size-pos)
	buf := make([]byte, want)
	if err := lr.readAt(ctx, buf, pos); err != nil {
		return RemoteRead{}, err
	}
	rr := RemoteRead{FirstOffset: h.BaseOffset, NextOffset: h.BaseOffset}
	end, prevLast := 0, seg.BaseOffset-1
	for end < len(buf) {
		b, _, err := batch.Split(buf[end:])
		if err != nil {
			if end == 0 {
				return RemoteRead{}, fmt.Errorf("%w: %s at %d: %v", ErrCorruptObject, lr.key, pos, err)
			}
			break // the next batch is cut by maxBytes: not whole, not ours
		}
		bh, err := batch.ParseHeader(b)
		if err != nil {
			return RemoteRead{}, fmt.Errorf("%w: %s at %d: %v", ErrCorruptObject, lr.key, pos+int64(end), err)
		}
		if end > 0 && (end+len(b) > maxBytes || bh.LastOffset() > seg.EndOffset) {
			break
		}
		if bh.BaseOffset <= prevLast || bh.LastOffset() < bh.BaseOffset {
			return RemoteRead{}, fmt.Errorf("%w: %s at %d: batch [%d, %d] after offset %d",
				ErrCorruptObject, lr.key, pos+int64(end), bh.BaseOffset, bh.LastOffset(), prevLast)
		}
		if sum := batch.Checksum(b); sum != bh.CRC {
			return RemoteRead{}, fmt.Errorf("%w: %s at %d: crc32c %08x, batch says %08x",
				ErrCorruptObject, lr.key, pos+int64(end), sum, bh.CRC)
		}
		prevLast = bh.LastOffset()
		rr.NextOffset = prevLast + 1
		end += len(b)
	}
	rr.Records = buf[:end:end]
	return rr, nil
}

// OffsetForTimestamp returns the first offset in seg whose record
// timestamp is >= ts, with that timestamp (Kafka ListOffsets semantics,
// as storage.Log.OffsetForTimestamp): the .timeindex gives where to start,
// batch headers skip to the first batch whose max timestamp is >= ts, and
// its records give the offset. A LogAppendTime batch answers with its
// first offset and its max timestamp. found is false when no record of
// seg qualifies (seg.MaxTimestamp < ts needs no I/O).
func (r *Reader) OffsetForTimestamp(ctx context.Context, seg RemoteSegment, ts int64) (offset, timestamp int64, found bool, err error) {
	start := time.Now()
	if r.isClosed() {
		return 0, 0, false, ErrReaderClosed
	}
	if seg.MaxTimestamp < ts {
		return 0, 0, false, nil
	}
	for attempt := 0; ; attempt++ {
		offset, timestamp, found, err = r.offsetForTimestamp(ctx, seg, ts)
		if err != nil && errors.Is(err, ErrCorruptObject) && attempt == 0 {
			r.cache.forget(seg.Key(r.prefix, ExtLog))
			continue
		}
		break
	}
	r.observe(start, err)
	return offset, timestamp, found, err
}

func (r *Reader) offsetForTimestamp(ctx context.Context, seg RemoteSegment, ts int64) (int64, int64, bool, error) {
	lr, err := r.openLog(ctx, seg)
	if err != nil {
		return 0, 0, false, err
	}
	ti, err := r.index(ctx, seg, ExtTimeIndex, true)
	if err != nil {
		return 0, 0, false, err
	}
	ix, err := r.index(ctx, seg, ExtIndex, true)
	if err != nil {
		return 0, 0, false, err
	}
	from := timeIndexLookup(ti, seg.BaseOffset, ts)
	pos := offsetIndexLookup(ix, seg.BaseOffset, from, lr.size)
	sc := headerScanner{lr: lr}
	for pos < lr.size {
		h, err := sc.header(ctx, pos)
		if err != nil {
			return 0, 0, false, err
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= seg.BaseOffset {
			if h.TimestampType() == batch.LogAppendTime {
				return max(h.BaseOffset, seg.BaseOffset), h.MaxTimestamp, true, nil
			}
			b := make([]byte, h.Size())
			if err := lr.readAt(ctx, b, pos); err != nil {
				return 0, 0, false, err
			}
			if sum := batch.Checksum(b); sum != h.CRC {
				return 0, 0, false, fmt.Errorf("%w: %s at %d: crc32c %08x, batch says %08x", ErrCorruptObject, lr.key, pos, sum, h.CRC)
			}
			off, rts := int64(-1), int64(-1)
			err := batch.Records(b, func(rec batch.Record) error {
				o := h.BaseOffset + int64(rec.OffsetDelta)
				t := h.FirstTimestamp + rec.TimestampDelta
				if off < 0 && o >= seg.BaseOffset && t >= ts {
					off, rts = o, t
				}
				return nil
			})
			if err != nil {
				return 0, 0, false, fmt.Errorf("%w: %s at %d: %v", ErrCorruptObject, lr.key, pos, err)
			}
			if off < 0 {
				// The header's max timestamp says a record qualifies:
				// trust it, as storage does.
				return max(h.BaseOffset, seg.BaseOffset), h.MaxTimestamp, true, nil
			}
			return off, rts, true, nil
		}
		pos += int64(h.Size())
	}
	return 0, 0, false, nil
}

// logReader reads one segment's .log object through the chunk cache and
// remembers which chunks a foreground read touched (for read-ahead).
type logReader struct {
	r      *Reader
	key    string
	size   int64
	st     *segState
	lo, hi int64 // chunks touched; lo > hi: none
	// fromStart: the read began at the segment's first batch.
	fromStart bool
}

func (r *Reader) openLog(ctx context.Context, seg RemoteSegment) (*logReader, error) {
	key := seg.Key(r.prefix, ExtLog)
	st := r.segState(key)
	st.mu.Lock()
	size := st.size
	st.mu.Unlock()
	if size <= 0 {
		size = seg.SizeBytes
		if size <= 0 {
			info, err := r.store.Head(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("tiering: reader: head %s: %w", key, err)
			}
			size = info.Size
		}
		st.mu.Lock()
		st.size = size
		st.mu.Unlock()
	}
	return &logReader{r: r, key: key, size: size, st: st, lo: 1, hi: 0}, nil
}

func (r *Reader) segState(key string) *segState {
	r.smu.Lock()
	defer r.smu.Unlock()
	st := r.segs[key]
	if st == nil {
		if len(r.segs) >= maxSegStates {
			for k := range r.segs {
				delete(r.segs, k)
				break
			}
		}
		st = &segState{lastChunk: -1, raUpTo: -1}
		r.segs[key] = st
	}
	return st
}

// readAt fills p with the .log's bytes at off, chunk by chunk.
func (lr *logReader) readAt(ctx context.Context, p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > lr.size {
		return fmt.Errorf("%w: %s: read [%d, %d) past its %d bytes", ErrCorruptObject, lr.key, off, off+int64(len(p)), lr.size)
	}
	cb := lr.r.chunkBytes
	for len(p) > 0 {
		c := off / cb
		in := off - c*cb
		n := min(int64(len(p)), cb-in)
		// A logical read touches a contiguous run of chunks: count each
		// once in the hit/miss figures, however many headers it reads.
		counted := lr.lo <= c && c <= lr.hi
		if err := lr.r.readChunk(ctx, lr.key, lr.size, c, p[:n], in, !counted); err != nil {
			return err
		}
		if lr.lo > lr.hi {
			lr.lo, lr.hi = c, c
		} else {
			lr.lo, lr.hi = min(lr.lo, c), max(lr.hi, c)
		}
		p, off = p[n:], off+n
	}
	return nil
}

// noteAccess updates the segment's read-ahead state after a foreground
// read: a read that moved forward from the last chunk into the next one,
// or that began at the segment's first batch, is sequential, and the
// ReadAheadChunks chunks after the last one it touched are prefetched
// (those not already issued), going on into the following segment when
// [Reader.Follows] named it.
func (lr *logReader) noteAccess() {
	r := lr.r
	if lr.lo > lr.hi {
		return
	}
	st := lr.st
	st.mu.Lock()
	last := st.lastChunk
	st.lastChunk = lr.hi
	sequential := last >= 0 && lr.hi > last && lr.lo <= last+1 && lr.lo >= last ||
		lr.fromStart && lr.lo == 0
	nchunks := (lr.size + r.chunkBytes - 1) / r.chunkBytes
	var from, to int64
	var next *RemoteSegment
	if lr.fromStart && lr.lo == 0 {
		// A reader (re)starting at the segment's beginning: what was
		// issued for an earlier pass says nothing of what is cached now.
		st.raUpTo = -1
	}
	if sequential && r.readAhead > 0 {
		from = max(lr.hi+1, st.raUpTo+1)
		to = lr.hi + int64(r.readAhead)
		st.raUpTo = max(st.raUpTo, to)
		next = st.next
	} else if !sequential {
		st.raUpTo = -1
	}
	st.mu.Unlock()
	if !sequential {
		return
	}
	for c := from; c <= min(to, nchunks-1); c++ {
		r.prefetch(lr.key, lr.size, c)
	}
	if to >= nchunks && next != nil {
		// Past the end: the next segment's index, then its first chunks.
		r.prefetchIndex(*next)
		nkey := next.Key(r.prefix, ExtLog)
		nn := (next.SizeBytes + r.chunkBytes - 1) / r.chunkBytes
		for c := max(from-nchunks, 0); c <= min(to-nchunks, nn-1); c++ {
			r.prefetch(nkey, next.SizeBytes, c)
		}
	}
}

// prefetchIndex fetches seg's .index in the background, at read-ahead
// priority, unless it is cached or being fetched.
func (r *Reader) prefetchIndex(seg RemoteSegment) {
	key := seg.Key(r.prefix, ExtIndex)
	if r.idx.has(key) || r.raPending.Load() >= r.maxRA || !r.budget.bgRoom() {
		return
	}
	r.fmu.Lock()
	busy := r.idxFlights[key] != nil
	r.fmu.Unlock()
	if busy {
		return
	}
	r.background(func() {
		r.raPending.Add(1)
		defer r.raPending.Add(-1)
		_, _ = r.index(r.ctx, seg, ExtIndex, false)
	})
}

// background runs fn on a goroutine Close waits for; false (fn not run)
// once the reader is closed.
func (r *Reader) background(fn func()) bool {
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fn()
	}()
	return true
}

// prefetch starts a background GET of chunk c unless it is cached, in
// flight, or the read-ahead budget is spent (then it is skipped, never
// queued without bound).
func (r *Reader) prefetch(key string, size, c int64) {
	k := chunkKey{key, c}
	if r.cache.contains(k) || r.raPending.Load() >= r.maxRA || !r.budget.bgRoom() {
		return
	}
	r.closeMu.RLock()
	defer r.closeMu.RUnlock()
	if r.closed {
		return
	}
	r.fmu.Lock()
	if r.chunkFlights[k] != nil || r.cache.contains(k) {
		// Checked again under fmu: a flight leaves the table only after
		// its chunk is cached, so no second GET starts for it.
		r.fmu.Unlock()
		return
	}
	f := &chunkFlight{done: make(chan struct{}), bg: true}
	r.chunkFlights[k] = f
	r.fmu.Unlock()
	r.raPending.Add(1)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.raPending.Add(-1)
		if r.runChunkFlight(r.ctx, f, k, size, true) == nil {
			r.raChunks.Add(1)
			r.m.readAhead.Inc()
		}
	}()
}

// readChunk copies bytes [in, in+len(dst)) of chunk c of object key into
// dst: from the cache file, else from the chunk's flight (joined, or led
// by this caller). A cache file that fails to read back is dropped and
// the chunk fetched again.
func (r *Reader) readChunk(ctx context.Context, key string, size, c int64, dst []byte, in int64, count bool) error {
	k := chunkKey{key, c}
	counted := !count
	for {
		if e, mem := r.cache.lookup(k); e != nil {
			var err error
			if mem != nil {
				if in+int64(len(dst)) > int64(len(mem)) {
					err = fmt.Errorf("chunk holds %d bytes, read wants [%d, %d)", len(mem), in, in+int64(len(dst)))
				} else {
					copy(dst, mem[in:])
				}
			} else {
				err = readFileAt(e.path, dst, in)
			}
			r.cache.unpin(e)
			if err == nil {
				if !counted {
					r.hits.Add(1)
					r.m.cacheHits.Inc()
				}
				return nil
			}
			r.log.Warn("tiering: remote cache file unreadable, refetching", "object", key, "chunk", c, "err", err)
			r.cache.drop(e)
		}
		if !counted {
			counted = true
			r.misses.Add(1)
			r.m.cacheMisses.Inc()
		}
		r.fmu.Lock()
		f, joined := r.chunkFlights[k]
		if !joined && r.cache.contains(k) {
			// Its flight ended (and cached it) since our lookup: a
			// flight leaves the table only after its chunk is cached.
			r.fmu.Unlock()
			continue
		}
		if !joined {
			f = &chunkFlight{done: make(chan struct{})}
			r.chunkFlights[k] = f
		} else {
			r.budget.promote(&f.ticket) // a fetch waits for it now
		}
		r.fmu.Unlock()
		if !joined {
			_ = r.runChunkFlight(ctx, f, k, size, false)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if f.err != nil {
			if joined && ctx.Err() == nil && retryJoined(f.err, f.bg) {
				continue // its leader gave up, or was refused as read-ahead
			}
			return f.err
		}
		if in+int64(len(dst)) > int64(len(f.data)) {
			return fmt.Errorf("%w: %s chunk %d holds %d bytes", ErrCorruptObject, key, c, len(f.data))
		}
		copy(dst, f.data[in:])
		return nil
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// runChunkFlight leads flight f: it waits for the budget and GETs the
// chunk, caches it (readable at once from its buffer, see cache.go),
// leaves the flight table and publishes the bytes to the flight's
// waiters. A flight leaves the table only once its chunk is cached (or
// refused by the cache), so no second GET of the chunk starts meanwhile;
// a failed flight leaves it before it is published, so a retry starts
// afresh. The chunk's file is then written holding the GET's budget slot
// (writes are bounded like GETs): on the caller's goroutine for
// read-ahead, on a background one for a fetch, which has its bytes
// already and must not wait for the disk.
func (r *Reader) runChunkFlight(ctx context.Context, f *chunkFlight, k chunkKey, size int64, readAhead bool) error {
	data, release, err := r.fetchChunk(ctx, f, k, size, readAhead)
	if err != nil {
		r.fmu.Lock()
		delete(r.chunkFlights, k)
		r.fmu.Unlock()
		f.err = err
		close(f.done)
		return err
	}
	e := r.cache.reserve(k, data, readAhead)
	r.fmu.Lock()
	delete(r.chunkFlights, k)
	r.fmu.Unlock()
	f.data = data
	close(f.done)
	if e == nil {
		release()
		return nil
	}
	write := func() {
		defer release()
		if err := writeChunkFile(e.path, data); err != nil {
			r.log.Warn("tiering: remote cache write failed", "object", k.obj, "chunk", k.idx, "err", err)
			r.cache.drop(e)
		} else {
			r.cache.written(e)
		}
		r.cache.unpin(e)
	}
	if readAhead || !r.background(write) {
		write()
	}
	return nil
}

// fetchChunk GETs chunk k.idx of an object of size bytes under the
// budget. On success the caller holds the GET's slot until it calls
// release.
func (r *Reader) fetchChunk(ctx context.Context, f *chunkFlight, k chunkKey, size int64, readAhead bool) ([]byte, func(), error) {
	off := k.idx * r.chunkBytes
	n := min(r.chunkBytes, size-off)
	if n <= 0 {
		return nil, nil, fmt.Errorf("%w: %s: chunk %d past its %d bytes", ErrCorruptObject, k.obj, k.idx, size)
	}
	release, err := r.acquireBudget(ctx, &f.ticket, !readAhead, n)
	if err != nil {
		return nil, nil, err
	}
	rc, err := r.store.Get(ctx, k.obj, off, n)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("tiering: reader: get %s [%d, +%d): %w", k.obj, off, n, err)
	}
	defer rc.Close()
	buf := make([]byte, n)
	if _, err := io.ReadFull(rc, buf); err != nil {
		release()
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("%w: %s: chunk %d shorter than %d bytes", ErrCorruptObject, k.obj, k.idx, n)
		}
		return nil, nil, fmt.Errorf("tiering: reader: get %s [%d, +%d): %w", k.obj, off, n, err)
	}
	return buf, release, nil
}

// acquireBudget takes a thread and n bytes of rate budget, records the
// wait and counts the GET the caller is about to make; the caller calls
// release once.
func (r *Reader) acquireBudget(ctx context.Context, t *readTicket, fg bool, n int64) (release func(), err error) {
	start := time.Now()
	if err := r.budget.acquire(ctx, t, fg); err != nil {
		return nil, err
	}
	if r.budget.bucket != nil && n > 0 {
		if err := r.budget.bucket.wait(ctx, n); err != nil {
			r.budget.release()
			return nil, err
		}
	}
	r.m.queueWait.Observe(time.Since(start).Seconds())
	r.gets.Add(1)
	return sync.OnceFunc(r.budget.release), nil
}

// withBudget runs get holding a thread and n bytes of rate budget.
func (r *Reader) withBudget(ctx context.Context, t *readTicket, fg bool, n int64, get func() error) error {
	release, err := r.acquireBudget(ctx, t, fg, n)
	if err != nil {
		return err
	}
	defer release()
	return get()
}

// index returns the bytes of seg's index object ext (ExtIndex or
// ExtTimeIndex): from the index cache, else one shared GET. A missing or
// malformed index is no error: the log is the source of truth, and nil
// makes the scan start at the segment's first batch.
func (r *Reader) index(ctx context.Context, seg RemoteSegment, ext string, fg bool) ([]byte, error) {
	key := seg.Key(r.prefix, ext)
	if b, ok := r.idx.get(key); ok {
		if fg {
			r.idxHits.Add(1)
			r.m.indexHits.Inc()
		}
		return b, nil
	}
	if fg {
		r.idxMisses.Add(1)
		r.m.indexMisses.Inc()
	}
	for {
		r.fmu.Lock()
		f, joined := r.idxFlights[key]
		if !joined {
			f = &idxFlight{done: make(chan struct{}), bg: !fg}
			r.idxFlights[key] = f
		} else if fg {
			r.budget.promote(&f.ticket) // a fetch waits for it now
		}
		r.fmu.Unlock()
		if !joined {
			f.data, f.err = r.fetchIndex(ctx, &f.ticket, key, ext, fg)
			if f.err == nil {
				r.idx.put(key, f.data)
			}
			r.fmu.Lock()
			delete(r.idxFlights, key)
			r.fmu.Unlock()
			close(f.done)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil && joined && ctx.Err() == nil && retryJoined(f.err, f.bg) {
			continue
		}
		return f.data, f.err
	}
}

func (r *Reader) fetchIndex(ctx context.Context, t *readTicket, key, ext string, fg bool) ([]byte, error) {
	var data []byte
	err := r.withBudget(ctx, t, fg, 0, func() error {
		rc, err := r.store.Get(ctx, key, 0, -1)
		if errors.Is(err, objstore.ErrNotFound) {
			r.log.Warn("tiering: remote segment index missing, scanning from the segment start", "object", key)
			data = []byte{}
			return nil
		}
		if err != nil {
			return fmt.Errorf("tiering: reader: get %s: %w", key, err)
		}
		defer rc.Close()
		data, err = io.ReadAll(io.LimitReader(rc, maxIndexObject+1))
		if err != nil {
			return fmt.Errorf("tiering: reader: get %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r.budget.bucket != nil {
		// Charged after the fact: the size is known only now.
		if err := r.budget.bucket.wait(ctx, int64(len(data))); err != nil {
			return nil, err
		}
	}
	entry := 8
	if ext == ExtTimeIndex {
		entry = 12
	}
	if len(data) > maxIndexObject || len(data)%entry != 0 {
		r.log.Warn("tiering: remote segment index malformed, scanning from the segment start", "object", key, "bytes", len(data))
		data = []byte{}
	}
	return data, nil
}

// readFileAt reads len(p) bytes of the file at path from off.
func readFileAt(path string, p []byte, off int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// writeChunkFile creates path (it must not exist) holding data. No fsync:
// the cache is wiped at start, so a torn file is never read.
func writeChunkFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
