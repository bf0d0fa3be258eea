package storage

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/index"
	"github.com/strata-io/strata/storage/vfs"
)

// Log compaction (cleanup.policy=compact), as Kafka's LogCleaner.
//
// One cleaning of a log covers its cleanable section: the sealed segments
// below the active one, stopping at the first whose newest record is
// younger than min.compaction.lag.ms or that reaches the last stable
// offset (open transactions and the high watermark; see txnCleaner for
// what transactions change). The part from the first dirty offset
// (what the last cleaning had not seen, kept in cleaner-offset-checkpoint)
// to the end of that section is dirty:
//
//	 segs[0]                 firstDirty                 end      active
//	 |---- clean (cleaned before) ----|---- dirty ----|-uncleanable-|------|
//	 |<------------- rewritten, one group of segments at a time ->|
//
// Pass 1 reads the dirty segments and builds the offset map: hash(key) ->
// offset of the key's newest record (keyed by a 64-bit hash, like Kafka's
// SkimpyOffsetMap with MD5; its size is bounded by
// log.cleaner.dedupe.buffer.size: when the next segment may not fit, the
// section ends before it and the rest waits for the next cleaning).
//
// Pass 2 rewrites every segment from segs[0] to the end of the mapped
// section, in groups whose total size fits segment.bytes, into one
// <base>.log.cleaned per group (base = the group's first base, so segments
// still tile the offsets). A record is kept iff no newer record of its key
// is in the map, and, when it is a tombstone (null value), its timestamp is
// no older than delete.retention.ms. A batch keeps its header (offsets,
// producer id/epoch/sequence: see batch.Builder); it is copied byte for byte
// when every record survives, re-encoded with its codec when some do, and
// kept with no records when none do but it is the newest batch of its
// producer (the broker rebuilds producer state from it) or the last batch of
// the group (so the cleaned segment ends where the group ended, which the
// recovery of an interrupted swap relies on). Control batches are kept as
// they are.
//
// The swap, under the log's lock, crash-safe at every step (the order of
// Kafka's replaceSegments):
//
//  1. <base>.{log,index,timeindex}.cleaned are written and fsynced (before
//     the lock: appends continue meanwhile);
//  2. the cleaned indexes, then the log, are renamed to .swap; dir fsync;
//  3. the group's old segment files are renamed to .deleted;
//  4. the .swap indexes, then the log, are renamed to their live names;
//     dir fsync; the new segment list is published.
//
// Recovery (completeSwaps, called by cleanLeftovers): a <base>.log.swap
// means step 2 finished, so the cleaned data is whole and durable: every
// live segment whose base lies in [base, last offset of the swap] is
// removed and the swap files take the live names. Without a .log.swap the
// swap never started: .cleaned and index .swap files are removed as
// leftovers and the old segments stay. Old segments' readers keep their
// files (refcount) until they release them.

// offsetMap maps a key's hash to the offset of its newest record.
type offsetMap struct {
	seed maphash.Seed
	m    map[uint64]int64
	cap  int
}

// offsetMapEntryBytes is what one entry costs in Kafka's accounting (a
// 16-byte hash and an 8-byte offset), so a dedupe buffer holds as many
// keys here as there.
const offsetMapEntryBytes = 24

func newOffsetMap(bufferBytes int64) *offsetMap {
	n := int(max(bufferBytes/offsetMapEntryBytes, 1024))
	return &offsetMap{seed: maphash.MakeSeed(), m: make(map[uint64]int64), cap: n}
}

func (om *offsetMap) put(key []byte, off int64) { om.m[maphash.Bytes(om.seed, key)] = off }

func (om *offsetMap) get(key []byte) (int64, bool) {
	o, ok := om.m[maphash.Bytes(om.seed, key)]
	return o, ok
}

// throttler limits the cleaner's I/O to a rate in bytes per second
// (log.cleaner.io.max.bytes.per.second), like Kafka's Throttler: it counts
// bytes over a period and sleeps when the observed rate is above the limit.
type throttler struct {
	rate  float64 // bytes per second; <= 0 or +Inf: unlimited
	mu    sync.Mutex
	start time.Time
	bytes float64
}

func newThrottler(rate float64) *throttler { return &throttler{rate: rate, start: time.Now()} }

// wait accounts n bytes and sleeps as long as needed to stay at the rate;
// it returns false if stop closed meanwhile.
func (t *throttler) wait(n int, stop <-chan struct{}) bool {
	if t == nil || t.rate <= 0 || math.IsInf(t.rate, 1) || t.rate >= math.MaxFloat64 {
		return true
	}
	t.mu.Lock()
	t.bytes += float64(n)
	elapsed := time.Since(t.start)
	need := time.Duration(t.bytes / t.rate * float64(time.Second))
	sleep := need - elapsed
	if elapsed > time.Second && sleep <= 0 {
		t.start, t.bytes = time.Now(), 0
	}
	t.mu.Unlock()
	if sleep <= 0 {
		return true
	}
	tm := time.NewTimer(sleep)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-stop:
		return false
	}
}

// cleanParams is what one cleaning needs from the cleaner.
type cleanParams struct {
	firstDirty  int64
	now         time.Time
	dedupeBytes int64
	throttle    *throttler
	stop        <-chan struct{}
	// expireTombstones rewrites the cleanable section even when nothing
	// is dirty, to drop tombstones that outlived delete.retention.ms.
	expireTombstones bool
}

// cleanResult is what one cleaning did.
type cleanResult struct {
	firstDirty   int64 // the next cleaning starts here
	bytesRead    int64
	bytesWritten int64
	groups       int
	dirtyRatio   float64 // before the cleaning
	// tombstoneExpiry is when the earliest tombstone kept by this
	// cleaning passes delete.retention.ms (ms; math.MaxInt64: none kept).
	tombstoneExpiry int64
}

// errCleanAborted is returned when the log changed under the cleaner
// (retention, truncation, close) or the cleaner was stopped: nothing was
// swapped in, the next cleaning starts over.
var errCleanAborted = errors.New("storage: cleaning aborted")

// cleanableSection returns the sealed segments the cleaner may touch
// (below the active one and min.compaction.lag.ms) and the index of the
// first dirty one; dirty < len(section) iff there is work.
func (l *Log) cleanableSection(firstDirty int64, now time.Time) (section []*segment, dirty int) {
	segs := l.segments()
	cfg := l.cfg.Load()
	end := len(segs) - 1
	lso := l.LastStableOffset()
	for i := 0; i < end; i++ {
		ts, _ := segs[i].maxTimestamp()
		if cfg.MinCompactionLagMs > 0 && ts > now.UnixMilli()-cfg.MinCompactionLagMs {
			end = i
			break
		}
		// Never past the last stable offset, as Kafka's
		// LogCleanerManager.cleanableOffsets ("and therefore, the high
		// watermark"): an open transaction's outcome decides what its
		// records are, and a record above the high watermark may still be
		// truncated away, so it must not supersede a committed one (the
		// transaction property test lost a key that way).
		if segs[i].next.Load() > lso {
			end = i
			break
		}
	}
	section = segs[:end]
	dirty = len(section)
	for i, s := range section {
		if s.next.Load() > firstDirty {
			dirty = i
			break
		}
	}
	return section, dirty
}

// dirtyRatio returns dirty bytes / cleanable bytes of the log for the
// given first dirty offset, and whether a dirty segment is older than
// max.compaction.lag.ms (it must be cleaned whatever the ratio).
func (l *Log) dirtyRatio(firstDirty int64, now time.Time) (ratio float64, overdue bool) {
	section, dirty := l.cleanableSection(firstDirty, now)
	var clean, dirtyBytes int64
	cfg := l.cfg.Load()
	for i, s := range section {
		if i < dirty {
			clean += s.size.Load()
			continue
		}
		dirtyBytes += s.size.Load()
		ts, _ := s.maxTimestamp()
		if cfg.MaxCompactionLagMs != math.MaxInt64 && ts >= 0 && ts < now.UnixMilli()-cfg.MaxCompactionLagMs {
			overdue = true
		}
	}
	if clean+dirtyBytes == 0 {
		return 0, false
	}
	return float64(dirtyBytes) / float64(clean+dirtyBytes), overdue
}

// clean compacts the log once (see the comment at the top of this file).
// It returns errCleanAborted when the log changed meanwhile. A failure of
// the swap itself latches the log (ErrLogFailed); a failure while writing
// the cleaned files only removes them.
func (l *Log) clean(p cleanParams) (res cleanResult, err error) {
	res.firstDirty = p.firstDirty
	res.tombstoneExpiry = math.MaxInt64
	res.dirtyRatio, _ = l.dirtyRatio(p.firstDirty, p.now)
	section, dirty := l.cleanableSection(p.firstDirty, p.now)
	if dirty >= len(section) && (!p.expireTombstones || len(section) == 0) {
		return res, nil
	}
	for i, s := range section {
		if err := s.acquire(); err != nil {
			for _, r := range section[:i] {
				r.release()
			}
			if errors.Is(err, errSegmentClosed) {
				return res, errCleanAborted
			}
			return res, err
		}
	}
	defer func() {
		for _, s := range section {
			s.release()
		}
	}()
	cfg := *l.cfg.Load()

	// Pass 1: the offset map over the dirty segments, and each producer's
	// newest batch.
	om := newOffsetMap(p.dedupeBytes)
	producers := map[int64]int64{}
	mapped := dirty
	var buf []byte
	// Aborted records never enter the map: they are dropped, and must not
	// supersede a committed record of their key (Kafka skips them too).
	var mapTxns *txnCleaner
	if dirty < len(section) {
		mapTxns = newTxnCleaner(l.AbortedTxns(section[dirty].base, section[len(section)-1].next.Load()), 0)
	}
	for i := dirty; i < len(section); i++ {
		s := section[i]
		if i > dirty && len(om.m)+int(s.next.Load()-s.base) > om.cap {
			break // the next segment might not fit: clean what is mapped
		}
		err := forEachBatch(s, &buf, p, &res.bytesRead, func(h batch.Header, b []byte) error {
			if h.HasProducerID() {
				producers[h.ProducerID] = h.BaseOffset
			}
			mapTxns.reach(h)
			if h.Control() {
				_, err := mapTxns.control(h, b, true)
				return err
			}
			if h.NumRecords == 0 || mapTxns.abortedData(h) {
				return nil
			}
			return batch.Records(b, func(r batch.Record) error {
				if !r.KeyNull {
					om.put(r.Key, h.BaseOffset+int64(r.OffsetDelta))
				}
				return nil
			})
		})
		if err != nil {
			return res, err
		}
		mapped = i + 1
	}
	if mapped == 0 {
		mapped = len(section) // only expiring tombstones: an empty map
	}
	endOffset := max(section[mapped-1].next.Load(), p.firstDirty)

	// Pass 2: rewrite section[:mapped] group by group.
	tombstoneHorizon := p.now.UnixMilli() - cfg.DeleteRetentionMs
	tc := newTxnCleaner(l.AbortedTxns(section[0].base, endOffset), tombstoneHorizon)
	for start := 0; start < mapped; {
		end := start + 1
		size := section[start].size.Load()
		for end < mapped && size+section[end].size.Load() <= cfg.SegmentBytes &&
			section[end].next.Load()-1-section[start].base <= math.MaxInt32 {
			size += section[end].size.Load()
			end++
		}
		group := section[start:end]
		start = end
		w, err := l.writeCleaned(group, &cfg, om, producers, tombstoneHorizon, tc, &buf, p, &res)
		if err != nil {
			return res, err
		}
		if w == nil {
			continue // nothing in the group at all
		}
		if err := l.swapIn(group, w, &cfg); err != nil {
			return res, err
		}
		res.groups++
	}
	res.firstDirty = endOffset
	return res, nil
}

// forEachBatch calls fn for every batch of the sealed segment s, read in
// 1 MiB windows through *buf, accounting the bytes read and throttling.
func forEachBatch(s *segment, buf *[]byte, p cleanParams, read *int64, fn func(batch.Header, []byte) error) error {
	const window = 1 << 20
	limit := s.size.Load()
	for pos := int64(0); pos < limit; {
		n := int(min(window, limit-pos))
		if cap(*buf) < n {
			*buf = make([]byte, n)
		}
		b := (*buf)[:n]
		if _, err := s.log.ReadAt(b, pos); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("storage: clean: read segment %d: %w", s.base, err)
		}
		*read += int64(n)
		if !p.throttle.wait(n, p.stop) {
			return errCleanAborted
		}
		consumed := 0
		for len(b) > 0 {
			first, rest, err := batch.Split(b)
			if err != nil {
				if consumed == 0 {
					// One batch larger than the window: read it whole.
					h, herr := readHeader(s.log, pos, limit)
					if herr != nil {
						return fmt.Errorf("%w: segment %d at position %d: %v", ErrCorruption, s.base, pos, herr)
					}
					big := make([]byte, h.Size())
					if _, err := s.log.ReadAt(big, pos); err != nil {
						return fmt.Errorf("storage: clean: read segment %d: %w", s.base, err)
					}
					*read += int64(len(big) - n)
					if err := fn(h, big); err != nil {
						return err
					}
					consumed = len(big)
				}
				break
			}
			h, err := batch.ParseHeader(first)
			if err != nil {
				return fmt.Errorf("%w: segment %d at position %d: %v", ErrCorruption, s.base, pos+int64(consumed), err)
			}
			if err := fn(h, first); err != nil {
				return err
			}
			consumed += len(first)
			b = rest
		}
		pos += int64(consumed)
	}
	return nil
}

// writeCleaned writes the cleaned copy of group as <base>.*.cleaned,
// sealed and fsynced, and returns it closed (nil if the group held no
// batch). On error the .cleaned files are removed.
func (l *Log) writeCleaned(group []*segment, cfg *Config, om *offsetMap, producers map[int64]int64,
	tombstoneHorizon int64, tc *txnCleaner, buf *[]byte, p cleanParams, res *cleanResult) (w *segment, err error) {
	base := group[0].base
	paths := cleanedPaths(l.dir, base)
	txnPath := cleanedTxnIndexPath(l.dir, base)
	for _, path := range append(paths[:], txnPath) {
		_ = l.fs.Remove(path)
	}
	w = &segment{fs: l.fs, dir: l.dir, base: base, maxTS: -1, maxTSOff: base, firstAppendMs: -1}
	if w.log, err = l.fs.Create(paths[0]); err != nil {
		return nil, fmt.Errorf("storage: clean: create %s: %w", paths[0], err)
	}
	defer func() {
		if err != nil || w == nil {
			for _, path := range append(paths[:], txnPath) {
				_ = l.fs.Remove(path)
			}
		}
	}()
	// The group's aborted-transaction entries whose ABORT marker the
	// cleaning keeps go with it into the cleaned segment.
	var groupAborted []AbortedTxn
	for _, s := range group {
		groupAborted = append(groupAborted, s.abortedTxns()...)
	}
	var keptAborted []AbortedTxn
	oi, err := index.OpenOffsetIndex(l.fs, paths[1], base, cfg.SegmentIndexBytes)
	if err != nil {
		w.log.Close()
		return nil, fmt.Errorf("storage: clean: %w", err)
	}
	ti, err := index.OpenTimeIndex(l.fs, paths[2], base, cfg.SegmentIndexBytes)
	if err != nil {
		oi.Close()
		w.log.Close()
		return nil, fmt.Errorf("storage: clean: %w", err)
	}
	w.oi, w.ti = oi, ti
	w.open.Store(true)
	var (
		out     []byte // pending output, flushed at 1 MiB
		pos     int64  // file position of out[0]
		next    int64  = -1
		bld            = batch.NewBuilder(batch.Header{})
		lastGrp        = group[len(group)-1]
	)
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		if _, err := w.log.WriteAt(out, pos); err != nil {
			return fmt.Errorf("storage: clean: write %s: %w", paths[0], err)
		}
		n := len(out)
		res.bytesWritten += int64(n)
		pos += int64(n)
		out = out[:0]
		if !p.throttle.wait(n, p.stop) {
			return errCleanAborted
		}
		return nil
	}
	emit := func(b []byte) error {
		h, err := batch.ParseHeader(b)
		if err != nil {
			return err
		}
		if err := w.observeBatch(&h, pos+int64(len(out)), cfg.IndexIntervalBytes); err != nil {
			return fmt.Errorf("storage: clean: index: %w", err)
		}
		out = append(out, b...)
		next = h.LastOffset() + 1
		if len(out) >= 1<<20 {
			return flush()
		}
		return nil
	}
	for gi, s := range group {
		lastSeg := gi == len(group)-1
		limit := s.size.Load()
		var seen int64
		err := forEachBatch(s, buf, p, &res.bytesRead, func(h batch.Header, b []byte) error {
			seen += int64(h.Size())
			lastBatch := lastSeg && seen == limit && s == lastGrp
			tc.reach(h)
			if h.Control() {
				keep, err := tc.control(h, b, lastBatch || (h.HasProducerID() && producerLast(producers, h)))
				if err != nil {
					return fmt.Errorf("%w: segment %d batch %d: %v", ErrCorruption, s.base, h.BaseOffset, err)
				}
				if !keep {
					return nil
				}
				for _, a := range groupAborted {
					if a.LastOffset == h.BaseOffset {
						keptAborted = append(keptAborted, a)
					}
				}
				return emit(b)
			}
			if tc.abortedData(h) {
				// An aborted transaction's records go, whatever their keys.
				if !lastBatch && !producerLast(producers, h) {
					return nil
				}
				tc.retain(h) // kept empty: its marker must stay too
				bld.Reset(h)
				nb, err := bld.AppendTo(nil)
				if err != nil {
					return fmt.Errorf("storage: clean: re-encode batch %d: %w", h.BaseOffset, err)
				}
				return emit(nb)
			}
			bld.Reset(h)
			kept := int32(0)
			if h.NumRecords > 0 {
				err := batch.Records(b, func(r batch.Record) error {
					off := h.BaseOffset + int64(r.OffsetDelta)
					if !r.KeyNull {
						if latest, ok := om.get(r.Key); ok && off < latest {
							return nil // superseded
						}
						if r.ValueNull {
							ts := recordTimestamp(h, r)
							if ts < tombstoneHorizon {
								return nil // an expired tombstone
							}
							res.tombstoneExpiry = min(res.tombstoneExpiry, ts+cfg.DeleteRetentionMs)
						}
					}
					bld.Add(r)
					kept++
					return nil
				})
				if err != nil {
					return fmt.Errorf("%w: segment %d batch %d: %v", ErrCorruption, s.base, h.BaseOffset, err)
				}
			}
			switch {
			case kept == h.NumRecords:
				tc.retain(h)
				return emit(b)
			case kept == 0 && !lastBatch && !(h.HasProducerID() && producerLast(producers, h)):
				return nil
			}
			tc.retain(h)
			nb, err := bld.AppendTo(nil)
			if err != nil {
				return fmt.Errorf("storage: clean: re-encode batch %d: %w", h.BaseOffset, err)
			}
			return emit(nb)
		})
		if err != nil {
			w.closeFiles()
			return nil, err
		}
	}
	if err := flush(); err != nil {
		w.closeFiles()
		return nil, err
	}
	if next < 0 {
		w.closeFiles()
		return nil, nil
	}
	w.size.Store(pos)
	w.next.Store(next)
	if len(keptAborted) > 0 {
		if err := vfs.WriteFileAtomicDeferDirSync(l.fs, txnPath, encodeTxnIndex(keptAborted)); err != nil {
			w.closeFiles()
			return nil, fmt.Errorf("storage: clean: write %s: %w", txnPath, err)
		}
		w.aborted.Store(&keptAborted)
	}
	if err := w.seal(); err != nil {
		w.closeFiles()
		return nil, fmt.Errorf("storage: clean: seal %s: %w", paths[0], err)
	}
	if err := w.closeFiles(); err != nil {
		return nil, fmt.Errorf("storage: clean: close %s: %w", paths[0], err)
	}
	return w, nil
}

// producerLast reports whether h is its producer's newest batch in the
// mapped section (or its producer has none there: keep, to be safe).
func producerLast(producers map[int64]int64, h batch.Header) bool {
	last, ok := producers[h.ProducerID]
	return !ok || last == h.BaseOffset
}

// recordTimestamp is a record's timestamp as consumers read it.
func recordTimestamp(h batch.Header, r batch.Record) int64 {
	if h.TimestampType() == batch.LogAppendTime {
		return h.MaxTimestamp
	}
	return h.FirstTimestamp + r.TimestampDelta
}

// cleanedTxnIndexPath is the .cleaned name of a segment's
// aborted-transaction index.
func cleanedTxnIndexPath(dir string, base int64) string {
	return filepath.Join(dir, SegmentFileName(base, TxnIndexFileSuffix)+CleanedFileSuffix)
}

// txnCleaner carries the transaction side of one cleaning across its
// groups, in offset order (Kafka's CleanedTransactionMetadata):
//
//   - the records of aborted transactions go: a producer is "in an aborted
//     transaction" from the first offset of an aborted transaction of its
//     (from the aborted-transaction index) to its ABORT marker, and its
//     transactional batches in between are dropped (or kept empty, when
//     the producer-state rules need the batch);
//   - a marker stays while any batch of its transaction stays (a replay
//     would otherwise find the batch's transaction open forever) and, after
//     that, until delete.retention.ms past its timestamp (Kafka: past the
//     delete horizon stamped at the first cleaning, KIP-534; here, as for
//     tombstones, by timestamp), and whenever the producer-state rules keep
//     it (the producer's newest batch, the group's last).
type txnCleaner struct {
	aborted   []AbortedTxn   // not reached yet, by first offset
	inAborted map[int64]bool // producers inside an aborted transaction now
	retained  map[int64]bool // producers whose current transaction has a kept batch
	horizon   int64          // markers older than this may go (ms)
}

func newTxnCleaner(aborted []AbortedTxn, horizon int64) *txnCleaner {
	slices.SortFunc(aborted, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return &txnCleaner{aborted: aborted, inAborted: map[int64]bool{}, retained: map[int64]bool{}, horizon: horizon}
}

// reach enters the aborted transactions that start at or before h.
func (tc *txnCleaner) reach(h batch.Header) {
	for len(tc.aborted) > 0 && tc.aborted[0].FirstOffset <= h.LastOffset() {
		tc.inAborted[tc.aborted[0].ProducerID] = true
		tc.aborted = tc.aborted[1:]
	}
}

// abortedData reports whether data batch h belongs to an aborted
// transaction.
func (tc *txnCleaner) abortedData(h batch.Header) bool {
	return h.Transactional() && h.HasProducerID() && tc.inAborted[h.ProducerID]
}

// retain records that a batch of h's producer's transaction was kept.
func (tc *txnCleaner) retain(h batch.Header) {
	if h.Transactional() && h.HasProducerID() {
		tc.retained[h.ProducerID] = true
	}
}

// control decides whether control batch h (bytes b) stays; force keeps it
// for the producer-state rules.
func (tc *txnCleaner) control(h batch.Header, b []byte, force bool) (bool, error) {
	m, ok, err := parseMarker(b)
	if err != nil || !ok {
		return true, err
	}
	if !m.Commit {
		delete(tc.inAborted, m.ProducerID)
	}
	had := tc.retained[m.ProducerID]
	delete(tc.retained, m.ProducerID)
	return force || had || h.MaxTimestamp >= tc.horizon, nil
}

// cleanedPaths returns the .cleaned names of a segment's log, offset index
// and time index.
func cleanedPaths(dir string, base int64) [3]string {
	return [3]string{
		filepath.Join(dir, SegmentFileName(base, LogFileSuffix)+CleanedFileSuffix),
		filepath.Join(dir, SegmentFileName(base, IndexFileSuffix)+CleanedFileSuffix),
		filepath.Join(dir, SegmentFileName(base, TimeIndexFileSuffix)+CleanedFileSuffix),
	}
}

// swapIn replaces group by the cleaned segment w (steps 2-4 at the top of
// this file) under the log's lock. If the group is no longer what the log
// holds (retention, truncation, close), the cleaned files are removed and
// errCleanAborted returned; a failed rename or sync latches the log.
func (l *Log) swapIn(group []*segment, w *segment, cfg *Config) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	cleaned := cleanedPaths(l.dir, w.base)
	abort := func() error {
		for _, p := range cleaned {
			_ = l.fs.Remove(p)
		}
		return errCleanAborted
	}
	if l.closed.Load() || l.failed.Load() {
		return abort()
	}
	segs := l.segments()
	at := -1
	for i, s := range segs {
		if s == group[0] {
			at = i
			break
		}
	}
	if at < 0 || at+len(group) >= len(segs) {
		return abort() // gone, or the last one became active (truncation)
	}
	for i, s := range group {
		if segs[at+i] != s || !s.sealed {
			return abort()
		}
	}
	live := [3]string{w.logPath(), w.indexPath(), w.timeIndexPath()}
	// Step 2: .cleaned -> .swap, the log last: a .log.swap is the sign
	// that the whole cleaned segment is durable and must be swapped in.
	// The aborted-transaction index, when the cleaned segment has one,
	// goes first.
	hasTxn := len(w.abortedTxns()) > 0
	if hasTxn {
		if err := l.fs.Rename(cleanedTxnIndexPath(l.dir, w.base), w.txnIndexPath()+SwapFileSuffix); err != nil {
			return l.failLocked(fmt.Errorf("clean: rename %s: %w", cleanedTxnIndexPath(l.dir, w.base), err))
		}
	}
	for _, i := range []int{1, 2, 0} {
		if err := l.fs.Rename(cleaned[i], live[i]+SwapFileSuffix); err != nil {
			return l.failLocked(fmt.Errorf("clean: rename %s: %w", cleaned[i], err))
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(fmt.Errorf("clean: sync dir: %w", err))
	}
	// Step 3: the old segments go to .deleted.
	for _, s := range group {
		if err := s.renameDeleted(); err != nil {
			return l.failLocked(fmt.Errorf("clean: delete segment %d: %w", s.base, err))
		}
	}
	// Step 4: .swap -> live, the log last.
	if hasTxn {
		if err := l.fs.Rename(w.txnIndexPath()+SwapFileSuffix, w.txnIndexPath()); err != nil {
			return l.failLocked(fmt.Errorf("clean: rename %s: %w", w.txnIndexPath()+SwapFileSuffix, err))
		}
	}
	for _, i := range []int{1, 2, 0} {
		if err := l.fs.Rename(live[i]+SwapFileSuffix, live[i]); err != nil {
			return l.failLocked(fmt.Errorf("clean: rename %s: %w", live[i]+SwapFileSuffix, err))
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(fmt.Errorf("clean: sync dir: %w", err))
	}
	ns, err := openSegmentFiles(l.fs, l.dir, w.base, 0, 0)
	if err != nil {
		return l.failLocked(fmt.Errorf("clean: open cleaned segment %d: %w", w.base, err))
	}
	ns.sealed = true
	ns.next.Store(w.next.Load())
	if a := w.abortedTxns(); len(a) > 0 {
		ns.aborted.Store(&a)
	}
	ts, off := w.maxTimestamp()
	ns.setMaxTimestamp(ts, off)
	l.cacheSealed(ns)
	list := make([]*segment, 0, len(segs)-len(group)+1)
	list = append(list, segs[:at]...)
	list = append(list, ns)
	list = append(list, segs[at+len(group):]...)
	l.segs.Store(&list)
	for _, s := range group {
		l.scheduleDeleteLocked(s, time.Duration(cfg.FileDeleteDelayMs)*time.Millisecond)
	}
	return nil
}

// completeSwaps finishes every swap that a crash interrupted after step 2
// (see the top of this file): the live segments the swap replaces are
// removed and its files renamed to their live names. It returns how many
// files it removed or renamed.
func (l *Log) completeSwaps(names []string) (int, error) {
	swaps := map[int64]bool{}
	logs := map[int64]bool{}
	for _, n := range names {
		b, suf, ok := parseSegmentFileName(n)
		if !ok {
			continue
		}
		switch suf {
		case LogFileSuffix + SwapFileSuffix:
			swaps[b] = true
		case LogFileSuffix:
			logs[b] = true
		}
	}
	if len(swaps) == 0 {
		return 0, nil
	}
	done := 0
	for base := range swaps {
		swapLog := filepath.Join(l.dir, SegmentFileName(base, LogFileSuffix)+SwapFileSuffix)
		last, err := lastOffsetOf(l, swapLog, base)
		if err != nil {
			return done, err
		}
		if last < base {
			continue // empty: the cleaner never swaps one in; a leftover
		}
		for b := range logs {
			if b < base || b > last {
				continue
			}
			for _, suf := range []string{LogFileSuffix, IndexFileSuffix, TimeIndexFileSuffix, TxnIndexFileSuffix} {
				if err := l.fs.Remove(filepath.Join(l.dir, SegmentFileName(b, suf))); err != nil && !isNotExist(err) {
					return done, fmt.Errorf("storage: complete swap %d: %w", base, err)
				}
				done++
			}
			delete(logs, b)
		}
		for _, suf := range []string{TxnIndexFileSuffix, IndexFileSuffix, TimeIndexFileSuffix, LogFileSuffix} {
			p := filepath.Join(l.dir, SegmentFileName(base, suf))
			if err := l.fs.Rename(p+SwapFileSuffix, p); err != nil {
				if isNotExist(err) {
					continue // an index already renamed (or never written): rebuilt if missing
				}
				return done, fmt.Errorf("storage: complete swap %d: %w", base, err)
			}
			done++
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return done, fmt.Errorf("storage: complete swap: %w", err)
	}
	return done, nil
}

// lastOffsetOf walks the batch headers of a (fsynced, whole) segment log
// file and returns its last offset.
func lastOffsetOf(l *Log, path string, base int64) (int64, error) {
	f, err := l.fs.Open(path)
	if err != nil {
		return 0, fmt.Errorf("storage: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("storage: stat %s: %w", path, err)
	}
	last := base - 1
	for pos := int64(0); pos < st.Size(); {
		h, err := readHeader(f, pos, st.Size())
		if err != nil {
			return 0, fmt.Errorf("%w: %s at position %d: %v", ErrCorruption, path, pos, err)
		}
		last = h.LastOffset()
		pos += int64(h.Size())
	}
	return last, nil
}

// checkKeyed refuses a batch bound for a compacted log that holds records
// without a key, as Kafka's LogValidator does: every such record is
// listed (its index in the batch and Kafka's message naming the
// partition) in an [InvalidRecordsError], INVALID_RECORD.
func checkKeyed(b []byte, topic string, partition int32) error {
	h, err := batch.ParseHeader(b)
	if err != nil || h.Control() {
		return err
	}
	var bad []RecordError
	index := int32(0)
	err = batch.Records(b, func(r batch.Record) error {
		if r.KeyNull {
			bad = append(bad, RecordError{Index: index,
				Message: fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", topic, partition)})
		}
		index++
		return nil
	})
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return &InvalidRecordsError{Records: bad}
	}
	return nil
}
