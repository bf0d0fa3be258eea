package storage

import (
	"fmt"
)

// A roll's fsyncs run off the append path, as Kafka's do (UnifiedLog.roll
// schedules flushUptoOffsetExclusive on the background scheduler, and the
// producer snapshot's fsync moved there too after it blocked the request
// handlers under disk load, KAFKA-15046). Log.rollLocked seals the old
// segment without an fsync (segment.sealUnsynced), captures the producer
// and transaction snapshots at the new base under the log's lock, creates
// the new segment and publishes it; the appends go on at once. A rollSync
// then does, on the log's syncer goroutine and in roll order: the old
// segment's fsyncs (log, indexes, transaction index), the snapshot files
// (tmp, fsync, rename), the directory's fsync (the renames and the new
// segment's files), and only then moves the recovery point to the old
// segment's end and wakes the checkpoint writer.
//
// Until then the segment is not durable and the recovery point stays
// below it, so a crash rescans it (Log.recover rescans every segment from
// the one holding the recovery point) and the producer and transaction
// state replay from the previous snapshot. Whatever needs the roll
// durable waits for it: a flush (flush.messages, flush.ms, Flush, Close)
// and everything that rewrites history (Truncate, a restart) run the
// pending rollSyncs first (drainSyncLocked); the uploader copies only
// below the recovery point (the broker's copyBound), so no segment goes
// to the tier before it and its snapshot are on the local disk.
//
// Lock order: Log.mu → syncMu → segment.fmu. The syncer never takes
// Log.mu while it holds syncMu, so drainSyncLocked (under Log.mu) can
// wait for it.
type rollSync struct {
	seg     *segment // sealed unsynced; acquired (open files) until done
	end     int64    // its end: the recovery point once durable
	at      int64    // the new segment's base, where the snapshots are
	snap    []byte   // producer snapshot at at, nil: none
	txnSnap []byte   // transaction snapshot at at, nil: none
	done    bool     // under syncMu
}

// deferRollSync, set by this package's tests (main_test.go), replaces
// the syncer goroutine with a deterministic stand-in: a roll's rollSync
// runs when the log's next append begins (or whatever drains it first),
// so the append that rolled lands in the new segment before the old one
// is durable, at the same point in every run. The crash sweeps, which
// count the syncs of a run and then crash at each, need the same
// sequence of syncs every run.
var deferRollSync bool

// enqueueSyncLocked queues j and starts the syncer if it is not running.
// Log.mu held.
func (l *Log) enqueueSyncLocked(j *rollSync) {
	l.syncQMu.Lock()
	l.syncQ = append(l.syncQ, j)
	start := !l.syncRunning && !l.deferSync
	l.syncRunning = start || l.syncRunning
	l.syncQMu.Unlock()
	if start {
		l.syncWG.Add(1)
		go l.syncLoop()
	}
}

// syncLoop runs the queued rollSyncs in order and exits when the queue is
// empty. A failed one latches the log.
func (l *Log) syncLoop() {
	defer l.syncWG.Done()
	for {
		l.syncQMu.Lock()
		if len(l.syncQ) == 0 {
			l.syncRunning = false
			l.syncQMu.Unlock()
			return
		}
		j := l.syncQ[0]
		l.syncQMu.Unlock()
		l.syncMu.Lock()
		err := l.runSyncLocked(j)
		l.syncMu.Unlock()
		if err != nil {
			l.latch(err)
		}
	}
}

// drainSyncLocked runs every pending rollSync now, in order, and returns
// once the last is done (a failed one latches the log). Log.mu held.
func (l *Log) drainSyncLocked() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	for {
		l.syncQMu.Lock()
		if len(l.syncQ) == 0 {
			l.syncQMu.Unlock()
			return nil
		}
		j := l.syncQ[0]
		l.syncQMu.Unlock()
		if err := l.runSyncLocked(j); err != nil {
			return l.failLocked(err)
		}
	}
}

// runSyncLocked does j (once) and takes it off the queue. syncMu held.
func (l *Log) runSyncLocked(j *rollSync) error {
	if j.done {
		return nil
	}
	j.done = true
	defer func() {
		l.syncQMu.Lock()
		if len(l.syncQ) > 0 && l.syncQ[0] == j {
			l.syncQ[0] = nil
			l.syncQ = l.syncQ[1:]
		}
		l.syncQMu.Unlock()
	}()
	defer func() {
		j.seg.release()
		// The cache may be over its bound by this pin (fileCache.add).
		if l.files != nil {
			l.files.trim()
		}
	}()
	if err := j.seg.syncSealed(); err != nil {
		return fmt.Errorf("seal segment %d: %w", j.seg.base, err)
	}
	// A snapshot that cannot be written costs a longer replay after a
	// crash, not data: out of space marks the directory full and the
	// recovery point still moves (the segment is durable); any other
	// failure latches the log, as a roll's did.
	var werr error
	if j.snap != nil {
		werr = l.writeSnapshotFile(j.at, j.snap)
	}
	if j.txnSnap != nil && werr == nil {
		werr = l.writeTxnSnapshotFile(j.at, j.txnSnap, false)
	}
	if werr != nil && !noSpaceErr(werr) {
		return werr
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	if werr != nil && l.onNoSpace != nil {
		l.onNoSpace(fmt.Errorf("storage: %s: %w", l.dir, werr))
	}
	for {
		rp := l.recoveryPoint.Load()
		if rp >= j.end || l.recoveryPoint.CompareAndSwap(rp, j.end) {
			break
		}
	}
	if l.onRoll != nil {
		l.onRoll()
	}
	return nil
}
