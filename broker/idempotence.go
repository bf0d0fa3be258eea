package broker

// Idempotent producers: the glue between a partition's produce path and
// storage/producer.
//
// Each log the storage manager opens gets a producerCell (the manager asks
// for the log's snapshot function through
// storage.ManagerOptions.ProducerSnapshot, and producerCells.hook builds
// the cell then). The cell is the log's producer.State and the small mutex
// guarding it. The State is loaded when the broker opens the partition
// (partition.loadProducerState): the latest <offset>.snapshot (written at
// each roll and at a clean close, at the log end), then every batch after
// it, read back from the log's files header by header (none after a clean
// close).
//
// Per produce (partition.appendRecords), under the partition's appendMu,
// following storage/producer's doc:
//
//	cell.mu: Begin → Check(h) → Update(h, LEO, ts)   (dup or error: Abort, answer)
//	log.Append(records)                              (may roll: hook takes cell.mu, SnapshotAt)
//	cell.mu: Commit (Abort if the append failed)
//
// Lock order: partition.appendMu → cell.mu (briefly, never across Append);
// storage's Log.mu → cell.mu (the roll hook). cell.mu is never held while
// calling into storage, so the two orders never meet.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/producer"
)

// producerCell is one log's idempotent-producer state.
type producerCell struct {
	mu sync.Mutex      // guards st and lastExpiryMs; never held across a log call
	st *producer.State // nil until the partition is opened and the state loaded

	lastExpiryMs int64 // when RemoveExpired last ran (ms)
}

// snapshotAt is the log's ProducerSnapshot hook, called by storage under
// the log's append lock at each roll. Before the state is loaded there is
// nothing to write: the next load replays from an older snapshot.
func (c *producerCell) snapshotAt(next int64) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st == nil {
		return nil, nil
	}
	return c.st.SnapshotAt(next), nil
}

// producerCells maps each open log to its cell. A log reopened (a topic
// deleted and created again) gets a new cell, replacing the old one.
type producerCells struct {
	mu sync.Mutex // guards m
	m  map[tpKey]*producerCell
}

// hook is storage.ManagerOptions.ProducerSnapshot: called once per log
// opened, concurrently while the manager loads its directory.
func (pc *producerCells) hook(topic string, partition int32) func(int64) ([]byte, error) {
	c := &producerCell{}
	pc.mu.Lock()
	if pc.m == nil {
		pc.m = map[tpKey]*producerCell{}
	}
	pc.m[tpKey{topic, partition}] = c
	pc.mu.Unlock()
	return c.snapshotAt
}

// get returns the cell of the log opened last for topic/partition, or a
// new unregistered one (a log opened without the hook: its rolls write no
// snapshot, so each load replays the whole log).
func (pc *producerCells) get(topic string, partition int32) *producerCell {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if c := pc.m[tpKey{topic, partition}]; c != nil {
		return c
	}
	return &producerCell{}
}

// forget drops the cell of a deleted log, if it is still c.
func (pc *producerCells) forget(topic string, partition int32, c *producerCell) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if k := (tpKey{topic, partition}); pc.m[k] == c {
		delete(pc.m, k)
	}
}

// producerExpiryCheckMs is producer.id.expiration.check.interval.ms (Kafka's
// default, 10 minutes): how often a partition's produce path forgets
// expired producers. Expiry runs on the produce path instead of a timer, so
// an idle partition keeps its producers until it is written again, which
// costs memory only.
const producerExpiryCheckMs = 10 * 60 * 1000

// loadProducerState rebuilds the partition's producer state from the
// latest snapshot and the batches after it, once; a cell whose state is
// already loaded (the partition reopened over the same log) is kept.
func (p *partition) loadProducerState(c *producerCell, nowMs int64) (producer.LoadResult, error) {
	p.prod = c
	c.mu.Lock()
	loaded := c.st != nil
	c.mu.Unlock()
	if loaded {
		return producer.LoadResult{}, nil
	}
	off, snap, ok, err := p.log.LatestProducerSnapshot()
	if err != nil {
		// An unreadable snapshot file costs a full replay, like a corrupt one.
		snap, ok = nil, false
	}
	if !ok {
		snap = nil
	}
	// Load runs without c.mu: it reads the log, and a roll meanwhile would
	// take c.mu from inside the log. c.st is still nil, so such a roll
	// writes no snapshot, and replay reads up to the end at the time it
	// runs; nothing appends before the partition is published.
	st, res, err := producer.Load(producer.Options{}, off, snap, nowMs, func(from int64, apply func(batch.Header) error) error {
		return replayBatchHeaders(p.log, from, apply)
	})
	if err != nil {
		return res, fmt.Errorf("broker: load producer state of %s-%d: %w", p.topic, p.index, err)
	}
	c.mu.Lock()
	c.st, c.lastExpiryMs = st, nowMs
	c.mu.Unlock()
	return res, nil
}

// replayChunk bounds one Log.Read during replay, and replayBuf is how
// much of the returned region is read at a time: only batch headers are
// parsed, and reading 64 KiB at once costs one pread per ~600 small
// batches instead of one per batch, while a large batch costs one read of
// its first 64 KiB.
const (
	replayChunk = 8 << 20
	replayBuf   = 64 << 10
)

// replayBatchHeaders calls apply with the header of every batch from the
// one holding from (or the local log start) to the log end, reading the
// segment files through Log.Read views.
func replayBatchHeaders(l *storage.Log, from int64, apply func(batch.Header) error) error {
	if ls := l.LocalLogStartOffset(); from < ls {
		from = ls
	}
	end := l.LogEndOffset()
	buf := make([]byte, replayBuf)
	for from < end {
		v, err := l.Read(from, replayChunk, end)
		if err != nil {
			return err
		}
		if v.Size == 0 {
			v.Release()
			return nil
		}
		err = scanHeaders(v, buf, apply)
		from = v.NextOffset
		v.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// scanHeaders walks the whole batches of v, reading buf-sized pieces of
// the file and parsing each batch's header in place.
func scanHeaders(v storage.ReadView, buf []byte, apply func(batch.Header) error) error {
	stop := v.Pos + v.Size
	var win []byte   // the file from winPos, as last read
	var winPos int64 // file position of win[0]
	for pos := v.Pos; pos < stop; {
		if stop-pos < batch.HeaderSize {
			return fmt.Errorf("broker: replay: %d bytes left at position %d: %w", stop-pos, pos, io.ErrUnexpectedEOF)
		}
		off := pos - winPos
		if win == nil || off < 0 || off+batch.HeaderSize > int64(len(win)) {
			n := min(int64(len(buf)), stop-pos)
			if _, err := v.File.ReadAt(buf[:n], pos); err != nil {
				return fmt.Errorf("broker: replay: read at %d: %w", pos, err)
			}
			win, winPos, off = buf[:n], pos, 0
		}
		h, err := batch.ParseHeader(win[off:])
		if err == nil {
			err = apply(h)
		}
		if err != nil {
			return err
		}
		pos += int64(h.Size())
	}
	return nil
}

// errMultipleBatches answers a produce whose record set holds more than
// one batch: Kafka's LogValidator allows exactly one v2 batch per
// partition ("Compressed outer record has more than one batch").
var errMultipleBatches = fmt.Errorf("broker: a produce request may carry one record batch per partition: %w", kerr.InvalidRecord)

// clientBatch checks what Kafka checks of a client's record set before
// anything else and returns its one batch's header. ok is false when the
// set does not even split or parse: storage's validation then gives the
// exact error (corrupt, truncated, bad magic).
func clientBatch(records []byte) (h batch.Header, ok bool, err error) {
	first, rest, err := batch.Split(records)
	if err != nil {
		return h, false, nil
	}
	if h, err = batch.ParseHeader(first); err != nil {
		return h, false, nil
	}
	if len(rest) > 0 {
		return h, true, errMultipleBatches
	}
	// UnifiedLog.analyzeAndValidateRecords: a client's v2 batch has base
	// offset 0 (the broker assigns offsets).
	if h.BaseOffset != 0 {
		return h, true, fmt.Errorf("broker: batch base offset %d, want 0: %w", h.BaseOffset, kerr.InvalidRecord)
	}
	return h, true, nil
}

// produceResult is what a produce answers for one partition.
type produceResult struct {
	baseOffset     int64
	lastOffset     int64 // the batch's last offset (the original's, for a duplicate)
	logAppendTime  int64 // -1 on CreateTime topics
	logStartOffset int64
	duplicate      bool // acknowledged from the producer state, nothing appended
}

// appendRecords appends a client's record set as leader, with Kafka's
// idempotent-producer checks: a batch repeating one of its producer's last
// five is acknowledged at its original offsets and not appended; a
// sequence gap (OUT_OF_ORDER_SEQUENCE_NUMBER) or an older epoch
// (INVALID_PRODUCER_EPOCH) is refused. Invalid batches get storage's
// errors, checked before the producer's (as Kafka validates first).
// epoch is the leader epoch the caller saw this broker lead p in: under
// appendMu the append is refused (NOT_LEADER_OR_FOLLOWER) unless it still
// does (checkLeaderAppendLocked). A transactional data batch also needs its
// producer's transaction open in the log or txn's KIP-890 guard still in
// force (txn_produce.go); txn nil is a coordinator's own append.
func (p *partition) appendRecords(records []byte, epoch int32, nowMs int64, txn *txnAppend) (produceResult, error) {
	res := produceResult{baseOffset: -1, logAppendTime: -1, logStartOffset: -1}
	h, parsed, err := clientBatch(records)
	if err != nil {
		return res, err
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.checkLeaderAppendLocked(epoch); err != nil {
		return res, err
	}
	if !parsed || !h.HasProducerID() {
		info, err := p.append(records, epoch)
		if err != nil {
			return res, err
		}
		res.baseOffset, res.lastOffset, res.logAppendTime, res.logStartOffset = info.FirstOffset, info.LastOffset, info.LogAppendTime, info.LogStartOffset
		return res, nil
	}

	cfg := p.log.Config()
	// KIP-890 part 1, checked after the duplicate check and before the
	// sequence checks, as Kafka's analyzeAndValidateProducerState.
	needVerified := false
	if txn != nil && h.Transactional() && !h.Control() {
		_, open := p.log.OngoingTxn(h.ProducerID)
		needVerified = !open && !p.verified.valid(h.ProducerID, h.ProducerEpoch, epoch, txn.guard)
	}
	c := p.prod
	c.mu.Lock()
	if nowMs-c.lastExpiryMs >= producerExpiryCheckMs {
		c.st.RemoveExpired(nowMs)
		c.lastExpiryMs = nowMs
	}
	tx := c.st.Begin()
	dup, err := tx.Check(h)
	if dup == nil && needVerified {
		err = errNotInTxn(txn.version)
	}
	if err != nil || dup != nil {
		tx.Abort()
		c.mu.Unlock()
		// Rare paths: an invalid batch is answered as invalid first.
		if verr := validateForAnswer(records, cfg); verr != nil {
			return res, verr
		}
		if err != nil {
			return res, err
		}
		res.duplicate = true
		res.baseOffset, res.lastOffset, res.logStartOffset = dup.FirstOffset, dup.LastOffset, p.log.LogStartOffset()
		if cfg.TimestampType == batch.LogAppendTime {
			res.logAppendTime = dup.Timestamp
		}
		return res, nil
	}
	// Kafka keeps the batch's MaxTimestamp, which is the append time on
	// LogAppendTime topics. Storage stamps its own clock during Append, so
	// on those topics the update is redone with the stamped time below.
	ts := h.MaxTimestamp
	if cfg.TimestampType == batch.LogAppendTime {
		ts = nowMs
	}
	next := p.log.LogEndOffset() // appendMu: nothing else appends as leader
	tx.Update(h, next, ts)
	c.mu.Unlock()

	info, err := p.append(records, epoch)

	c.mu.Lock()
	switch {
	case err != nil || info.FirstOffset != next:
		tx.Abort()
	case info.LogAppendTime >= 0 && info.LogAppendTime != ts:
		// Record the time storage stamped, so a duplicate's answer and a
		// State rebuilt from the log agree. Redone under the same hold of
		// c.mu as the commit: no snapshot can see the State in between.
		tx.Abort()
		tx = c.st.Begin()
		tx.Update(h, next, info.LogAppendTime)
		tx.Commit()
	default:
		tx.Commit()
	}
	c.mu.Unlock()
	if err != nil {
		return res, err
	}
	if info.FirstOffset != next {
		// Cannot happen while appendMu serialises leader appends; if it
		// did, the state would record wrong offsets, so say so loudly.
		return res, fmt.Errorf("broker: append at %d, producer state expected %d: %w", info.FirstOffset, next, kerr.UnknownServerError)
	}
	res.baseOffset, res.lastOffset, res.logAppendTime, res.logStartOffset = info.FirstOffset, info.LastOffset, info.LogAppendTime, info.LogStartOffset
	return res, nil
}

// validateForAnswer runs the batch checks storage would run, for a batch
// that will not reach storage (a duplicate or a sequence error), so a
// corrupt or oversized batch is answered as such, as Kafka does.
// Timestamps are not checked here.
func validateForAnswer(records []byte, cfg storage.Config) error {
	_, err := batch.Validate(records, batch.Limits{MaxBatchBytes: cfg.MaxMessageBytes, SkipTimestampCheck: true})
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return fmt.Errorf("broker: %w", err)
	}
	return fmt.Errorf("broker: %w: %w", kerr.CorruptMessage, err)
}

// produceHookFunc is Node.produceHook's type: a test hook run after a
// produce request's appends and before its response; an error closes the
// connection instead of answering (a lost response, which makes a client
// retry batches that were in fact appended).
type produceHookFunc func(req *kmsg.ProduceRequest) error

// appendAsFollower appends the leader's batches as they are (offsets,
// leader epochs and timestamps kept; CRC checked by storage's CheckStored)
// with one write, then records their producers in the producer state the
// same way a reload replays the log (State.ReplayBatch: each batch's own
// base offset and MaxTimestamp), so a follower elected leader dedupes
// retries of what its predecessor acknowledged.
//
// The state is updated after the append, not in a Tx around it as a
// leader does: a roll inside the append snapshots at the batches' first
// offset, which none of them may be in, and a failed append (one write,
// all or nothing) leaves nothing to undo.
func (p *partition) appendAsFollower(records []byte) (storage.AppendInfo, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	info, err := p.log.Append(records, storage.AppendOptions{AssignOffsets: false})
	if err != nil {
		return info, err
	}
	if c := p.prod; c != nil {
		c.mu.Lock()
		if c.st != nil {
			for rest := records; len(rest) > 0; {
				b, r, err := batch.Split(rest)
				if err != nil {
					break // Append checked every batch: cannot happen
				}
				if h, err := batch.ParseHeader(b); err == nil && h.HasProducerID() {
					c.st.ReplayBatch(h)
				}
				rest = r
			}
		}
		c.mu.Unlock()
	}
	return info, nil
}

// truncateAsFollower cuts the log at offset (storage drops the whole batch
// holding it), lowers the high watermark to the new end if it was above,
// and drops the producer state at and above the new end, so the producer
// state never remembers a batch the log no longer has.
func (p *partition) truncateAsFollower(offset int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	// The high watermark comes down first, so no reader sees it above
	// the log end between the cut and the clamp (a lower one is always
	// safe: the leader's next answer raises it again).
	p.clampHWWithin(math.MinInt64, offset)
	if err := p.log.Truncate(offset); err != nil {
		return err
	}
	p.afterTruncateLocked()
	return nil
}

// truncateFullyAsFollower empties the log and restarts it at offset (a
// follower below its leader's log start): the producer state starts over
// empty.
func (p *partition) truncateFullyAsFollower(offset int64) error {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	if c := p.prod; c != nil {
		c.mu.Lock()
		if c.st != nil {
			c.st = producer.New(producer.Options{})
		}
		c.mu.Unlock()
	}
	p.afterTruncateLocked()
	return nil
}

// afterTruncateLocked keeps the high watermark within [log start, LEO]
// (as Kafka's UnifiedLog does after a truncation) and the producer state
// within the log.
func (p *partition) afterTruncateLocked() {
	p.clampHW()
	leo := p.log.LogEndOffset()
	if c := p.prod; c != nil {
		c.mu.Lock()
		if c.st != nil {
			c.st.TruncateTo(leo)
		}
		c.mu.Unlock()
	}
	p.wake()
}
