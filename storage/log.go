package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/storage/vfs"
)

// LogOptions configure [OpenLog].
type LogOptions struct {
	Dir       string // the partition directory, <data dir>/<topic>-<partition>
	Topic     string
	Partition int32
	FS        vfs.FS           // nil = vfs.Default
	Config    Config           // zero fields take Kafka's defaults
	Now       func() time.Time // nil = time.Now
	Logger    *slog.Logger     // nil = discard

	RecoveryPoint  int64 // from the manager's checkpoint: everything below is known flushed
	LogStartOffset int64 // from the manager's checkpoint
	// HighWatermark is the high watermark the manager's
	// replication-offset-checkpoint recorded (0 when none); the broker
	// caps it at the log end offset.
	HighWatermark int64
	CleanShutdown bool // the clean-shutdown marker was present: reopen without rescanning

	// ProducerSnapshot is called at each roll with the new segment's base
	// offset; the bytes are written to <base>.snapshot (nil = no snapshot).
	ProducerSnapshot func(nextOffset int64) ([]byte, error)

	// OnFailure is called once when the log latches into its failed state
	// (the Manager takes the whole directory offline).
	OnFailure func(err error)

	// DirFull, if set, is asked before every append: true refuses it with
	// ErrLogDirFull (the Manager's view of the data directory's space).
	DirFull func() bool
	// OnNoSpace is called when a write failed with ENOSPC and was cut back
	// (the log does not latch; the Manager marks the directory full).
	OnNoSpace func(err error)

	// OnTruncate is called after Truncate or TruncateFullyAndStartAt
	// lowered the recovery point, without the log's lock held (the Manager
	// writes its checkpoints).
	OnTruncate func()

	// files, if set, bounds the open files of the log's sealed segments
	// together with the other logs sharing it (the Manager's).
	files *fileCache

	// OnRoll is called after a roll's fsyncs moved the recovery point past
	// the sealed segment (rollsync.go), on the log's syncer goroutine or
	// under the log's lock (a flush that ran them): it must not block or
	// call into the log (the Manager wakes its checkpoint writer).
	OnRoll func()
}

// AppendOptions qualify one [Log.Append].
type AppendOptions struct {
	// LeaderEpoch is stamped into the PartitionLeaderEpoch of each batch
	// a leader appends and recorded in the leader-epoch cache. Follower
	// appends keep the epochs the leader stamped and record those.
	LeaderEpoch int32
	// AssignOffsets is true for leaders (offsets assigned from the log end
	// offset) and false for followers (batches keep their offsets, which
	// must be >= the log end offset and increasing).
	AssignOffsets bool
}

// AppendInfo describes a successful [Log.Append].
type AppendInfo struct {
	FirstOffset, LastOffset int64
	MaxTimestamp            int64
	LogAppendTime           int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset          int64
	Batches                 int
	Bytes                   int
}

// Log is one partition's local log: an ordered list of segments, the last
// of which (the active segment) takes appends.
//
// Thread safety: every method is safe for concurrent use. Mutations take
// mu (the append lock); Read, OffsetForTimestamp and the accessors take no
// lock at all: they load the copy-on-write segment list and the active
// segment's published end.
//
// Buffers: Append mutates the caller's buffer in place (offsets, epochs,
// LogAppendTime) and does not keep it. ReadView regions belong to the log
// and stay readable until Release.
type Log struct {
	dir        string
	topic      string
	partition  int32
	fs         vfs.FS
	now        func() time.Time
	logger     *slog.Logger
	snapshot   func(int64) ([]byte, error)
	onFailure  func(error)
	onTruncate func()
	dirFull    func() bool
	onNoSpace  func(error)
	onRoll     func()
	files      *fileCache // open files of sealed segments; nil: all stay open

	cfg  atomic.Pointer[Config]
	segs atomic.Pointer[[]*segment] // copy-on-write, oldest first; never empty while open

	logStart       atomic.Int64
	localStart     atomic.Int64
	recoveryPoint  atomic.Int64
	remoteUploaded atomic.Int64
	highWatermark  atomic.Int64 // the broker's last published HW, for replication-offset-checkpoint
	lastFlushMs    atomic.Int64
	rolls          atomic.Int64 // segments sealed (IOStats)
	flushes        atomic.Int64 // fsyncs of the active segment by Flush/flush.*
	flushNanos     atomic.Int64
	rollNanos      atomic.Int64 // time rolls of a non-empty segment held the append lock (IOStats)
	failed         atomic.Bool
	closed         atomic.Bool

	// The syncer (rollsync.go): rolls' fsyncs, off the append path.
	syncQMu     sync.Mutex  // guards syncQ and syncRunning
	syncQ       []*rollSync // pending, in roll order
	syncRunning bool        // a syncLoop runs
	syncMu      sync.Mutex  // held while a rollSync runs
	syncWG      sync.WaitGroup
	deferSync   bool // deferRollSync at open

	mu        sync.Mutex // the append lock: guards every mutation below and of the segments' writer state
	failErr   error
	unflushed int64 // messages appended since the last flush
	epochs    *checkpoint.LeaderEpochCache
	report    RecoveryReport

	delMu   sync.Mutex // guards pending
	pending map[*segment]*pendingDeletion

	// Transactions (txn.go).
	txnMu            sync.Mutex     // guards txns; taken inside mu or alone, never the other way
	txns             *producer.Txns // the partition's transactional producers
	firstUnstable    atomic.Int64   // txns.FirstUnstable(): -1 none; published for lock-free LSO
	unreplicatedTxns atomic.Int64   // txns.Unreplicated(): SetHighWatermark's fast path
	txnSnaps         bool           // (mu) a .txnsnapshot exists: write one at each roll and close
}

// Recovery returns what [OpenLog] found and repaired.
func (l *Log) Recovery() RecoveryReport { return l.report }

// Topic returns the log's topic.
func (l *Log) Topic() string { return l.topic }

// Partition returns the log's partition.
func (l *Log) Partition() int32 { return l.partition }

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the log's current configuration.
func (l *Log) Config() Config { return *l.cfg.Load() }

// SetConfig replaces the log's configuration; it applies to the next
// append, roll and retention pass.
func (l *Log) SetConfig(c Config) {
	c = c.normalized()
	l.cfg.Store(&c)
}

func (l *Log) segments() []*segment { return *l.segs.Load() }

func (l *Log) active() *segment {
	s := l.segments()
	return s[len(s)-1]
}

// HighWatermark returns the high watermark last set with
// [Log.SetHighWatermark], or the checkpointed one the log was opened with.
// storage only keeps it for the replication-offset-checkpoint file; the
// broker owns its meaning.
func (l *Log) HighWatermark() int64 { return l.highWatermark.Load() }

// SetHighWatermark records the broker's high watermark, to be written to
// the data directory's replication-offset-checkpoint by the manager's next
// checkpoint (every replica.high.watermark.checkpoint.interval.ms and at
// clean close). Lock-free; safe to call on every change.
//
// It also tells the transaction table: a transaction whose marker the high
// watermark has passed becomes stable (see [Log.LastStableOffset]); that
// takes the table's lock only while such a transaction waits.
func (l *Log) SetHighWatermark(hw int64) {
	l.highWatermark.Store(hw)
	l.txnHighWatermark(hw)
}

// LogStartOffset returns the first offset a consumer may read (local or
// remote).
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LocalLogStartOffset returns the first offset held on local disk.
func (l *Log) LocalLogStartOffset() int64 { return l.localStart.Load() }

// LogEndOffset returns the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 { return l.active().next.Load() }

// RecoveryPoint returns the offset below which everything is fsynced.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// Size returns the bytes of all local segments.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments() {
		n += s.size.Load()
	}
	return n
}

// NumSegments returns the number of local segments.
func (l *Log) NumSegments() int { return len(l.segments()) }

// LeaderEpochs returns the log's leader-epoch cache.
func (l *Log) LeaderEpochs() *checkpoint.LeaderEpochCache { return l.epochs }

// Failed reports whether the log latched into its failed state.
func (l *Log) Failed() bool { return l.failed.Load() }

func (l *Log) usableLocked() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if l.failed.Load() {
		return fmt.Errorf("%w: %v", ErrLogFailed, l.failErr)
	}
	return nil
}

// latch takes the log offline from outside (its data directory failed).
func (l *Log) latch(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed.Load() {
		_ = l.failLocked(err)
	}
}

// writeFailLocked handles a failed write that left nothing visible: out
// of space refuses this append (ErrLogDirFull) and marks the directory
// full without latching the log; any other error latches it.
func (l *Log) writeFailLocked(err error) error {
	if !noSpaceErr(err) {
		return l.failLocked(err)
	}
	if l.onNoSpace != nil {
		l.onNoSpace(fmt.Errorf("storage: %s: %w", l.dir, err))
	}
	return fmt.Errorf("%w: %v", ErrLogDirFull, err)
}

// failLocked latches the log: every later mutation returns ErrLogFailed.
func (l *Log) failLocked(err error) error {
	if !l.failed.Load() {
		l.failErr = err
		l.failed.Store(true)
		l.logger.Error("storage: log failed", "dir", l.dir, "err", err)
		if l.onFailure != nil {
			l.onFailure(fmt.Errorf("storage: %s: %w", l.dir, err))
		}
	}
	return fmt.Errorf("%w: %v", ErrLogFailed, err)
}

var hdrsPool = sync.Pool{New: func() any { h := make([]batch.Header, 0, 16); return &h }}

// Append validates every batch of records (one or more v2 batches, as a
// Produce request carries them), then, only if all are valid, assigns
// offsets in place, writes the whole set with one write to the active
// segment (page cache, no fsync), updates the indexes and publishes the new
// end to readers.
//
// A leader's transactional batch from a producer epoch older than the
// one the partition's transaction table holds (a producer fenced by a
// marker at a bumped epoch) is refused with producer.ErrInvalidProducerEpoch
// before anything is written, whatever the broker's idempotence table says.
//
// Errors: validation errors wrap the kerr error the broker answers with
// (CorruptMessage, InvalidRecord, MessageTooLarge, InvalidTimestamp,
// UnsupportedForMessageFormat, UnsupportedCompressionType,
// RecordListTooLarge) and leave the log untouched; ErrInvalidOffset for
// follower offsets below the end; ErrLogFailed after a write failure (the
// log latches and the file is cut back to its last good size); ErrClosed.
// Not idempotent: each call appends.
func (l *Log) Append(records []byte, o AppendOptions) (AppendInfo, error) {
	info := AppendInfo{LogAppendTime: -1}
	cfg := l.cfg.Load()
	nowMs := l.now().UnixMilli()
	if len(records) == 0 {
		return info, fmt.Errorf("storage: empty record set: %w", kerr.InvalidRecord)
	}
	if int64(len(records)) > cfg.SegmentBytes {
		return info, fmt.Errorf("storage: record set of %d bytes exceeds segment.bytes %d: %w",
			len(records), cfg.SegmentBytes, kerr.RecordListTooLarge)
	}

	// Validate everything before taking the lock: CRC and record framing
	// are the expensive part and need no log state.
	hp := hdrsPool.Get().(*[]batch.Header)
	hdrs := (*hp)[:0]
	defer func() { *hp = hdrs[:0]; hdrsPool.Put(hp) }()
	lim := cfg.batchLimits(nowMs)
	if !o.AssignOffsets {
		// A follower copies what its leader accepted under the leader's
		// clock and limits (as Kafka: no timestamp or size checks).
		lim.SkipTimestampCheck, lim.MaxBatchBytes = true, 0
	}
	var count int64
	var markers []markerAt // control batches carrying transaction markers (follower appends)
	txnal := false         // a transactional batch or a marker is among them
	for rest := records; len(rest) > 0; {
		first, r, err := batch.Split(rest)
		if err != nil {
			return info, wrapBatchErr(err)
		}
		var h batch.Header
		if o.AssignOffsets {
			h, err = batch.Validate(first, lim)
			if err == nil && cfg.Compact() {
				err = checkKeyed(first, l.topic, l.partition)
			}
		} else {
			// A follower copies the leader's log, which compaction may
			// have left with offset-delta gaps and empty batches.
			h, err = batch.CheckStored(first)
		}
		if err != nil {
			return info, wrapBatchErr(err)
		}
		if !o.AssignOffsets && len(hdrs) > 0 && h.BaseOffset <= hdrs[len(hdrs)-1].LastOffset() {
			return info, fmt.Errorf("%w: batch at %d overlaps the previous one", ErrInvalidOffset, h.BaseOffset)
		}
		if h.Transactional() && h.HasProducerID() {
			txnal = true
			if h.Control() {
				// Only replication brings control batches here: Validate
				// refuses a client's (INVALID_RECORD).
				m, ok, err := parseMarker(first)
				if err != nil {
					return info, err
				}
				if ok {
					markers = append(markers, markerAt{i: len(hdrs), m: m})
				}
			}
		}
		hdrs = append(hdrs, h)
		count += int64(h.LastOffsetDelta) + 1
		rest = r
	}
	var check func() error
	if txnal && o.AssignOffsets {
		check = func() error { return l.checkTxnEpochs(hdrs) }
	}
	return l.appendValidated(records, hdrs, markers, txnal, count, o, nowMs, check)
}

// appendValidated is Append after validation: records holds the batches
// hdrs describes (count offsets; markers and txnal as Append found them).
// check, if set, runs under the lock before anything is written and
// refuses the append with its error (AppendMarker's fencing).
func (l *Log) appendValidated(records []byte, hdrs []batch.Header, markers []markerAt, txnal bool, count int64,
	o AppendOptions, nowMs int64, check func() error) (AppendInfo, error) {
	info := AppendInfo{LogAppendTime: -1}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return info, err
	}
	if l.dirFull != nil && l.dirFull() {
		return info, fmt.Errorf("%w: %s", ErrLogDirFull, filepath.Dir(l.dir))
	}
	if l.deferSync {
		if err := l.drainSyncLocked(); err != nil {
			return info, err
		}
	}
	if check != nil {
		if err := check(); err != nil {
			return info, err
		}
	}
	cfg := l.cfg.Load()
	act := l.active()
	first := act.next.Load()
	last := first + count - 1
	if !o.AssignOffsets {
		if hdrs[0].BaseOffset < first {
			return info, fmt.Errorf("%w: follower batch at %d below log end offset %d", ErrInvalidOffset, hdrs[0].BaseOffset, first)
		}
		first, last = hdrs[0].BaseOffset, hdrs[len(hdrs)-1].LastOffset()
	}
	if last-first > math.MaxInt32 {
		return info, fmt.Errorf("%w: record set spans %d offsets", ErrInvalidOffset, last-first+1)
	}
	if l.shouldRollLocked(act, cfg, len(records), first, last, nowMs) {
		// A follower's batch past the log end (a compacted leader's gap)
		// goes into a segment at the log end, the gap inside it, as a
		// cleaned segment holds gaps: segments tile the offsets, which
		// recovery relies on to tell a lost unsynced tail (rollsync.go).
		// Only a gap the relative offsets cannot span starts the new
		// segment past it, at its first offset (Kafka's roll offset).
		base := first
		if end := act.next.Load(); first > end && last-end <= math.MaxInt32 {
			base = end
		}
		if err := l.rollLocked(base); err != nil {
			return info, err
		}
		act = l.active()
	}

	// Patch in place. Base offset and leader epoch lie outside the CRC;
	// LogAppendTime rewrites timestamps and recomputes it.
	next := first
	pos := 0
	for i := range hdrs {
		h := &hdrs[i]
		b := records[pos : pos+h.Size()]
		if o.AssignOffsets {
			batch.SetBaseOffset(b, next)
			batch.SetPartitionLeaderEpoch(b, o.LeaderEpoch)
			h.BaseOffset, h.PartitionLeaderEpoch = next, o.LeaderEpoch
			if cfg.TimestampType == logAppendTime {
				batch.SetLogAppendTime(b, nowMs)
				h.MaxTimestamp = nowMs
				info.LogAppendTime = nowMs
			}
		}
		next = h.LastOffset() + 1
		pos += h.Size()
		if h.MaxTimestamp > info.MaxTimestamp || i == 0 {
			info.MaxTimestamp = h.MaxTimestamp
		}
	}

	// The first transactional batch a log ever gets is preceded by a
	// durable transaction snapshot (of an empty table): a log without one
	// has nothing to replay at open (txn.go).
	if txnal && !l.txnSnaps {
		if err := l.writeTxnSnapshotLocked(first, true); err != nil {
			return info, l.writeFailLocked(err)
		}
	}

	// Leader epochs first: a failure here leaves nothing visible, and an
	// entry for offsets that never got written is cut by recovery
	// (TruncateFromEnd at the log end).
	if err := l.recordEpochsLocked(hdrs); err != nil {
		// The cache changes in memory only once its file is written, so
		// out of space leaves it as it was: refused, not latched.
		return info, l.writeFailLocked(err)
	}

	// One write at the published end. A failure (or short write) latches
	// the log; the tail is cut back so a reopen without recovery would not
	// find it, and readers never saw it since size was not published.
	start := act.size.Load()
	n, err := act.log.WriteAt(records, start)
	if err == nil && n != len(records) {
		err = io.ErrShortWrite
	}
	if err != nil {
		err = fmt.Errorf("append to %s: %w", act.logPath(), err)
		if terr := act.log.Truncate(start); terr != nil {
			return info, l.failLocked(errors.Join(err, terr))
		}
		return info, l.writeFailLocked(err)
	}
	pos = 0
	for i := range hdrs {
		if err := act.observeBatch(&hdrs[i], start+int64(pos), cfg.IndexIntervalBytes); err != nil {
			act.tailDrop() // the batches it may have recorded are cut
			_ = act.log.Truncate(start)
			return info, l.failLocked(fmt.Errorf("index %s: %w", act.logPath(), err))
		}
		act.tailAdd(&hdrs[i], start+int64(pos))
		pos += hdrs[i].Size()
	}
	// The transaction table and the aborted-transaction index before the
	// new end is published: a reader that sees a transactional batch sees
	// the first unstable offset it set. A failure to write an index entry
	// latches the log like an offset-index failure.
	if txnal {
		if err := l.applyTxnsLocked(act, hdrs, markers); err != nil {
			act.tailDrop()
			_ = act.log.Truncate(start)
			return info, l.failLocked(fmt.Errorf("transaction index %s: %w", act.logPath(), err))
		}
	}
	if act.firstAppendMs < 0 {
		act.firstAppendMs = nowMs
	}
	// Publish: size before next, so a reader that sees the new end offset
	// also sees the bytes (readers load next, then size).
	act.size.Store(start + int64(len(records)))
	act.next.Store(last + 1)

	l.unflushed += count
	if l.unflushed >= cfg.FlushMessages {
		if err := l.flushLocked(); err != nil {
			return info, err
		}
	}
	info.FirstOffset, info.LastOffset = first, last
	info.LogStartOffset = l.logStart.Load()
	info.Batches, info.Bytes = len(hdrs), len(records)
	return info, nil
}

// wrapBatchErr makes sure a validation error maps to a Kafka code.
func wrapBatchErr(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Errorf("storage: %w", err)
	}
	return fmt.Errorf("storage: %w: %w", kerr.CorruptMessage, err)
}

func (l *Log) recordEpochsLocked(hdrs []batch.Header) error {
	latest, _, ok := l.epochs.Latest()
	for i := range hdrs {
		e := hdrs[i].PartitionLeaderEpoch
		if e < 0 || (ok && e <= latest) {
			continue
		}
		if err := l.epochs.Assign(e, hdrs[i].BaseOffset); err != nil {
			return fmt.Errorf("leader epoch cache: %w", err)
		}
		latest, ok = e, true
	}
	return nil
}

// shouldRollLocked applies Kafka's roll rules to an append of size bytes
// covering offsets [first, last].
func (l *Log) shouldRollLocked(act *segment, cfg *Config, size int, first, last, nowMs int64) bool {
	if last-act.base > math.MaxInt32 || first < act.base {
		return true // relative offsets must fit 4 bytes
	}
	if act.size.Load() == 0 {
		return false
	}
	if act.size.Load()+int64(size) > cfg.SegmentBytes {
		return true
	}
	if act.firstAppendMs >= 0 && nowMs-act.firstAppendMs > cfg.SegmentMs-act.jitterMs {
		return true
	}
	return act.oi.IsFull() || act.ti.IsFull()
}

// Roll seals the active segment (if it holds anything) and starts a new
// one at the log end offset. Idempotent on an empty active segment.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	return l.rollLocked(l.active().next.Load())
}

// rollLocked seals the active segment and appends a new one at newBase.
// The fsyncs are not the append path's (rollsync.go): the old segment is
// sealed unsynced, the producer and transaction snapshots at newBase are
// taken under the lock, the new segment's files are created and the new
// list published; a rollSync then makes the old segment, the snapshots
// and the directory durable, in that order, and only then moves the
// recovery point to the old end.
func (l *Log) rollLocked(newBase int64) error {
	cfg := l.cfg.Load()
	act := l.active()
	if act.size.Load() == 0 {
		if act.base == newBase {
			return nil
		}
		// Replace the empty active segment with one at newBase: a gap
		// between segments, so the sealed ones are made durable first
		// (rollsync.go: recovery treats a gap after an unsynced segment
		// as its lost tail).
		if err := l.drainSyncLocked(); err != nil {
			return err
		}
		ns, err := createSegment(l.fs, l.dir, newBase, *cfg)
		if err != nil {
			return l.failLocked(err)
		}
		ns.jitterMs = jitter(cfg)
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.failLocked(err)
		}
		old := l.segments()
		list := append(append([]*segment(nil), old[:len(old)-1]...), ns)
		l.segs.Store(&list)
		if act.renameDeleted() == nil {
			l.scheduleDeleteLocked(act, 0)
		}
		l.updateLocalStartLocked()
		return nil
	}
	end := act.next.Load()
	// The roll's time under the append lock (IOStats): the appends of this
	// partition wait that long. Its fsyncs are not in it, except where the
	// roll leaves a gap between segments (newBase past the end: a gap the
	// relative offsets cannot span), which it makes durable before it
	// returns.
	rollStart := time.Now()
	defer func() { l.rollNanos.Add(int64(time.Since(rollStart))) }()
	// Out of space before the new list is published leaves a state the
	// next roll completes (the seal is a no-op on a sealed segment, whose
	// fsyncs are still owed; the snapshots and the new segment's files are
	// taken again): the directory is marked full instead of the log
	// latching.
	wasSealed := act.sealed
	if err := act.sealUnsynced(); err != nil {
		return l.writeFailLocked(fmt.Errorf("seal segment %d: %w", act.base, err))
	}
	if !wasSealed {
		l.rolls.Add(1)
	}
	j := &rollSync{seg: act, end: end, at: newBase}
	if l.snapshot != nil {
		data, err := l.snapshot(newBase)
		if err != nil {
			return l.writeFailLocked(fmt.Errorf("producer snapshot at %d: %w", newBase, err))
		}
		j.snap = data
	}
	if l.txnSnaps {
		// Kafka's producer.id.expiration.ms (its default) for the
		// transaction table too, at each roll: producers without an open
		// transaction idle that long are forgotten (their fencing state
		// with them), those with one never.
		l.txnMu.Lock()
		l.txns.RemoveExpired(l.now().UnixMilli(), producer.DefaultExpirationMs)
		j.txnSnap = l.txns.Snapshot(newBase)
		l.txnMu.Unlock()
	}
	// The syncer's hold on the old segment's files: neither the file
	// cache nor a deletion closes them under its fsyncs.
	if err := act.acquire(); err != nil {
		return l.failLocked(fmt.Errorf("seal segment %d: %w", act.base, err))
	}
	ns, err := createSegment(l.fs, l.dir, newBase, *cfg)
	if err != nil {
		act.release()
		return l.writeFailLocked(err)
	}
	ns.jitterMs = jitter(cfg)
	old := l.segments()
	list := append(append(make([]*segment, 0, len(old)+1), old...), ns)
	l.segs.Store(&list)
	l.cacheSealed(act)
	l.unflushed = 0
	l.lastFlushMs.Store(l.now().UnixMilli())
	l.enqueueSyncLocked(j)
	if newBase != end {
		return l.drainSyncLocked()
	}
	return nil
}

// IOStats are a log's cumulative roll and flush counts since it opened
// (for metrics).
type IOStats struct {
	Rolls        int64   // segments sealed
	RollSeconds  float64 // time rolls held the append lock (their fsyncs run after it, rollsync.go)
	Flushes      int64   // fsyncs of the active segment (flush.messages, flush.ms, Flush)
	FlushSeconds float64 // time those fsyncs took
}

// IOStats returns the log's roll and flush counters. Lock-free.
func (l *Log) IOStats() IOStats {
	return IOStats{Rolls: l.rolls.Load(), RollSeconds: float64(l.rollNanos.Load()) / 1e9,
		Flushes: l.flushes.Load(), FlushSeconds: float64(l.flushNanos.Load()) / 1e9}
}

func jitter(cfg *Config) int64 {
	if cfg.SegmentJitterMs <= 0 {
		return 0
	}
	return rand.Int64N(cfg.SegmentJitterMs)
}

// Flush fsyncs the active segment and its indexes and advances the
// recovery point to the log end offset (sealed segments were fsynced when
// they rolled). Idempotent.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	return l.flushLocked()
}

func (l *Log) flushLocked() error {
	// The sealed segments first: the recovery point moves past them too.
	if err := l.drainSyncLocked(); err != nil {
		return err
	}
	act := l.active()
	end := act.next.Load()
	if end > l.recoveryPoint.Load() || l.unflushed > 0 {
		start := time.Now()
		if err := act.sync(); err != nil {
			return l.failLocked(fmt.Errorf("fsync segment %d: %w", act.base, err))
		}
		l.flushes.Add(1)
		l.flushNanos.Add(int64(time.Since(start)))
	}
	if end > l.recoveryPoint.Load() {
		l.recoveryPoint.Store(end)
	}
	l.unflushed = 0
	l.lastFlushMs.Store(l.now().UnixMilli())
	return nil
}

// maybeFlushByTime flushes when flush.ms has passed since the last flush
// and something is unflushed (called by the Manager's flush loop).
func (l *Log) maybeFlushByTime(now time.Time) error {
	cfg := l.cfg.Load()
	if cfg.FlushMs == math.MaxInt64 || now.UnixMilli()-l.lastFlushMs.Load() < cfg.FlushMs {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() || l.failed.Load() || l.unflushed == 0 {
		return nil
	}
	return l.flushLocked()
}

// Close flushes the log and closes its files and mappings (files under an
// open ReadView close when it is released). Idempotent.
func (l *Log) Close() error {
	defer l.syncWG.Wait() // after the unlock: a failed rollSync latches under mu
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return nil
	}
	var err error
	if !l.failed.Load() {
		err = l.flushLocked()
	}
	if err == nil && !l.failed.Load() {
		err = l.writeShutdownSnapshotLocked()
	}
	if err == nil && !l.failed.Load() && l.txnSnaps {
		// The transaction table at the log end, so the next open replays
		// nothing.
		leo := l.active().next.Load()
		if offs := l.snapshotOffsetsOf(TxnSnapshotFileSuffix); len(offs) == 0 || offs[len(offs)-1] != leo {
			err = l.writeTxnSnapshotLocked(leo, true)
		}
	}
	l.closed.Store(true)
	l.drainDeletions()
	for _, s := range l.segments() {
		s.drop()
	}
	return err
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	cerr := l.Close()
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("storage: delete %s: %w", l.dir, err)
	}
	if errors.Is(cerr, ErrLogFailed) {
		return nil
	}
	return cerr
}

func (l *Log) updateLocalStartLocked() {
	ls := l.logStart.Load()
	if b := l.segments()[0].base; b > ls {
		ls = b
	}
	if ls > l.localStart.Load() || l.localStart.Load() > l.LogEndOffset() {
		l.localStart.Store(ls)
	}
}

func (l *Log) snapshotPath(off int64) string {
	return filepath.Join(l.dir, SegmentFileName(off, SnapshotFileSuffix))
}

// writeSnapshotLocked writes <off>.snapshot atomically (tmp, fsync,
// rename; the caller syncs the directory) and keeps only the latest few.
func (l *Log) writeSnapshotLocked(off int64) error {
	data, err := l.snapshot(off)
	if err != nil {
		return fmt.Errorf("producer snapshot at %d: %w", off, err)
	}
	if data == nil {
		return nil
	}
	return l.writeSnapshotFile(off, data)
}

// writeSnapshotFile writes data as <off>.snapshot (tmp, fsync, rename; the
// directory's fsync is the caller's) and prunes the old snapshots. Under
// Log.mu or the syncer's syncMu: whatever else writes or prunes snapshots
// (a truncation, a restart, a close) runs the pending rollSyncs first.
func (l *Log) writeSnapshotFile(off int64, data []byte) error {
	path := l.snapshotPath(off)
	// The directory fsync is the caller's: a roll syncs the snapshot's
	// rename with its new segment's files, a clean close right after.
	if err := vfs.WriteFileAtomicDeferDirSync(l.fs, path, data); err != nil {
		return fmt.Errorf("producer snapshot at %d: %w", off, err)
	}
	offs := l.snapshotOffsets()
	// A remote-storage log keeps the snapshots its uploads still need:
	// each segment is uploaded with the snapshot at its end, so those
	// above the remote-uploaded offset stay until their segment is up.
	uploaded := int64(1 << 62)
	if up := l.remoteUploaded.Load(); l.cfg.Load().RemoteStorageEnable && up >= 0 {
		uploaded = up // -1: no uploader runs for this log
	}
	for len(offs) > keepSnapshots && offs[0] <= uploaded {
		_ = l.fs.Remove(l.snapshotPath(offs[0]))
		offs = offs[1:]
	}
	return nil
}

// writeShutdownSnapshotLocked writes the producer snapshot at the log end
// when the log closes cleanly, as Kafka's UnifiedLog.close
// (producerStateManager.takeSnapshot): the next open restores it and
// replays nothing, instead of every batch header of the active segment
// (about 2 s per GiB of 100-byte batches). The state is exact at the log
// end even with an append between its write and its producer Tx commit
// (producer.State.SnapshotAt). A failure is a disk fault like any other
// at close: Close returns it (so the Manager writes no clean-shutdown
// marker); the data is flushed already, and the next open replays.
func (l *Log) writeShutdownSnapshotLocked() error {
	if l.snapshot == nil {
		return nil
	}
	leo := l.active().next.Load()
	if offs := l.snapshotOffsets(); len(offs) > 0 && offs[len(offs)-1] == leo {
		return nil // a roll at the log end wrote it already; nothing appended since
	}
	err := l.writeSnapshotLocked(leo)
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		return fmt.Errorf("storage: %s: producer snapshot at close: %w", l.dir, err)
	}
	return nil
}

// keepSnapshots is how many producer snapshots a log keeps (a
// remote-storage log keeps more: see writeSnapshotLocked).
const keepSnapshots = 2

// snapshotOffsets lists the offsets of the producer snapshots, ascending.
func (l *Log) snapshotOffsets() []int64 { return l.snapshotOffsetsOf(SnapshotFileSuffix) }

// snapshotOffsetsOf lists the offsets of the files with suffix suf
// (producer or transaction snapshots), ascending.
func (l *Log) snapshotOffsetsOf(suf string) []int64 {
	names, _ := l.fs.List(l.dir)
	var offs []int64
	for _, n := range names {
		if b, s, ok := parseSegmentFileName(n); ok && s == suf {
			offs = append(offs, b)
		}
	}
	return offs
}

// deleteSnapshotsLocked removes producer and transaction snapshots with
// offset > above (truncation) or, keeping the latest, with offset < below
// (segments deleted). A removal above is made durable (directory fsync)
// before the log writes a new history over the cut: a crash must not bring
// back a snapshot of the old one, which the next open would restore
// (found by the transaction property test: an open transaction of the cut
// history came back). Only that fsync's error is returned.
func (l *Log) deleteSnapshotsLocked(below, above int64) error {
	cut := false
	for _, suf := range []string{SnapshotFileSuffix, TxnSnapshotFileSuffix} {
		offs := l.snapshotOffsetsOf(suf)
		for i, o := range offs {
			if o > above || (o < below && i < len(offs)-1) {
				if l.fs.Remove(filepath.Join(l.dir, SegmentFileName(o, suf))) == nil && o > above {
					cut = true
				}
			}
		}
	}
	if cut {
		return l.fs.SyncDir(l.dir)
	}
	return nil
}

// LatestProducerSnapshot returns the newest producer snapshot (ok=false if
// there is none). The returned bytes are the caller's.
func (l *Log) LatestProducerSnapshot() (offset int64, data []byte, ok bool, err error) {
	offs := l.snapshotOffsets()
	if len(offs) == 0 {
		return 0, nil, false, nil
	}
	off := offs[len(offs)-1]
	f, err := l.fs.Open(l.snapshotPath(off))
	if err != nil {
		return 0, nil, false, fmt.Errorf("storage: open snapshot: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, nil, false, fmt.Errorf("storage: stat snapshot: %w", err)
	}
	data = make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, false, fmt.Errorf("storage: read snapshot: %w", err)
	}
	return off, data, true, nil
}
