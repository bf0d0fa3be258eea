package storage

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/storage/vfs"
)

// Transactions, the partition side (Kafka's UnifiedLog with its
// ProducerStateManager's transaction part). The log owns a
// producer.Txns, fed under its append lock by every append:
//
//   - a transactional data batch (attribute 0x10), leader's or follower's,
//     opens its producer's transaction at its offset;
//   - a control batch (0x30) carrying a COMMIT or ABORT marker closes it:
//     the leader writes one with [Log.AppendMarker] (fencing checked under
//     the lock), a follower copies the leader's byte for byte through
//     Append, which decodes its control record;
//   - an ABORT appends an entry to the active segment's .txnindex
//     (txnindex.go);
//   - a leader's transactional batch from an epoch older than the table's
//     (its producer fenced by a marker at a bumped epoch) is refused.
//
// From the table the log publishes the first unstable offset (an atomic:
// [Log.LastStableOffset] costs two loads on every fetch): the earliest
// open transaction, or completed one whose marker the high watermark has
// not passed ([Log.SetHighWatermark] releases those).
//
// Persistence. The table is written as <offset>.txnsnapshot (format in
// storage/producer/txns_snapshot.go) at each roll and clean close, once the
// log has a first one; the first is written, durably, before the first
// transactional batch or marker ever reaches the log. So a log without any
// .txnsnapshot holds no transactional batch and opens with nothing to
// replay, and a log with one opens from the latest and replays the batches
// after it (after a clean close: none; after a crash: the active segment),
// rebuilding the .txnindex entries of the markers it replays
// (Log.loadTxns). Truncation restores the latest snapshot at or below the
// new end and replays from it; a full truncation empties the table.
//
// Lock order: Log.mu → Log.txnMu (a leaf; SetHighWatermark and the
// accessors take txnMu alone).

// AppendMarker writes transaction marker m as a control batch (attributes
// transactional|control, one record: kmsg.ControlRecordKey COMMIT or ABORT
// and kmsg.EndTxnMarker with the coordinator epoch) at the log end, leader
// epoch stamped, and closes the producer's open transaction; an ABORT adds
// the transaction to the segment's aborted-transaction index. A marker for
// a producer with no open transaction is written all the same (Kafka's
// rule: a retried or late marker is harmless).
//
// Errors: [producer.ErrInvalidProducerEpoch] (wraps
// kerr.InvalidProducerEpoch) for a producer epoch older than the
// producer's; [producer.ErrTransactionCoordinatorFenced] (wraps
// kerr.TransactionCoordinatorFenced) for a coordinator epoch older than
// the producer's last marker's; nothing is written then. Otherwise Append's
// (ErrLogFailed, ErrLogDirFull, ErrClosed). Not idempotent: each call
// writes a marker.
//
// The broker's idempotence table should see the marker too
// (producer.State.UpdateMarker), so that a fencing marker's epoch refuses
// the fenced producer's later batches.
func (l *Log) AppendMarker(m producer.Marker, leaderEpoch int32) (AppendInfo, error) {
	info := AppendInfo{LogAppendTime: -1}
	if m.ProducerID < 0 {
		return info, fmt.Errorf("storage: marker for producer id %d: %w", m.ProducerID, kerr.InvalidRecord)
	}
	nowMs := l.now().UnixMilli()
	rec := buildMarker(m, leaderEpoch, nowMs)
	h, err := batch.ParseHeader(rec)
	if err != nil {
		return info, err
	}
	hdrs := []batch.Header{h}
	markers := []markerAt{{i: 0, m: m}}
	return l.appendValidated(rec, hdrs, markers, true, 1, AppendOptions{LeaderEpoch: leaderEpoch, AssignOffsets: true}, nowMs, func() error {
		l.txnMu.Lock()
		defer l.txnMu.Unlock()
		if err := l.txns.CheckMarker(m); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		return nil
	})
}

// checkTxnEpochs refuses a leader append holding a transactional batch of
// a producer epoch older than the table's (Kafka's checkProducerEpoch; the
// broker's idempotence table should have refused it first, if it saw the
// fencing marker). Log.mu held.
func (l *Log) checkTxnEpochs(hdrs []batch.Header) error {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	for i := range hdrs {
		h := &hdrs[i]
		if !h.Transactional() || h.Control() || !h.HasProducerID() {
			continue
		}
		if p, ok := l.txns.Producer(h.ProducerID); ok && h.ProducerEpoch < p.Epoch {
			return fmt.Errorf("storage: %w: transactional batch of producer %d at epoch %d, fenced at epoch %d",
				producer.ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, p.Epoch)
		}
	}
	return nil
}

// markerAt is a transaction marker found at hdrs[i] of an append.
type markerAt struct {
	i int
	m producer.Marker
}

// buildMarker encodes m as a control batch at offset 0 (the append
// assigns it), with kmsg's encodings of the control record key and value.
func buildMarker(m producer.Marker, leaderEpoch int32, nowMs int64) []byte {
	typ := kmsg.ControlRecordKeyTypeAbort
	if m.Commit {
		typ = kmsg.ControlRecordKeyTypeCommit
	}
	key := (&kmsg.ControlRecordKey{Version: 0, Type: typ}).AppendTo(nil)
	val := (&kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: m.CoordinatorEpoch}).AppendTo(nil)
	b := batch.NewBuilder(batch.Header{
		PartitionLeaderEpoch: leaderEpoch,
		Attributes:           markerAttributes,
		FirstTimestamp:       nowMs,
		MaxTimestamp:         nowMs,
		ProducerID:           m.ProducerID,
		ProducerEpoch:        m.ProducerEpoch,
		BaseSequence:         -1,
	})
	b.Add(batch.Record{Key: key, Value: val})
	out, _ := b.AppendTo(nil) // uncompressed: cannot fail
	return out
}

// markerAttributes are a transaction marker batch's: transactional (0x10)
// and control (0x20), no codec, CreateTime.
const markerAttributes = 0x30

// parseMarker decodes the transaction marker of control batch b (a whole
// batch). ok is false for a control batch that is not a COMMIT or ABORT
// marker (KRaft's control records, say), which transactions ignore.
func parseMarker(b []byte) (m producer.Marker, ok bool, err error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return m, false, err
	}
	if !h.Control() || !h.Transactional() || !h.HasProducerID() {
		return m, false, nil
	}
	m.ProducerID, m.ProducerEpoch = h.ProducerID, h.ProducerEpoch
	first := true
	err = batch.Records(b, func(r batch.Record) error {
		if !first {
			return nil
		}
		first = false
		var k kmsg.ControlRecordKey
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("control record key: %w", err)
		}
		switch k.Type {
		case kmsg.ControlRecordKeyTypeAbort:
		case kmsg.ControlRecordKeyTypeCommit:
			m.Commit = true
		default:
			return nil
		}
		var v kmsg.EndTxnMarker
		if err := v.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("end transaction marker: %w", err)
		}
		m.CoordinatorEpoch = v.CoordinatorEpoch
		ok = true
		return nil
	})
	if err != nil {
		return m, false, fmt.Errorf("storage: control batch at %d: %w: %w", h.BaseOffset, kerr.CorruptMessage, err)
	}
	return m, ok, nil
}

// FirstUnstableOffset returns the first offset of the earliest open
// transaction, or of the earliest completed one whose marker the high
// watermark has not passed yet, but not below the log start offset (as
// Kafka's updateFirstUnstableOffset: DeleteRecords or retention may have
// removed the transaction's first batches); ok is false when there is
// none. Lock-free.
func (l *Log) FirstUnstableOffset() (offset int64, ok bool) {
	f := l.firstUnstable.Load()
	if f < 0 {
		return -1, false
	}
	return max(f, l.logStart.Load()), true
}

// LastStableOffset returns min(first unstable offset, high watermark),
// with the high watermark last given to [Log.SetHighWatermark]: where a
// read_committed fetch stops. Lock-free: three atomic loads.
func (l *Log) LastStableOffset() int64 {
	hw := l.highWatermark.Load()
	if f, ok := l.FirstUnstableOffset(); ok && f < hw {
		return f
	}
	return hw
}

// OngoingTxn returns the first offset of producer id's open transaction on
// this partition (ok false: none), for KIP-890 part 1: the broker refuses
// a transactional produce for a partition the coordinator did not add
// while no transaction is open here. Takes only the transaction table's
// small lock.
func (l *Log) OngoingTxn(producerID int64) (firstOffset int64, ok bool) {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	return l.txns.Ongoing(producerID)
}

// TxnProducers returns the transactional state of every producer the log
// knows (DescribeProducers), by ascending producer id.
func (l *Log) TxnProducers() []producer.TxnProducer {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	return l.txns.Producers()
}

// publishTxnsLocked publishes the table's first unstable offset. txnMu
// held.
func (l *Log) publishTxnsLocked() {
	l.firstUnstable.Store(l.txns.FirstUnstable())
	l.unreplicatedTxns.Store(int64(l.txns.Unreplicated()))
}

// txnHighWatermark tells the table about a new high watermark, when a
// completed transaction waits for one (SetHighWatermark).
func (l *Log) txnHighWatermark(hw int64) {
	if l.unreplicatedTxns.Load() == 0 {
		return
	}
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	if l.txns.OnHighWatermark(hw) {
		l.publishTxnsLocked()
	}
}

// applyTxnsLocked records an append's transactional batches and markers,
// written to act at the offsets in hdrs, and appends the index entries of
// its aborts. Log.mu held; called before the append is published.
func (l *Log) applyTxnsLocked(act *segment, hdrs []batch.Header, markers []markerAt) error {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	l.txns.OnHighWatermark(l.highWatermark.Load())
	mi := 0
	var err error
	for i := range hdrs {
		h := &hdrs[i]
		if mi < len(markers) && markers[mi].i == i {
			c := l.txns.ApplyMarker(markers[mi].m, h.BaseOffset, h.MaxTimestamp)
			mi++
			if c.Aborted && err == nil {
				err = act.appendAborted(abortedOf(c))
			}
			continue
		}
		l.txns.ApplyBatch(*h, h.MaxTimestamp)
	}
	l.publishTxnsLocked()
	return err
}

func abortedOf(c producer.CompletedTxn) AbortedTxn {
	return AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset, LastOffset: c.LastOffset, LastStableOffset: c.LastStableOffset}
}

func (l *Log) txnSnapshotPath(off int64) string {
	return filepath.Join(l.dir, SegmentFileName(off, TxnSnapshotFileSuffix))
}

// writeTxnSnapshotLocked writes <off>.txnsnapshot atomically (the
// directory fsync is the caller's unless syncDir) and keeps the latest
// keepSnapshots. Log.mu held; the table must be at off.
func (l *Log) writeTxnSnapshotLocked(off int64, syncDir bool) error {
	l.txnMu.Lock()
	data := l.txns.Snapshot(off)
	l.txnMu.Unlock()
	if err := l.writeTxnSnapshotFile(off, data, syncDir); err != nil {
		return err
	}
	l.txnSnaps = true
	return nil
}

// writeTxnSnapshotFile writes data as <off>.txnsnapshot and prunes the old
// ones; under Log.mu or the syncer's syncMu (see writeSnapshotFile).
func (l *Log) writeTxnSnapshotFile(off int64, data []byte, syncDir bool) error {
	write := vfs.WriteFileAtomicDeferDirSync
	if syncDir {
		write = vfs.WriteFileAtomic
	}
	if err := write(l.fs, l.txnSnapshotPath(off), data); err != nil {
		return fmt.Errorf("transaction snapshot at %d: %w", off, err)
	}
	offs := l.snapshotOffsetsOf(TxnSnapshotFileSuffix)
	for len(offs) > keepSnapshots {
		_ = l.fs.Remove(l.txnSnapshotPath(offs[0]))
		offs = offs[1:]
	}
	return nil
}

// latestTxnSnapshot restores the newest of the .txnsnapshot files at
// offsets offs (ascending). exists is false when there is none; err
// (wrapping producer.ErrCorruptSnapshot, or the read's) when the newest
// does not restore.
func (l *Log) latestTxnSnapshot(offs []int64) (t *producer.Txns, off int64, exists bool, err error) {
	if len(offs) == 0 {
		return nil, 0, false, nil
	}
	off = offs[len(offs)-1]
	b, err := vfs.ReadFile(l.fs, l.txnSnapshotPath(off), 1<<30)
	if err != nil {
		return nil, off, true, err
	}
	t, at, err := producer.RestoreTxns(b)
	if err == nil && at != off {
		err = fmt.Errorf("%w: %s holds offset %d", producer.ErrCorruptSnapshot, l.txnSnapshotPath(off), at)
	}
	if err != nil {
		return nil, off, true, err
	}
	return t, off, true, nil
}

// loadTxns rebuilds the transaction table when the log opens (rebuild:
// the .txnindex files are made to match the log) or after a truncation
// (the indexes were cut already; hadTxns: the log had transaction
// snapshots before): restore the latest snapshot, replay the log after
// it. A snapshot or index that does not decode, or a truncation below
// every snapshot the log kept, costs a replay from the local log start.
// Log.mu held (or the log not yet published).
func (l *Log) loadTxns(rebuild, hadTxns bool) error {
	segs := l.segments()
	badIndex := false
	// One listing says which segments have an index file (most have none:
	// opening each to find out would cost a failed open per segment at
	// every start) and where the snapshots are.
	names, err := l.fs.List(l.dir)
	if err != nil {
		return fmt.Errorf("storage: list %s: %w", l.dir, err)
	}
	has := map[int64]bool{}
	var snaps []int64
	for _, n := range names {
		b, suf, ok := parseSegmentFileName(n)
		switch {
		case ok && suf == TxnIndexFileSuffix:
			has[b] = true
		case ok && suf == TxnSnapshotFileSuffix:
			snaps = append(snaps, b)
		}
	}
	if rebuild {
		for i, s := range segs {
			if !has[s.base] {
				s.aborted.Store(nil)
				s.txnDirty = false
				continue
			}
			if err := s.loadTxnIndex(i == len(segs)-1); err != nil {
				if !errors.Is(err, ErrCorruption) {
					return fmt.Errorf("storage: load transaction index: %w", err)
				}
				l.logger.Warn("storage: transaction index unreadable, rebuilding it from the log", "dir", l.dir, "err", err)
				badIndex = true
			}
		}
	}
	t, from, exists, err := l.latestTxnSnapshot(snaps)
	if err != nil {
		l.logger.Warn("storage: transaction snapshot unreadable, replaying the log", "dir", l.dir, "err", err)
	}
	localStart := l.localStart.Load()
	switch {
	case !exists && !badIndex && !hadTxns:
		// No transactional batch was ever written (see the file comment).
		t, from = producer.NewTxns(), l.LogEndOffset()
	case !exists || err != nil || badIndex:
		t, from = producer.NewTxns(), localStart
	}
	from = max(from, localStart)
	t.OnHighWatermark(l.highWatermark.Load())
	var replayed map[*segment][]AbortedTxn
	if rebuild {
		replayed = map[*segment][]AbortedTxn{}
	}
	if err := l.replayTxns(t, from, func(s *segment, a AbortedTxn) {
		if replayed != nil {
			replayed[s] = append(replayed[s], a)
		}
	}); err != nil {
		return err
	}
	if rebuild {
		for i, s := range segs {
			var want []AbortedTxn
			if !badIndex {
				for _, a := range s.abortedTxns() {
					if a.LastOffset >= from {
						break
					}
					if i == len(segs)-1 {
						// The active segment's file may hold unsynced
						// garbage that decodes: keep only entries that
						// point at a marker of their producer.
						if ok, err := s.abortMarkerAtPinned(a.LastOffset, a.ProducerID); err != nil || !ok {
							s.txnDirty = true
							continue
						}
					}
					want = append(want, a)
				}
			}
			want = append(want, replayed[s]...)
			if rewrote, err := s.setTxnIndex(want); err != nil {
				return fmt.Errorf("storage: rewrite transaction index of segment %d: %w", s.base, err)
			} else if rewrote {
				l.report.RebuiltTxnIndexes++
			}
		}
	}
	l.txnMu.Lock()
	l.txns = t
	l.publishTxnsLocked()
	l.txnMu.Unlock()
	l.txnSnaps = exists
	if hadTxns && !exists {
		// A truncation took every snapshot: write one at the new end, or
		// the next open would take the log for one without transactions.
		return l.writeTxnSnapshotLocked(l.LogEndOffset(), true)
	}
	return nil
}

// replayTxns applies every transactional batch and marker at or after
// from to t, calling onAbort with each ABORT's index entry and its
// segment.
func (l *Log) replayTxns(t *producer.Txns, from int64, onAbort func(*segment, AbortedTxn)) error {
	segs := l.segments()
	for i := findSegment(segs, from); i < len(segs); i++ {
		s := segs[i]
		if s.next.Load() <= from || s.size.Load() == 0 {
			continue
		}
		if err := s.acquire(); err != nil {
			return fmt.Errorf("storage: replay transactions: segment %d: %w", s.base, err)
		}
		err := replaySegmentTxns(s, t, from, onAbort)
		s.release()
		if err != nil {
			return err
		}
	}
	return nil
}

func replaySegmentTxns(s *segment, t *producer.Txns, from int64, onAbort func(*segment, AbortedTxn)) error {
	limit := s.size.Load()
	hs := newHeaderScanner(s.log, limit)
	defer hs.release()
	var buf []byte
	for pos := int64(0); pos < limit; {
		h, err := hs.header(pos)
		if err != nil {
			return fmt.Errorf("%w: replay transactions: segment %d at position %d: %v", ErrCorruption, s.base, pos, err)
		}
		at := pos
		pos += int64(h.Size())
		if h.BaseOffset < from || !h.Transactional() {
			continue
		}
		if !h.Control() {
			t.ApplyBatch(h, h.MaxTimestamp)
			continue
		}
		if cap(buf) < h.Size() {
			buf = make([]byte, h.Size())
		}
		b := buf[:h.Size()]
		if _, err := s.log.ReadAt(b, at); err != nil {
			return fmt.Errorf("storage: replay transactions: segment %d at position %d: %w", s.base, at, err)
		}
		m, ok, err := parseMarker(b)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorruption, err)
		}
		if !ok {
			continue
		}
		if c := t.ApplyMarker(m, h.BaseOffset, h.MaxTimestamp); c.Aborted {
			onAbort(s, abortedOf(c))
		}
	}
	return nil
}

// resetTxnsLocked empties the table (the log restarted empty; its
// snapshots are gone). Log.mu held.
func (l *Log) resetTxnsLocked() {
	l.txnMu.Lock()
	l.txns = producer.NewTxns()
	l.publishTxnsLocked()
	l.txnMu.Unlock()
	l.txnSnaps = false
}
