package tiering

// The remote reader: fetches and timestamp lookups below a partition's
// local log start, served from the segment objects the uploader wrote.
//
// Files:
//
//	reader.go           Reader: config, Read, OffsetForTimestamp, Forget, Follows, Stats
//	reader_view.go      ReadView: Read without the copy (pinned cache pieces, sendfile)
//	reader_segment.go   one segment's .log read chunk by chunk; per-segment state
//	reader_readahead.go read-ahead: sequential detection, background prefetches
//	readahead_policy.go the read-ahead depth decision (pure)
//	reader_flight.go    chunk and index flights (GETs shared per chunk, per index)
//	                    under the budget; the chunk cache's file I/O
//	reader_fetch.go     Reader.Fetch: a consumer fetch's read, coalesced and waited for
//	reader_index.go    lookups in fetched .index/.timeindex bytes, the batch scanner
//	reader_metrics.go  Prometheus metrics (names in api.go)
//	cache.go           the on-disk chunk cache (2Q eviction; why there)
//	cache_index.go     the in-memory index cache (LRU)
//	budget.go          Threads slots, priority queue, byte-rate token bucket
//	budget_share.go    the fair share: GET bytes capped while producers suffer
//
// A read, in order: the segment's .index (index cache, else one GET) gives
// the greatest entry at or below the offset (no index for a read at the
// segment's first offset, or at the offset where its last read ended:
// those start at a known position); from its position the reader
// walks batch headers to the batch holding the offset; it then reads
// [that batch, + maxBytes) chunk by chunk (chunk cache, else one ranged
// GET per chunk, shared by every concurrent reader of it), keeps the whole
// batches that fit (the first always, KIP-74) and checks each one's CRC
// before returning it. Moving forward into the next chunk of a segment
// marks the reader sequential: the next chunks (ReadAheadChunks at first,
// then as deep as readAheadDepth decides) are fetched in the background,
// at background priority.
//
// Lock order: Reader.closeMu → Reader.fmu; Reader.smu and segState.mu are
// leaves; chunkCache.mu, indexCache.mu and readBudget.mu are leaves taken
// without any other held (fmu excepted: joining a flight may promote its
// ticket under fmu).
import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
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
	// chunks are prefetched ahead of a sequential reader at first, and
	// the least: the window then adapts to the reader (readahead_policy.go),
	// up to min(2×Threads, half the cache's chunks); < 0 disables
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
	// Next, when set, returns the remote segment right after seg in its
	// partition (ok false: none, or none worth reading ahead: the local
	// log has it). Read-ahead asks it when its window runs past the end
	// of a segment whose successor [Reader.Follows] did not name: a
	// window over segments smaller than itself spans several. It is
	// called with none of the reader's locks held.
	Next       func(seg RemoteSegment) (RemoteSegment, bool)
	Registerer prometheus.Registerer // may be nil
	Logger     *slog.Logger          // nil: discard
}

// Defaults of [ReaderConfig].
const (
	DefaultRemoteCacheBytes      = 1 << 30
	DefaultRemoteChunkBytes      = 4 << 20
	DefaultRemoteIndexCacheBytes = 64 << 20
	DefaultRemoteReaderThreads   = 8
	DefaultRemoteReadAheadChunks = 2
)

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
	// ShareRate is the fair share's cap on GET bytes per second now
	// (budget_share.go); 0: none.
	ShareRate float64
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
	readAhead  int   // the initial and least read-ahead depth, chunks (0: off)
	raMax      int   // the greatest depth the policy may choose
	maxRA      int64 // read-ahead GETs in the air node-wide
	raHold     int   // read-ahead chunks cached unread or in the air, node-wide
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
	nextSeg      func(RemoteSegment) (RemoteSegment, bool) // ReaderConfig.Next
	bufs         sync.Pool                                 // *[]byte of chunkBytes: GET buffers the cache gave back

	smu  sync.Mutex // guards segs
	segs map[string]*segState

	missing missingSet // segments reads found objects of missing

	getNanos                 atomic.Int64 // chunk GET latency, EWMA (readahead depth)
	shareState                            // budget_share.go
	shareOnce                sync.Once
	raPending                atomic.Int64
	hits, misses, raChunks   atomic.Int64
	idxHits, idxMisses, gets atomic.Int64
	fetchReads               atomic.Int64
}

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
	// a sequential reader's chunk and its deepest read-ahead (views check
	// CRCs over the buffers); never more than the disk cache holds.
	memMax := int(min(int64(max(2*cfg.Threads, raMax(cfg)+2)), cfg.CacheBytes/cfg.ChunkBytes))
	cache, err := openChunkCache(cfg.CacheDir, cfg.CacheBytes, cfg.ChunkBytes, memMax)
	if err != nil {
		return nil, err
	}
	cache.onBytes = func(d int64) { m.cacheBytes.Add(float64(d)) }
	cache.onEvict = m.cacheEvictions.Inc
	cache.onWasted = m.raWasted.Inc
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reader{
		store: cfg.Store, prefix: cfg.Prefix, chunkBytes: cfg.ChunkBytes,
		readAhead: max(cfg.ReadAheadChunks, 0), maxRA: int64(2 * cfg.Threads),
		raMax: raMax(cfg), raHold: max(cfg.ReadAheadChunks, int(cfg.CacheBytes/cfg.ChunkBytes/4)),
		cache: cache, idx: newIndexCache(cfg.IndexCacheBytes),
		budget: newReadBudget(cfg.Threads, cfg.MaxQueuedReads, cfg.Threads, cfg.MaxBytesPerSecond),
		m:      m, log: cfg.Logger, ctx: ctx, cancel: cancel,
		chunkFlights: map[chunkKey]*chunkFlight{}, idxFlights: map[string]*idxFlight{},
		fetchFlights: map[fetchKey]*fetchFlight{}, fetchTimeout: cfg.FetchTimeout,
		nextSeg:    cfg.Next,
		segs:       map[string]*segState{},
		shareState: shareState{share: newTokenBucket(1, time.Now)},
	}
	cache.recycle = r.recycleBuf
	return r, nil
}

// raMax is the deepest read-ahead window: deep enough to keep every
// thread busy for one reader, and never more than half the cache's chunks
// (the windows must not evict each other's chunks before they are read).
func raMax(cfg ReaderConfig) int {
	return max(cfg.ReadAheadChunks, min(2*cfg.Threads, int(cfg.CacheBytes/cfg.ChunkBytes/2)))
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
	r.idx.remove(seg.Key(r.prefix, ExtTxnIndex))
	r.idx.remove(seg.Key(r.prefix, ExtMeta))
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
		ShareRate: math.Float64frombits(r.shareBits.Load()),
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
	if err := r.checkRead(seg, offset); err != nil {
		return RemoteRead{}, err
	}
	offset = max(offset, seg.BaseOffset)
	// A chunk that reads back damaged from the cache looks like a corrupt
	// object: drop the object's cached chunks and try once more from the
	// store before calling the object corrupt.
	for attempt := 0; ; attempt++ {
		rr, err := r.readOnce(ctx, seg, offset, maxBytes)
		if err != nil && errors.Is(err, ErrCorruptObject) && attempt == 0 {
			r.forgetCached(seg)
			continue
		}
		return rr, err
	}
}

// checkRead returns the error a read of seg at offset fails with before
// any I/O.
func (r *Reader) checkRead(seg RemoteSegment, offset int64) error {
	if r.isClosed() {
		return ErrReaderClosed
	}
	if seg.EndOffset < seg.BaseOffset || seg.BaseOffset < 0 {
		return fmt.Errorf("tiering: reader: segment %s has offsets [%d, %d]", seg.SegmentID, seg.BaseOffset, seg.EndOffset)
	}
	if offset > seg.EndOffset {
		return fmt.Errorf("%w: offset %d, segment %s holds [%d, %d]", ErrOffsetNotInSegment, offset, seg.SegmentID, seg.BaseOffset, seg.EndOffset)
	}
	return nil
}

// forgetCached drops seg's cached chunks and what was checked of them.
func (r *Reader) forgetCached(seg RemoteSegment) {
	key := seg.Key(r.prefix, ExtLog)
	r.cache.forget(key)
	st := r.segState(key)
	st.mu.Lock()
	st.okFrom, st.okTo = 0, 0
	st.mu.Unlock()
}

// seek finds the batch holding offset (the segment's .index, then a walk
// of batch headers): its position and header; found is false when no
// batch of the segment reaches offset.
func (r *Reader) seek(ctx context.Context, lr *logReader, seg RemoteSegment, offset int64) (pos int64, h batch.Header, found bool, err error) {
	// Neither the segment's first batch nor where the last read of it
	// ended needs the index: a sequential reader (entering the segment
	// from the one before, or going on from its last fetch) waits for no
	// GET of it and walks no headers.
	if at, ok := lr.st.resumeAt(offset); ok {
		pos = at
	} else if offset > seg.BaseOffset {
		ix, err := r.index(ctx, seg, ExtIndex, true)
		if err != nil {
			return 0, h, false, err
		}
		pos = offsetIndexLookup(ix, seg.BaseOffset, offset, lr.size)
	}
	sc := headerScanner{lr: lr}
	defer sc.free()
	for {
		if pos >= lr.size {
			return pos, h, false, nil
		}
		if h, err = sc.header(ctx, pos); err != nil {
			return 0, h, false, err
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
		return 0, h, false, fmt.Errorf("%w: %s: batch [%d, %d] at %d past the segment's end offset %d",
			ErrCorruptObject, lr.key, h.BaseOffset, h.LastOffset(), pos, seg.EndOffset)
	}
	return pos, h, true, nil
}

func (r *Reader) readOnce(ctx context.Context, seg RemoteSegment, offset int64, maxBytes int) (RemoteRead, error) {
	lr, err := r.openLog(ctx, seg)
	if err != nil {
		return RemoteRead{}, err
	}
	defer lr.noteAccess()
	pos, h, found, err := r.seek(ctx, lr, seg, offset)
	if err != nil {
		return RemoteRead{}, err
	}
	if !found {
		return RemoteRead{FirstOffset: offset, NextOffset: seg.EndOffset + 1}, nil
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
	lr.st.noteResume(rr.NextOffset, pos+int64(end))
	return rr, nil
}

// txnIndexEntry is the size of one .txnindex entry (storage/txnindex.go:
// version, producer id, first offset, last offset, last stable offset).
const txnIndexEntry = 34

// AbortedTxns returns the entries of seg's aborted-transaction index
// (.txnindex, byte-identical to the local file), oldest marker first:
// what a read_committed fetch of seg's records lists (the broker filters
// them by range, as storage.Log.AbortedTxns does). The object is fetched
// once and kept in the index cache; a segment uploaded without one has
// none.
func (r *Reader) AbortedTxns(ctx context.Context, seg RemoteSegment) ([]storage.AbortedTxn, error) {
	if r.isClosed() {
		return nil, ErrReaderClosed
	}
	b, err := r.index(ctx, seg, ExtTxnIndex, true)
	if err != nil {
		return nil, err
	}
	out, err := storage.DecodeTxnIndex(b)
	if err != nil {
		return nil, fmt.Errorf("tiering: reader: %s: %w", seg.Key(r.prefix, ExtTxnIndex), err)
	}
	return out, nil
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
			r.forgetCached(seg)
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
	defer sc.free()
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
