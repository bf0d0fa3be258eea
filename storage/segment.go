package storage

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/index"
	"github.com/strata-io/strata/storage/vfs"
)

// A segment is one <base>.log file with its two sparse indexes.
//
// The .log file is a plain concatenation of Kafka v2 record batches, byte
// for byte as the Produce request carried them except for the patched base
// offset, partition leader epoch and (LogAppendTime topics) timestamps:
//
//	+-------------+-----------+--------------+-------+-----+-------------+----------------+
//	| baseOffset  | length    | leaderEpoch  | magic | crc | attributes  | ... (61-byte   |
//	| int64       | int32     | int32        | int8=2| u32 | int16       | header) records|
//	+-------------+-----------+--------------+-------+-----+-------------+----------------+
//	|<------------ 12 bytes -->|<------------- length bytes ------------------------------>|
//
// Format migration: none yet. Only magic 2 is ever written; a future format
// would be a new magic, readable side by side, never a rewrite in place.
//
// Concurrency: the writer (holding Log.mu) appends at size and then
// publishes size and next with atomic stores; readers load them first and
// never look past them, so they never see a half-written batch. Files are
// closed only when refs drops to zero: the log holds one reference, every
// open ReadView another.
type segment struct {
	fs   vfs.FS
	dir  string
	base int64

	log vfs.File
	oi  *index.OffsetIndex
	ti  *index.TimeIndex

	// Published to lock-free readers.
	size atomic.Int64 // bytes of whole batches in log
	// cuts counts truncations, bumped before the file is cut and after
	// size is lowered (odd while one runs): a reader that finds its
	// bytes gone checks it, since size alone cannot tell (the file is
	// cut before size drops, and appends may raise size again before
	// the reader looks).
	cuts atomic.Int64
	next atomic.Int64 // offset after the last batch; base when empty

	tsMu     sync.Mutex // guards maxTS and maxTSOff (read as a pair)
	maxTS    int64      // largest batch MaxTimestamp; -1 when empty
	maxTSOff int64      // base offset of the first batch that reached maxTS

	// Writer state, guarded by Log.mu.
	bytesSinceIndex int
	firstAppendMs   int64 // wall clock of the first append, for segment.ms; -1 when empty
	jitterMs        int64
	sealed          bool
	missingIndex    bool // an index file was absent at open: rebuild it

	// aborted is the segment's aborted-transaction index (txnindex.go),
	// immutable, replaced on change (readers load it lock-free); nil: none.
	aborted atomic.Pointer[[]AbortedTxn]
	// txnf is the open .txnindex of an active segment with entries, nil
	// otherwise (guarded by Log.mu; closed by seal and closeFiles).
	txnf vfs.File
	// txnDirty: the .txnindex file holds more than aborted (a torn tail
	// recovery found): rewrite it (recovery only).
	txnDirty bool

	// tail is where the last appended batches lie (tail.go); nil when
	// sealed, truncated or not yet appended to since opening.
	tail atomic.Pointer[tailRing]

	refs    atomic.Int64 // 1 (the log's) + open read views; files closed at 0
	deleted atomic.Bool  // files renamed to .deleted: unlink them when closed
	// gone, if set (before the log's reference is dropped), is called once
	// the last reference is gone and a deleted segment's files are
	// unlinked, so whoever counts pending deletions counts them done only
	// when they are.
	gone func()

	// Sealed segments' files may be closed while the segment lives and
	// reopened on demand (filecache.go). The active segment's never are.
	fmu sync.Mutex // serializes opening and closing log, oi and ti
	// unsynced: sealed (sealUnsynced) and not yet fsynced (syncSealed).
	unsynced atomic.Bool
	open     atomic.Bool               // log, oi and ti are open
	users    atomic.Int64              // pins: uses of the files now (readers, reactivation)
	inCache  atomic.Bool               // a member of cache (set under cache.mu)
	lastUse  atomic.Int64              // cache.clock at the last pin
	cache    atomic.Pointer[fileCache] // set by fileCache.add before inCache
}

func (s *segment) logPath() string {
	return filepath.Join(s.dir, SegmentFileName(s.base, LogFileSuffix))
}
func (s *segment) indexPath() string {
	return filepath.Join(s.dir, SegmentFileName(s.base, IndexFileSuffix))
}
func (s *segment) timeIndexPath() string {
	return filepath.Join(s.dir, SegmentFileName(s.base, TimeIndexFileSuffix))
}

// createSegment creates empty files for a segment starting at base.
func createSegment(fs vfs.FS, dir string, base int64, cfg Config) (*segment, error) {
	s := &segment{fs: fs, dir: dir, base: base, maxTS: -1, maxTSOff: base, firstAppendMs: -1}
	var err error
	if s.log, err = fs.Create(s.logPath()); err != nil {
		return nil, fmt.Errorf("storage: create segment: %w", err)
	}
	// Stale index files of an earlier segment with the same base (after a
	// truncation) must not leak entries into this one.
	_ = fs.Remove(s.indexPath())
	_ = fs.Remove(s.timeIndexPath())
	if err := s.openIndexes(cfg.SegmentIndexBytes, cfg.SegmentIndexBytes); err != nil {
		s.log.Close()
		return nil, err
	}
	s.next.Store(base)
	s.refs.Store(1)
	s.open.Store(true)
	return s, nil
}

// openSegmentFiles opens an existing segment's log read-write and its
// indexes with the given capacities (0: the index file's current size,
// for sealed segments). It computes nothing: recovery decides whether the
// indexes are trusted or rebuilt.
func openSegmentFiles(fs vfs.FS, dir string, base int64, oiMax, tiMax int) (*segment, error) {
	return openSegmentFilesFor(fs, dir, base, oiMax, tiMax, false)
}

// openSegmentFilesFor is openSegmentFiles; with rescan (the segment is
// about to be rebuilt), its indexes' entries are counted only in the slots
// a log of its size can fill (one entry per batch at most, and a batch is
// at least a header): a crash leaves the active segment's indexes at their
// preallocated size, and counting them whole reads megabytes of zeros.
func openSegmentFilesFor(fs vfs.FS, dir string, base int64, oiMax, tiMax int, rescan bool) (*segment, error) {
	s := &segment{fs: fs, dir: dir, base: base, maxTS: -1, maxTSOff: base, firstAppendMs: -1}
	var err error
	if s.log, err = fs.OpenReadWrite(s.logPath()); err != nil {
		return nil, fmt.Errorf("storage: open segment: %w", err)
	}
	st, err := s.log.Stat()
	if err != nil {
		s.log.Close()
		return nil, fmt.Errorf("storage: stat segment: %w", err)
	}
	for _, p := range []string{s.indexPath(), s.timeIndexPath()} {
		if _, err := fs.Stat(p); err != nil {
			s.missingIndex = true
		}
	}
	maxEntries := 0
	if rescan {
		maxEntries = int(min(st.Size()/batch.HeaderSize+2, 1<<30))
	}
	oi, ti, err := openIndexFilesAtMost(fs, s.indexPath(), s.timeIndexPath(), base, oiMax, tiMax, maxEntries)
	if err != nil {
		s.log.Close()
		return nil, err
	}
	s.oi, s.ti = oi, ti
	s.size.Store(st.Size())
	s.next.Store(base)
	s.refs.Store(1)
	s.open.Store(true)
	return s, nil
}

func (s *segment) openIndexes(oiMax, tiMax int) error {
	oi, ti, err := openIndexFiles(s.fs, s.indexPath(), s.timeIndexPath(), s.base, oiMax, tiMax)
	if err != nil {
		return err
	}
	s.oi, s.ti = oi, ti
	return nil
}

func openIndexFiles(fs vfs.FS, oiPath, tiPath string, base int64, oiMax, tiMax int) (*index.OffsetIndex, *index.TimeIndex, error) {
	return openIndexFilesAtMost(fs, oiPath, tiPath, base, oiMax, tiMax, 0)
}

// openIndexFilesAtMost opens both indexes, counting entries only in the
// first maxEntries slots (0: all).
func openIndexFilesAtMost(fs vfs.FS, oiPath, tiPath string, base int64, oiMax, tiMax, maxEntries int) (*index.OffsetIndex, *index.TimeIndex, error) {
	oi, err := index.OpenOffsetIndexAtMost(fs, oiPath, base, oiMax, maxEntries)
	if err != nil {
		return nil, nil, fmt.Errorf("storage: open offset index: %w", err)
	}
	ti, err := index.OpenTimeIndexAtMost(fs, tiPath, base, tiMax, maxEntries)
	if err != nil {
		oi.Close()
		return nil, nil, fmt.Errorf("storage: open time index: %w", err)
	}
	return oi, ti, nil
}

// recreateIndexes replaces both index files with empty ones of the given
// capacity (recovery only: no reader can hold the segment yet).
func (s *segment) recreateIndexes(maxBytes int) error {
	s.oi.Close()
	s.ti.Close()
	s.oi, s.ti = nil, nil
	for _, p := range []string{s.indexPath(), s.timeIndexPath()} {
		if err := s.fs.Remove(p); err != nil && !isNotExist(err) {
			return err
		}
	}
	s.missingIndex = false
	return s.openIndexes(maxBytes, maxBytes)
}

// errSegmentClosed is what acquire returns for a segment closed for good
// (deleted, or its log closed) between a reader's load of the list and
// its acquire.
var errSegmentClosed = errors.New("storage: segment closed")

// acquire takes a reader reference and pins the files open (reopening
// them if the file cache closed them: the error is then the open's);
// errSegmentClosed if the segment is already closed for good. Each
// successful acquire is paired with a release.
func (s *segment) acquire() error {
	for {
		r := s.refs.Load()
		if r <= 0 {
			return errSegmentClosed
		}
		if s.refs.CompareAndSwap(r, r+1) {
			break
		}
	}
	if err := s.pin(); err != nil {
		s.drop()
		return err
	}
	return nil
}

// release ends a reader's acquire.
func (s *segment) release() {
	s.unpin()
	s.drop()
}

// drop drops a reference (the log's own, or a reader's through release);
// the last one closes the files and, for a deleted segment, unlinks them.
func (s *segment) drop() {
	if s.refs.Add(-1) != 0 {
		return
	}
	s.closeFiles()
	if s.deleted.Load() {
		for _, p := range []string{s.logPath(), s.indexPath(), s.timeIndexPath(), s.txnIndexPath()} {
			_ = s.fs.Remove(p + DeletedFileSuffix)
		}
	}
	if s.gone != nil {
		s.gone()
	}
}

// closeFiles closes the segment's files for good, if open, and takes it
// out of the file cache.
func (s *segment) closeFiles() error {
	if c := s.cache.Load(); c != nil && s.inCache.Load() {
		c.remove(s)
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if !s.open.Load() {
		return nil
	}
	s.open.Store(false)
	return s.closeFilesLocked()
}

// closeFilesLocked closes whatever is open (recovery may fail half-way
// through reopening an index, leaving it nil). fmu held.
func (s *segment) closeFilesLocked() error {
	var err error
	if s.txnf != nil {
		err = s.txnf.Close()
		s.txnf = nil
	}
	if s.oi != nil {
		if e := s.oi.Close(); err == nil {
			err = e
		}
		s.oi = nil
	}
	if s.ti != nil {
		if e := s.ti.Close(); err == nil {
			err = e
		}
		s.ti = nil
	}
	if s.log != nil {
		if e := s.log.Close(); err == nil {
			err = e
		}
	}
	return err
}

// renameDeleted renames the segment's files to <name>.deleted so a crash
// before their removal leaves nothing that recovery would load.
func (s *segment) renameDeleted() error {
	s.deleted.Store(true)
	var first error
	for i, p := range []string{s.logPath(), s.indexPath(), s.timeIndexPath(), s.txnIndexPath()} {
		if i == 3 {
			// Most segments have no aborted-transaction index.
			if _, err := s.fs.Stat(p); err != nil {
				continue
			}
		}
		if err := s.fs.Rename(p, p+DeletedFileSuffix); err != nil && first == nil {
			if _, statErr := s.fs.Stat(p); statErr == nil {
				first = err
			}
		}
	}
	return first
}

func (s *segment) maxTimestamp() (ts, off int64) {
	s.tsMu.Lock()
	ts, off = s.maxTS, s.maxTSOff
	s.tsMu.Unlock()
	return ts, off
}

func (s *segment) setMaxTimestamp(ts, off int64) {
	s.tsMu.Lock()
	s.maxTS, s.maxTSOff = ts, off
	s.tsMu.Unlock()
}

// observeBatch updates the writer state for one batch appended at pos:
// the max timestamp first, then (every IndexIntervalBytes) one entry in
// each index pointing at the batch start, as Kafka's LogSegment.append.
func (s *segment) observeBatch(h *batch.Header, pos int64, interval int) error {
	s.tsMu.Lock()
	if h.MaxTimestamp > s.maxTS {
		s.maxTS, s.maxTSOff = h.MaxTimestamp, h.BaseOffset
	}
	ts, tsOff := s.maxTS, s.maxTSOff
	s.tsMu.Unlock()
	if s.bytesSinceIndex > interval {
		// A full index only costs sparseness; the next append rolls. So
		// does an entry the disk had no room for (the index writes, never
		// stores through its mapping, so a full disk is ENOSPC here, not
		// SIGBUS): a recovery on a full disk still completes, and the
		// entry is retried at the next batch.
		skipped := false
		if err := s.oi.Append(h.BaseOffset, int32(pos)); err != nil && !errors.Is(err, index.ErrIndexFull) {
			if !noSpaceErr(err) {
				return err
			}
			skipped = true
		}
		if err := s.ti.Append(ts, tsOff); err != nil && !errors.Is(err, index.ErrIndexFull) {
			if !noSpaceErr(err) {
				return err
			}
			skipped = true
		}
		if !skipped {
			s.bytesSinceIndex = 0
		}
	}
	s.bytesSinceIndex += int(h.Size())
	return nil
}

var hdrPool = sync.Pool{New: func() any { b := make([]byte, batch.HeaderSize); return &b }}

// readHeader reads and parses the batch header at pos, which must leave a
// whole batch before limit.
func readHeader(f vfs.File, pos, limit int64) (batch.Header, error) {
	if limit-pos < batch.HeaderSize {
		return batch.Header{}, io.ErrUnexpectedEOF
	}
	bp := hdrPool.Get().(*[]byte)
	defer hdrPool.Put(bp)
	if _, err := f.ReadAt(*bp, pos); err != nil {
		return batch.Header{}, err
	}
	h, err := batch.ParseHeader(*bp)
	if err != nil {
		return h, err
	}
	if pos+int64(h.Size()) > limit {
		return h, io.ErrUnexpectedEOF
	}
	return h, nil
}

// headerScanner reads batch headers walking forward through a file with
// one ReadAt per window instead of one per batch. Measured here
// (BenchmarkReadFetch, 1 MiB fetches): one 61-byte read per header gave
// 47 MB/s with 100-byte batches and 330 MB/s with 1 KiB ones; 4 KiB
// windows gave 620 and 680 MB/s. With 16 KiB batches (BenchmarkReadByOffset)
// a 64 KiB window made locating a batch 3x slower (copying the window),
// a 4 KiB one cost nothing; so the window grows only after small batches.
type headerScanner struct {
	f     vfs.File
	limit int64
	buf   *[]byte
	start int64 // file position of (*buf)[0]
	n     int   // valid bytes in buf
	small bool  // the last batch was small: read the big window
}

// Window sizes: small batches are walked through entirely, so one large
// read beats many; for large batches only each header is needed.
const (
	scanWindow      = 4 << 10
	scanWindowLarge = 64 << 10
	smallBatch      = 2 << 10
)

var scanPool = sync.Pool{New: func() any { b := make([]byte, scanWindowLarge); return &b }}

func newHeaderScanner(f vfs.File, limit int64) *headerScanner {
	return &headerScanner{f: f, limit: limit, buf: scanPool.Get().(*[]byte)}
}

func (hs *headerScanner) release() { scanPool.Put(hs.buf) }

// header parses the batch header at pos, which must leave a whole batch
// before the scanner's limit.
func (hs *headerScanner) header(pos int64) (batch.Header, error) {
	if hs.limit-pos < batch.HeaderSize {
		return batch.Header{}, io.ErrUnexpectedEOF
	}
	if pos < hs.start || pos+batch.HeaderSize > hs.start+int64(hs.n) {
		w := int64(scanWindow)
		if hs.small {
			w = scanWindowLarge
		}
		n := int(min(w, hs.limit-pos))
		m, err := hs.f.ReadAt((*hs.buf)[:n], pos)
		if m < batch.HeaderSize {
			hs.n = 0
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return batch.Header{}, err
		}
		hs.start, hs.n = pos, m
	}
	off := int(pos - hs.start)
	h, err := batch.ParseHeader((*hs.buf)[off : off+batch.HeaderSize])
	if err != nil {
		return h, err
	}
	if pos+int64(h.Size()) > hs.limit {
		return h, io.ErrUnexpectedEOF
	}
	hs.small = h.Size() <= smallBatch
	return h, nil
}

// scanFrom walks batch headers from pos to limit and returns the offset
// after the last batch (or prev if none) and the largest max timestamp seen
// with the base offset of the batch that first reached it.
func (s *segment) scanFrom(pos, limit, prevNext int64) (next, maxTS, maxTSOff int64, err error) {
	next, maxTS, maxTSOff = prevNext, -1, s.base
	hs := newHeaderScanner(s.log, limit)
	defer hs.release()
	for pos < limit {
		h, err := hs.header(pos)
		if err != nil {
			return next, maxTS, maxTSOff, fmt.Errorf("%w: segment %d at position %d: %v", ErrCorruption, s.base, pos, err)
		}
		if h.MaxTimestamp > maxTS {
			maxTS, maxTSOff = h.MaxTimestamp, h.BaseOffset
		}
		next = h.LastOffset() + 1
		pos += int64(h.Size())
	}
	return next, maxTS, maxTSOff, nil
}

// loadTrusted derives next offset and max timestamp of a segment whose
// indexes are trusted (clean shutdown, or below the recovery point) with a
// short scan from the last offset-index entry, which only has to find the
// next offset; where the max timestamp comes from depends on the segment:
//
//   - Sealed (not the last segment): seal wrote a final time-index entry
//     holding the segment's max timestamp and the offset that first
//     reached it (Kafka's onBecomeInactiveSegment), into a slot regular
//     appends never take, and fsynced it; so the last entry is exact. A
//     sealed index is trimmed to its entries and always reports IsFull,
//     which therefore says nothing here. With constant timestamps the
//     exact entry sits at the segment's start; scanning from it, as this
//     function once did, reread a whole 1 GiB segment on every clean
//     reopen (about 0.5 s instead of a few ms).
//   - Active (the last segment): every offset-index entry was written
//     together with a time-index entry holding the max timestamp so far,
//     so the scan from the last offset-index entry sees every later batch,
//     unless the time index filled up and refused entries: then the scan
//     starts at the offset-index entry at or below its last entry.
//
// Why "sealed" can be trusted after a crash. A segment is sealed on reopen
// exactly when a later segment file exists. The roll (Log.rollLocked)
// creates that file only after seal returned, and seal returns only after
// fsyncing the log and both indexes, the final entry included; the
// recovery point moves past the sealed segment after that too. A crash
// before seal's fsync completes therefore leaves no later segment: the
// half-sealed one is the last, the active-segment rule above applies to
// it (and without the clean-shutdown marker it is rescanned in full,
// since the recovery point is at most its end and recovery rescans from
// the segment holding the recovery point). Truncation removes later
// segments (durably) before it cuts a sealed one, and recovery reseals
// every segment it rebuilt before it returns, so the rule holds for them.
// The one exception is a segment sealed before final entries existed
// (no such data has shipped): its max timestamp could read low.
func (s *segment) loadTrusted() error {
	limit := s.size.Load()
	start, prevNext := int64(0), s.base
	if eo, p, ok := s.oi.LastEntry(); ok {
		start, prevNext = int64(p), eo
	}
	ts0, off0, tsOK := s.ti.LastEntry()
	if tsOK && !s.sealed && s.ti.IsFull() {
		// The active segment's time index stopped early: scan from its
		// last entry instead.
		if eo, p := s.oi.Lookup(off0); int64(p) < start {
			start, prevNext = int64(p), eo
		}
	}
	next, ts, tsOff, err := s.scanFrom(start, limit, prevNext)
	if err != nil {
		return err
	}
	if tsOK && ts0 >= ts {
		ts, tsOff = ts0, off0
	}
	if start > 0 && next == prevNext {
		// No batch at or after the entry: impossible for a sane index.
		return fmt.Errorf("%w: segment %d: index points past the log", index.ErrCorruptIndex, s.base)
	}
	s.next.Store(next)
	s.setMaxTimestamp(ts, tsOff)
	if eo, p, ok := s.oi.LastEntry(); ok {
		_ = eo
		s.bytesSinceIndex = int(limit - int64(p))
	} else {
		s.bytesSinceIndex = int(limit)
	}
	return nil
}

// rebuild rescans the whole log, validating every batch, rewrites both
// indexes and publishes the end of the last whole valid batch as the
// segment's size. It returns how many bytes lie past that end and the
// first invalid position (-1 if none).
//
// The log is read sequentially through buf (a recoveryReadBuf: 1 MiB), one
// ReadAt per window rather than two per batch (header, then body): 400k
// single-record batches in 2,000 partitions took 24-29 s to recover at
// about one pread64 per batch (issue 12). A batch larger than the window
// is read whole into a buffer of its own.
func (s *segment) rebuild(interval int, buf *[]byte) (cut int64, badPos int64, err error) {
	st, err := s.log.Stat()
	if err != nil {
		return 0, -1, err
	}
	fileSize := st.Size()
	if err := s.oi.Reset(); err != nil {
		return 0, -1, err
	}
	if err := s.ti.Reset(); err != nil {
		return 0, -1, err
	}
	s.bytesSinceIndex = 0
	s.setMaxTimestamp(-1, s.base)
	next := s.base
	pos := int64(0)
	badPos = -1
	win := (*buf)[:0] // the file from winPos on
	winPos := int64(0)
	var big []byte
	for pos < fileSize {
		b, h, herr := func() ([]byte, batch.Header, error) {
			if fileSize-pos < batch.HeaderSize {
				return nil, batch.Header{}, io.ErrUnexpectedEOF
			}
			if pos+batch.HeaderSize > winPos+int64(len(win)) {
				n := int(min(int64(cap(*buf)), fileSize-pos))
				m, err := s.log.ReadAt((*buf)[:n], pos)
				if m < batch.HeaderSize {
					if err == nil || errors.Is(err, io.EOF) {
						err = io.ErrUnexpectedEOF
					}
					return nil, batch.Header{}, err
				}
				win, winPos = (*buf)[:m], pos
			}
			off := int(pos - winPos)
			h, err := batch.ParseHeader(win[off : off+batch.HeaderSize])
			if err != nil {
				return nil, h, err
			}
			n := int64(h.Size())
			if pos+n > fileSize {
				return nil, h, io.ErrUnexpectedEOF
			}
			if pos+n <= winPos+int64(len(win)) {
				return win[off : off+int(n)], h, nil
			}
			if n > int64(cap(*buf)) {
				// Larger than the window: read it alone.
				if int64(cap(big)) < n {
					big = make([]byte, n)
				}
				b := big[:n]
				if _, err := s.log.ReadAt(b, pos); err != nil {
					return nil, h, err
				}
				return b, h, nil
			}
			// Straddles the window's end: slide the window to it.
			m, err := s.log.ReadAt((*buf)[:min(int64(cap(*buf)), fileSize-pos)], pos)
			if int64(m) < n {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return nil, h, err
			}
			win, winPos = (*buf)[:m], pos
			return win[:n], h, nil
		}()
		if herr == nil && h.BaseOffset < next {
			herr = fmt.Errorf("offset %d goes backwards (expected >= %d)", h.BaseOffset, next)
		}
		if herr == nil && h.LastOffset()-s.base > 1<<31-1 {
			herr = fmt.Errorf("offset %d does not fit segment %d", h.LastOffset(), s.base)
		}
		if herr == nil {
			if _, verr := batch.CheckStored(b); verr != nil {
				// Not Validate: compacted batches have offset-delta gaps
				// or no records at all, and stored timestamps are the
				// leader's business, not recovery's.
				herr = verr
			}
		}
		if herr != nil {
			badPos = pos
			break
		}
		if err := s.observeBatch(&h, pos, interval); err != nil {
			return 0, -1, err
		}
		next = h.LastOffset() + 1
		pos += int64(h.Size())
	}
	// The log itself is not cut here: the caller first decides whether
	// the damage is a torn tail (cut it: cutTail) or flushed data (refuse,
	// leaving the file as found).
	s.size.Store(pos)
	s.next.Store(next)
	return fileSize - pos, badPos, nil
}

// recoveryReadBuf is the window rebuild reads the log through. 1 MiB: one
// read covers thousands of small batches, and a recovery thread holds one.
const recoveryReadBuf = 1 << 20

var recoveryBufPool = sync.Pool{New: func() any { b := make([]byte, recoveryReadBuf); return &b }}

// cutTail truncates the log file to the published size after rebuild.
func (s *segment) cutTail() error {
	st, err := s.log.Stat()
	if err != nil {
		return err
	}
	if st.Size() > s.size.Load() {
		return s.log.Truncate(s.size.Load())
	}
	return nil
}

// sanity checks a trusted segment's indexes against its log.
func (s *segment) sanity() error {
	if err := s.oi.SanityCheck(); err != nil {
		return err
	}
	if err := s.ti.SanityCheck(); err != nil {
		return err
	}
	if _, p, ok := s.oi.LastEntry(); ok && int64(p) >= s.size.Load() {
		return fmt.Errorf("%w: segment %d: entry position %d past log size %d", index.ErrCorruptIndex, s.base, p, s.size.Load())
	}
	if _, o, ok := s.ti.LastEntry(); ok && o < s.base {
		return fmt.Errorf("%w: segment %d: time entry offset %d below base", index.ErrCorruptIndex, s.base, o)
	}
	return nil
}

// seal makes the segment immutable and durable: sealUnsynced, then
// syncSealed. Recovery and the cleaner seal this way; a roll seals
// unsynced and leaves the fsyncs to the log's syncer (Log.rollLocked).
func (s *segment) seal() error {
	if err := s.sealUnsynced(); err != nil {
		return err
	}
	return s.syncSealed()
}

// sealUnsynced makes the segment immutable: a final time-index entry
// carrying the segment's max timestamp and the offset that first reached
// it (so a reopen reads both from the index, see loadTrusted), index
// files trimmed to their used size. Nothing is fsynced: until syncSealed
// the segment is not durable, and the log's recovery point stays below
// it, so a crash rescans it (Log.recover). Idempotent.
func (s *segment) sealUnsynced() error {
	if s.sealed {
		return nil
	}
	ts, off := s.maxTimestamp()
	if ts >= 0 {
		err := s.ti.AppendFinal(ts, off)
		if errors.Is(err, index.ErrIndexFull) {
			// The reserved slot is taken: a segment reopened after its seal
			// completed, or a smaller segment.index.bytes since. One more
			// slot costs nothing; Seal trims to the entries anyway.
			if err = s.ti.Resize((s.ti.Entries() + 1) * index.TimeEntrySize); err == nil {
				err = s.ti.AppendFinal(ts, off)
			}
		}
		if err != nil {
			return fmt.Errorf("storage: final time index entry of segment %d: %w", s.base, err)
		}
	}
	if err := s.oi.Seal(); err != nil {
		return err
	}
	if err := s.ti.Seal(); err != nil {
		return err
	}
	s.sealed = true
	s.unsynced.Store(true)
	s.tailDrop()
	return nil
}

// syncSealed fsyncs a sealed segment's log, indexes and transaction index
// (then closes the latter: a sealed segment's entries are read from
// memory). The final time-index entry is durable once it returns, and
// only then may anything depend on the seal: the recovery point moves
// past the segment (which makes it trusted to a reopen, see loadTrusted)
// after it. The caller holds the segment's files open (the log's
// reference under its mutex, or acquire). Idempotent; fmu held, so an
// eviction cannot close the files under the fsyncs.
func (s *segment) syncSealed() error {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if !s.unsynced.Load() {
		return nil
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("%w: %w", errFsync, err)
	}
	if err := s.oi.Sync(); err != nil {
		return fmt.Errorf("%w: %w", errFsync, err)
	}
	if err := s.ti.Sync(); err != nil {
		return fmt.Errorf("%w: %w", errFsync, err)
	}
	if err := s.closeTxnIndex(); err != nil {
		return fmt.Errorf("%w: %w", errFsync, err)
	}
	s.unsynced.Store(false)
	return nil
}

// sync fsyncs the log and both indexes.
func (s *segment) sync() error {
	if err := s.log.Sync(); err != nil {
		return err
	}
	if err := s.oi.Sync(); err != nil {
		return err
	}
	if err := s.ti.Sync(); err != nil {
		return err
	}
	return s.syncTxnIndex()
}

// truncateTo drops every batch whose last offset is >= off (the whole batch
// holding off goes). The segment becomes the active one again.
func (s *segment) truncateTo(off int64, cfg Config) error {
	pos, next, err := s.positionOf(off)
	if err != nil {
		return err
	}
	if s.sealed {
		if err := s.oi.Resize(cfg.SegmentIndexBytes); err != nil {
			return err
		}
		if err := s.ti.Resize(cfg.SegmentIndexBytes); err != nil {
			return err
		}
		s.sealed = false
	}
	s.tailDrop()
	if err := s.oi.TruncateTo(next); err != nil {
		return err
	}
	if err := s.ti.TruncateTo(next); err != nil {
		return err
	}
	if err := s.truncateTxnIndex(next); err != nil {
		return err
	}
	s.cuts.Add(1) // odd: a cut under way
	err = s.log.Truncate(pos)
	if err == nil {
		s.size.Store(pos)
		s.next.Store(next)
	}
	s.cuts.Add(1)
	if err != nil {
		return err
	}
	// Recompute what the dropped batches may have carried.
	_, ts, tsOff, err := s.scanFrom(0, pos, s.base)
	if err != nil {
		return err
	}
	s.setMaxTimestamp(ts, tsOff)
	if _, lp, ok := s.oi.LastEntry(); ok {
		s.bytesSinceIndex = int(pos - int64(lp))
	} else {
		s.bytesSinceIndex = int(pos)
	}
	if pos == 0 {
		s.firstAppendMs = -1
	}
	return nil
}

// positionOf returns the position of the first batch whose last offset is
// >= off, and the offset after the batch before it; (size, next) if none.
func (s *segment) positionOf(off int64) (pos, next int64, err error) {
	limit := s.size.Load()
	eo, p := s.oi.Lookup(off)
	pos, next = int64(p), eo
	if pos == 0 {
		next = s.base
	}
	hs := newHeaderScanner(s.log, limit)
	defer hs.release()
	for pos < limit {
		h, err := hs.header(pos)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: segment %d at position %d: %v", ErrCorruption, s.base, pos, err)
		}
		if h.LastOffset() >= off {
			return pos, next, nil
		}
		next = h.LastOffset() + 1
		pos += int64(h.Size())
	}
	return limit, s.next.Load(), nil
}
