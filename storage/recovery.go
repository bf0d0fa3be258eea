package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/storage/vfs"
)

// RecoveryReport says what [OpenLog] found and repaired. Recovery never
// drops data silently: whatever it cut is counted here and logged.
type RecoveryReport struct {
	Recovered         bool  // the slow path ran (no clean-shutdown marker)
	SegmentsScanned   int   // segments rescanned and validated batch by batch
	TruncatedBytes    int64 // bytes cut from torn or corrupt tails, including dropped segments
	DroppedFromOffset int64 // first offset lost; -1 when nothing was dropped
	DroppedSegments   int   // whole segments removed after a torn tail
	RebuiltIndexes    int   // segments whose indexes were rebuilt from the log
	RemovedLeftovers  int   // .tmp, .deleted, .cleaned, .swap and orphan index files removed
	RebuiltTxnIndexes int   // .txnindex files rewritten from the log (torn, or entries past a cut)
	Duration          time.Duration
}

// OpenLog opens (or creates) the log in o.Dir and recovers it.
//
// Without o.CleanShutdown every segment from the one holding the recovery
// point on is rescanned: each batch is validated (framing, CRC32C, record
// count), the log is cut after the last whole valid batch, later segments
// are dropped and the indexes are rebuilt. Segments below the recovery
// point, and every segment after a clean shutdown, are trusted: their
// indexes are sanity-checked (and rebuilt if missing or corrupt) and only
// the batches after the last index entry are read. Damage found in data
// below the recovery point cannot be a torn write: OpenLog then fails with
// an error wrapping ErrCorruption.
func OpenLog(o LogOptions) (*Log, error) {
	start := time.Now()
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := o.Config.normalized()
	l := &Log{
		dir: o.Dir, topic: o.Topic, partition: o.Partition, fs: o.FS, now: o.Now,
		logger:   o.Logger.With("topic", o.Topic, "partition", o.Partition),
		snapshot: o.ProducerSnapshot, onFailure: o.OnFailure, onTruncate: o.OnTruncate, onRoll: o.OnRoll, deferSync: deferRollSync,
		dirFull: o.DirFull, onNoSpace: o.OnNoSpace,
		files: o.files,
	}
	l.cfg.Store(&cfg)
	l.remoteUploaded.Store(-1)
	l.txns = producer.NewTxns()
	l.firstUnstable.Store(-1)
	if err := mkdirAllDurable(o.FS, o.Dir); err != nil {
		return nil, err
	}
	epochs, err := checkpoint.OpenLeaderEpochCache(o.FS, filepath.Join(o.Dir, LeaderEpochCheckpointFile))
	if err != nil {
		return nil, fmt.Errorf("storage: %s: %w", o.Dir, err)
	}
	l.epochs = epochs
	l.report.DroppedFromOffset = -1
	if err := l.recover(o, &cfg); err != nil {
		return nil, err
	}
	l.report.Duration = time.Since(start)
	l.lastFlushMs.Store(o.Now().UnixMilli())
	if l.report.TruncatedBytes > 0 {
		l.logger.Warn("storage: unclean recovery truncated the log", "dir", o.Dir,
			"recovery_point", o.RecoveryPoint, "from_offset", l.report.DroppedFromOffset,
			"log_end_offset", l.LogEndOffset(), "bytes", l.report.TruncatedBytes,
			"segments_dropped", l.report.DroppedSegments, "segments_rescanned", l.report.SegmentsScanned)
	}
	return l, nil
}

// cleanLeftovers is the one place that removes what interrupted renames
// leave behind: <name>.tmp (an atomic write that never finished),
// <name>.deleted (retention removed the segment), <name>.cleaned and
// <name>.swap (compaction output never swapped in), and index files whose
// .log is gone. It returns the bases of the segments present.
func (l *Log) cleanLeftovers() ([]int64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list %s: %w", l.dir, err)
	}
	// A compaction swap that reached its .log.swap is finished first
	// (cleaner.go); whatever else a cleaning left is removed below.
	if n, err := l.completeSwaps(names); err != nil {
		return nil, err
	} else if n > 0 {
		l.report.RemovedLeftovers += n
		if names, err = l.fs.List(l.dir); err != nil {
			return nil, fmt.Errorf("storage: list %s: %w", l.dir, err)
		}
	}
	logs := map[int64]bool{}
	var bases []int64
	for _, n := range names {
		if b, suf, ok := parseSegmentFileName(n); ok && suf == LogFileSuffix {
			logs[b] = true
			bases = append(bases, b)
		}
	}
	for _, n := range names {
		remove := false
		for _, suf := range []string{TmpFileSuffix, DeletedFileSuffix, CleanedFileSuffix, SwapFileSuffix} {
			if strings.HasSuffix(n, suf) {
				remove = true
			}
		}
		if b, suf, ok := parseSegmentFileName(n); ok && (suf == IndexFileSuffix || suf == TimeIndexFileSuffix || suf == TxnIndexFileSuffix) && !logs[b] {
			remove = true
		}
		if remove {
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil && !isNotExist(err) {
				return nil, fmt.Errorf("storage: remove leftover %s: %w", n, err)
			}
			l.report.RemovedLeftovers++
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// mkdirAllDurable creates dir and any missing parents, then syncs every
// directory that gained an entry, so a new directory is itself durable
// before anything in it can be.
func mkdirAllDurable(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); err == nil {
		return nil
	}
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		created = append(created, d)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("storage: create %s: %w", dir, err)
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := fs.SyncDir(filepath.Dir(created[i])); err != nil {
			return fmt.Errorf("storage: sync %s: %w", filepath.Dir(created[i]), err)
		}
	}
	return nil
}

func isNotExist(err error) bool {
	return errors.Is(err, errNotExist)
}

func (l *Log) recover(o LogOptions, cfg *Config) error {
	bases, err := l.cleanLeftovers()
	if err != nil {
		return err
	}
	var segs []*segment
	fail := func(err error) error {
		for _, s := range segs {
			s.closeFiles()
		}
		return err
	}
	if len(bases) == 0 {
		// A new log: its first segment's files, opened below like any.
		s, err := createSegment(l.fs, l.dir, max(o.LogStartOffset, 0), *cfg)
		if err != nil {
			return err
		}
		s.closeFiles()
		bases = []int64{s.base}
	}
	// The first segment to rescan: the one holding the recovery point.
	scanFrom := len(bases)
	if !o.CleanShutdown {
		l.report.Recovered = true
		scanFrom = max(sort.Search(len(bases), func(i int) bool { return bases[i] > o.RecoveryPoint })-1, 0)
	}
	bp := recoveryBufPool.Get().(*[]byte)
	defer recoveryBufPool.Put(bp)
	rebuild := func(s *segment) (cut, bad int64, err error) {
		// Whatever the index files held (torn, trimmed when sealed) is not
		// trusted: rebuild rewrites every entry. The files themselves are
		// kept, grown back to full size and zeroed (Resize, Reset), unless
		// one was missing, is structurally broken (a torn size stays
		// reported after a Reset) or does not resize: on ext4 here,
		// storing into a freshly created sparse index page costs 1.5-4 ms
		// (the block is allocated at the page fault) and unlinking the old
		// file about 1 ms, which made up most of the 21 s a
		// 2,000-partition recovery took (BenchmarkRecoverAfterCrash
		// kill9=false; 1.3 s after); the kept files' pages are allocated
		// already. The segment is sealed (fsynced, trimmed)
		// again below if it is not the last.
		if s.missingIndex || s.oi.SanityCheck() != nil || s.ti.SanityCheck() != nil ||
			s.oi.Resize(cfg.SegmentIndexBytes) != nil || s.ti.Resize(cfg.SegmentIndexBytes) != nil {
			if err := s.recreateIndexes(cfg.SegmentIndexBytes); err != nil {
				return 0, -1, err
			}
		}
		s.sealed = false
		l.report.RebuiltIndexes++
		return s.rebuild(cfg.IndexIntervalBytes, bp)
	}
	// Segments are opened one at a time and a trusted sealed one goes to
	// the file cache at once (which may close it again), so loading a log
	// of many segments does not hold all their descriptors at once.
	for i, b := range bases {
		last := i == len(bases)-1
		oiMax, tiMax := 0, 0
		if last {
			oiMax, tiMax = cfg.SegmentIndexBytes, cfg.SegmentIndexBytes
		}
		s, err := openSegmentFilesFor(l.fs, l.dir, b, oiMax, tiMax, i >= scanFrom)
		if err != nil {
			return fail(err)
		}
		s.sealed = !last
		segs = append(segs, s)
		if i < scanFrom {
			if !s.missingIndex && s.sanity() == nil && s.loadTrusted() == nil {
				if s.sealed {
					l.cacheSealed(s)
				}
				continue
			}
			// Missing or corrupt index: rebuild it from the log.
			_, bad, err := rebuild(s)
			if err != nil {
				return fail(fmt.Errorf("storage: rebuild index of segment %d: %w", s.base, err))
			}
			if bad >= 0 {
				// Trusted data (flushed, or closed cleanly) cannot hold a
				// torn write: refuse, leaving the log file as found.
				return fail(fmt.Errorf("%w: segment %d: invalid batch at position %d in flushed data (recovery point %d, clean shutdown %v)",
					ErrCorruption, s.base, bad, o.RecoveryPoint, o.CleanShutdown))
			}
			continue
		}
		l.report.SegmentsScanned++
		cut, bad, err := rebuild(s)
		if err != nil {
			return fail(fmt.Errorf("storage: recover segment %d: %w", s.base, err))
		}
		// Segments tile the offsets (invariant 3 in DESIGN.md), so a
		// rescanned segment that ends before the next one begins lost its
		// unsynced tail at a batch boundary, while the next one's file
		// (created before the roll's fsyncs ran: rollsync.go) survived:
		// what follows the hole goes, as after a torn batch. The one roll
		// that leaves a gap between segments (a follower's batch more
		// than 2^31 offsets past the end) makes everything before it
		// durable first; a recovery from a checkpoint older than that
		// roll still cuts the log at it, losing only what lies above the
		// checkpointed recovery point, as any crash may (a follower
		// fetches it again).
		hole := bad < 0 && !last && s.next.Load() < bases[i+1]
		if bad < 0 && !hole {
			continue
		}
		if s.next.Load() < o.RecoveryPoint {
			if hole {
				return fail(fmt.Errorf("%w: segment %d ends at %d, before the next segment at %d, below the recovery point %d",
					ErrCorruption, s.base, s.next.Load(), bases[i+1], o.RecoveryPoint))
			}
			return fail(fmt.Errorf("%w: segment %d: invalid batch at position %d below the recovery point %d",
				ErrCorruption, s.base, bad, o.RecoveryPoint))
		}
		if !hole {
			if err := s.cutTail(); err != nil {
				return fail(fmt.Errorf("storage: cut segment %d: %w", s.base, err))
			}
			l.report.TruncatedBytes += cut
		}
		// Everything after the cut is lost: drop the later segments
		// (not opened yet).
		if l.report.DroppedFromOffset < 0 {
			l.report.DroppedFromOffset = s.next.Load()
		}
		for _, db := range bases[i+1:] {
			d := &segment{fs: l.fs, dir: l.dir, base: db}
			if st, err := l.fs.Stat(d.logPath()); err == nil {
				l.report.TruncatedBytes += st.Size()
			}
			l.report.DroppedSegments++
			for _, p := range []string{d.logPath(), d.indexPath(), d.timeIndexPath(), d.txnIndexPath()} {
				if err := l.fs.Remove(p); err != nil && !isNotExist(err) {
					return fail(fmt.Errorf("storage: drop segment %d: %w", d.base, err))
				}
			}
		}
		break
	}

	// Segments wholly below the log start offset (a deletion whose renames
	// were lost in a crash) and empty segments before the last go now.
	lso := max(o.LogStartOffset, 0)
	for len(segs) > 1 && (segs[0].next.Load() <= lso || segs[0].size.Load() == 0) {
		d := segs[0]
		d.closeFiles()
		for _, p := range []string{d.logPath(), d.indexPath(), d.timeIndexPath(), d.txnIndexPath()} {
			_ = l.fs.Remove(p)
		}
		segs = segs[1:]
	}

	// The last segment becomes the active one again: if recovery dropped
	// the segments after it, its indexes were trimmed when it was sealed.
	act := segs[len(segs)-1]
	if act.sealed {
		if err := act.oi.Resize(cfg.SegmentIndexBytes); err != nil {
			return fail(err)
		}
		if err := act.ti.Resize(cfg.SegmentIndexBytes); err != nil {
			return fail(err)
		}
		act.sealed = false
	}
	// Rebuilt sealed segments: fsync and trim like a roll would.
	for _, s := range segs[:len(segs)-1] {
		if !s.sealed {
			if err := s.seal(); err != nil {
				return fail(fmt.Errorf("storage: seal recovered segment %d: %w", s.base, err))
			}
			l.cacheSealed(s)
		}
	}
	if act.size.Load() > 0 {
		act.firstAppendMs = l.firstBatchTimestamp(act)
	}
	act.jitterMs = jitter(cfg)
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fail(fmt.Errorf("storage: sync %s: %w", l.dir, err))
	}
	l.segs.Store(&segs)

	leo := act.next.Load()
	rp := leo
	if l.report.Recovered {
		// The active segment's rescanned data is not fsynced here: as in
		// Kafka's LogLoader, the recovery point stays where the checkpoint
		// had it (or at the active segment's base: every segment before it
		// was trusted, or rebuilt and sealed, fsynced, above), and moves on
		// with the next flush, roll or close; a crash before that rescans
		// the same data again. After a kill -9 that data is dirty in the
		// page cache: fsyncing it (three fsyncs per partition) made a
		// 2,000-partition recovery take 1.18 s instead of 0.52 s
		// (BenchmarkRecoverAfterCrash kill9=true).
		rp = min(max(o.RecoveryPoint, act.base), leo)
	}
	l.recoveryPoint.Store(rp)
	if !cfg.RemoteStorageEnable && lso < segs[0].base {
		lso = segs[0].base
	}
	lso = min(lso, leo)
	l.logStart.Store(lso)
	l.localStart.Store(max(lso, segs[0].base))
	// The checkpointed high watermark is kept within the log as recovered
	// (a crash may have cut the tail below it; Kafka clamps it the same way).
	l.highWatermark.Store(min(max(o.HighWatermark, lso), leo))
	if err := l.epochs.TruncateFromEnd(leo); err != nil {
		return fail(fmt.Errorf("storage: leader epochs: %w", err))
	}
	if err := l.epochs.TruncateFromStart(lso); err != nil {
		return fail(fmt.Errorf("storage: leader epochs: %w", err))
	}
	if err := l.deleteSnapshotsLocked(-1, leo); err != nil {
		return fail(fmt.Errorf("storage: sync %s: %w", l.dir, err))
	}
	// The transaction table and the aborted-transaction indexes, from the
	// latest transaction snapshot and the log after it (txn.go).
	if err := l.loadTxns(true, false); err != nil {
		return fail(err)
	}
	return nil
}

// firstBatchTimestamp is the time segment.ms counts from after a reopen:
// the first batch's max timestamp (as Kafka), or now if it has none.
func (l *Log) firstBatchTimestamp(s *segment) int64 {
	h, err := readHeader(s.log, 0, s.size.Load())
	if err != nil || h.MaxTimestamp < 0 {
		return l.now().UnixMilli()
	}
	return h.MaxTimestamp
}

var _ = io.EOF
var _ = batch.HeaderSize
