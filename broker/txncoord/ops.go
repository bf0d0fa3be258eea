package txncoord

import (
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitRequest is an InitProducerId with a transactional id. ProducerID and
// Epoch are v3+'s (KIP-360), -1 when not given.
type InitRequest struct {
	Req        ReqID
	Version    int16
	TxnID      string
	TimeoutMs  int32
	ProducerID int64
	Epoch      int16
}

// InitProducerID plans an InitProducerId (Kafka's handleInitProducerId
// and prepareInitProducerIdTransit): a new id gets a fresh producer id at
// epoch 0; Empty/Complete* bump the epoch (a new producer id once it is
// exhausted); Ongoing is fenced (epoch + 1, its transaction aborted) and
// answered CONCURRENT_TRANSACTIONS, so the client's retry bumps again;
// Prepare* and pending transitions answer CONCURRENT_TRANSACTIONS.
func (c *Coordinator) InitProducerID(now int64, r InitRequest) Effects {
	w := &waiter{req: r.Req, api: kmsg.InitProducerID, version: r.Version}
	if r.TxnID == "" {
		return answerNow(w, kerr.InvalidRequest.Code)
	}
	if r.TimeoutMs <= 0 || r.TimeoutMs > c.cfg.MaxTimeoutMs {
		return answerNow(w, kerr.InvalidTransactionTimeout.Code)
	}
	expected := r.ProducerID >= 0 || r.Epoch >= 0
	if expected && (r.ProducerID < 0 || r.Epoch < 0) {
		return answerNow(w, kerr.InvalidRequest.Code) // one of the pair given
	}
	pt, m, code := c.lookup(r.TxnID)
	if code != 0 {
		return answerNow(w, code)
	}
	if m == nil {
		id, err := c.alloc()
		if err != nil {
			return answerNow(w, allocCode(err))
		}
		m = newMeta(r.TxnID, id, r.TimeoutMs, now)
		pt.txns[r.TxnID] = m
	}
	if m.hasPending() {
		return answerNow(w, kerr.ConcurrentTransactions.Code)
	}
	// KIP-360: the given producer must be this id's current one, its
	// previous one retrying a rotation, or the metadata must be brand new.
	if expected && !(m.epoch == -1 || r.ProducerID == m.producerID ||
		(r.ProducerID == m.lastProducerID && epochExhausted(r.Epoch))) {
		return answerNow(w, kerr.ProducerFenced.Code)
	}
	switch m.state {
	case PrepareCommit, PrepareAbort:
		return answerNow(w, kerr.ConcurrentTransactions.Code)
	case Ongoing:
		w.onSuccess = kerr.ConcurrentTransactions.Code
		return c.fence(now, pt, m, w)
	case Empty, CompleteCommit, CompleteAbort:
	default:
		return answerNow(w, kerr.UnknownServerError.Code)
	}
	t := m.base(now)
	t.state, t.timeoutMs, t.partitions, t.startMs = Empty, r.TimeoutMs, tpSet{}, -1
	switch {
	case epochExhausted(m.epoch) && (!expected || r.Epoch == m.epoch):
		id, err := c.alloc()
		if err != nil {
			return answerNow(w, allocCode(err))
		}
		t.producerID, t.epoch, t.lastEpoch = id, 0, -1
		if expected {
			t.lastEpoch = m.epoch
		}
	case !expected:
		t.epoch, t.lastEpoch = m.epoch+1, -1
	case m.epoch == -1 || r.Epoch == m.epoch:
		if epochExhausted(m.epoch) {
			return answerNow(w, kerr.UnknownServerError.Code) // unreachable: rotated above
		}
		t.epoch, t.lastEpoch = m.epoch+1, m.epoch
	case r.Epoch == m.lastEpoch:
		// A retry of a bump whose answer was lost: same epoch again.
	default:
		return answerNow(w, kerr.ProducerFenced.Code)
	}
	if err := m.prepare(t); err != nil {
		e := answerNow(w, kerr.UnknownServerError.Code)
		e.note("%v", err)
		return e
	}
	return c.appendTransit(pt, m, kindInit, t, w)
}

// fence bumps an Ongoing transaction's epoch (once: not again after a
// failed fence) and aborts it at the new epoch (Kafka's
// prepareFenceProducerEpoch, then endTransaction(ABORT, isFromClient =
// false)). PrepareEpochFence is never written: the fence and the
// PrepareAbort it leads to are one planner step here.
func (c *Coordinator) fence(now int64, pt *partition, m *txnMeta, w *waiter) Effects {
	if m.epoch == math.MaxInt16 {
		var e Effects
		if w != nil {
			e = answerNow(w, kerr.UnknownServerError.Code)
		}
		e.note("%s: cannot fence epoch %d", m.id, m.epoch)
		return e
	}
	if !m.epochAhead {
		m.epoch++
		m.epochAhead = true
	}
	m.lastEpoch = -1
	return c.end(now, pt, m, m.producerID, m.epoch, false, false, w)
}

// EndRequest is an EndTxn.
type EndRequest struct {
	Req        ReqID
	Version    int16
	TxnID      string
	ProducerID int64
	Epoch      int16
	Commit     bool
}

// EndTxn plans an EndTxn: Ongoing → PrepareX (answered NONE once durable,
// then the markers go out) → CompleteX when every marker is acked.
func (c *Coordinator) EndTxn(now int64, r EndRequest) Effects {
	w := &waiter{req: r.Req, api: kmsg.EndTxn, version: r.Version}
	if r.TxnID == "" {
		return answerNow(w, kerr.InvalidRequest.Code)
	}
	pt, m, code := c.lookup(r.TxnID)
	switch {
	case code != 0:
		return answerNow(w, code)
	case m == nil:
		return answerNow(w, kerr.InvalidProducerIDMapping.Code)
	}
	return c.end(now, pt, m, r.ProducerID, r.Epoch, r.Commit, true, w)
}

// end is Kafka's endTransaction. A client must name the current epoch; the
// coordinator itself (fence, timeout) names the bumped one.
func (c *Coordinator) end(now int64, pt *partition, m *txnMeta, pid int64, epoch int16, commit, fromClient bool, w *waiter) Effects {
	fail := func(code int16) Effects {
		if w == nil {
			return Effects{}
		}
		return answerNow(w, code)
	}
	switch {
	case m.producerID != pid:
		return fail(kerr.InvalidProducerIDMapping.Code)
	case (fromClient && epoch != m.epoch) || epoch < m.epoch:
		return fail(kerr.ProducerFenced.Code)
	case m.hasPending():
		return fail(kerr.ConcurrentTransactions.Code)
	}
	same := (commit && (m.state == PrepareCommit || m.state == CompleteCommit)) ||
		(!commit && (m.state == PrepareAbort || m.state == CompleteAbort))
	switch m.state {
	case Ongoing:
	case CompleteCommit, CompleteAbort:
		if same {
			return fail(0) // a retry of an EndTxn that completed
		}
		return fail(kerr.InvalidTxnState.Code)
	case PrepareCommit, PrepareAbort:
		if same {
			return fail(kerr.ConcurrentTransactions.Code)
		}
		return fail(kerr.InvalidTxnState.Code)
	case Empty:
		return fail(kerr.InvalidTxnState.Code)
	default:
		return fail(kerr.UnknownServerError.Code)
	}
	t := m.base(now)
	t.state = PrepareAbort
	if commit {
		t.state = PrepareCommit
	}
	if err := m.prepare(t); err != nil {
		e := fail(kerr.UnknownServerError.Code)
		e.note("%v", err)
		return e
	}
	return c.appendTransit(pt, m, kindPrepare, t, w)
}

// AddRequest is an AddPartitionsToTxn for one transaction (v0–3, or one
// transaction of a v4+ batch that is not verify-only).
type AddRequest struct {
	Req        ReqID
	Version    int16
	TxnID      string
	ProducerID int64
	Epoch      int16
	Partitions []TopicPartition
}

// AddPartitions plans an AddPartitionsToTxn; the one answer's error
// applies to every partition of the request.
func (c *Coordinator) AddPartitions(now int64, r AddRequest) Effects {
	w := &waiter{req: r.Req, api: kmsg.AddPartitionsToTxn, version: r.Version}
	return c.add(now, w, r.TxnID, r.ProducerID, r.Epoch, r.Partitions)
}

// AddOffsetsRequest is an AddOffsetsToTxn.
type AddOffsetsRequest struct {
	Req        ReqID
	Version    int16
	TxnID      string
	ProducerID int64
	Epoch      int16
	Group      string
}

// AddOffsets plans an AddOffsetsToTxn: the group's __consumer_offsets
// partition joins the transaction, so its TxnOffsetCommits get a marker.
func (c *Coordinator) AddOffsets(now int64, r AddOffsetsRequest) Effects {
	w := &waiter{req: r.Req, api: kmsg.AddOffsetsToTxn, version: r.Version}
	tp := TopicPartition{OffsetsTopic, PartitionFor(r.Group, c.cfg.OffsetsPartitions)}
	return c.add(now, w, r.TxnID, r.ProducerID, r.Epoch, []TopicPartition{tp})
}

// add is Kafka's handleAddPartitionsToTransaction.
func (c *Coordinator) add(now int64, w *waiter, txnID string, pid int64, epoch int16, tps []TopicPartition) Effects {
	if txnID == "" {
		return answerNow(w, kerr.InvalidRequest.Code)
	}
	pt, m, code := c.lookup(txnID)
	switch {
	case code != 0:
		return answerNow(w, code)
	case m == nil, m.producerID != pid:
		return answerNow(w, kerr.InvalidProducerIDMapping.Code)
	case m.epoch != epoch:
		return answerNow(w, kerr.ProducerFenced.Code)
	case m.hasPending(), m.state == PrepareCommit, m.state == PrepareAbort:
		return answerNow(w, kerr.ConcurrentTransactions.Code)
	case m.state == Ongoing && m.partitions.containsAll(tps):
		return answerNow(w, 0)
	case m.epoch < 0: // the id's first InitProducerId never became durable
		return answerNow(w, kerr.InvalidProducerIDMapping.Code)
	}
	t := m.base(now)
	t.state = Ongoing
	if m.state != Ongoing {
		t.startMs = now // the transaction (and its timeout) starts here
	}
	for _, tp := range tps {
		t.partitions[tp] = struct{}{}
	}
	if err := m.prepare(t); err != nil {
		e := answerNow(w, kerr.UnknownServerError.Code)
		e.note("%v", err)
		return e
	}
	return c.appendTransit(pt, m, kindAdd, t, w)
}

// VerifyRequest is one transaction of a verify-only AddPartitionsToTxn
// (v4+, KIP-890 part 1), sent by a partition leader before it appends a
// producer's first transactional batch.
type VerifyRequest struct {
	TxnID      string
	ProducerID int64
	Epoch      int16
	Partitions []TopicPartition
}

// PartitionResult is one partition's error in a verify-only answer.
type PartitionResult struct {
	Partition TopicPartition
	Err       int16
}

// Verify answers a verify-only AddPartitionsToTxn without changing
// anything: NONE for partitions in the ongoing transaction,
// TRANSACTION_ABORTABLE for the others (the leader turns that into
// INVALID_TXN_STATE for produce versions that do not know it, and
// PRODUCER_FENCED into INVALID_PRODUCER_EPOCH). A pending transition is not
// checked, as in Kafka: partitions join the set only once durable and
// leave it only with the CompleteX record.
func (c *Coordinator) Verify(r VerifyRequest) []PartitionResult {
	all := func(code int16) []PartitionResult {
		out := make([]PartitionResult, len(r.Partitions))
		for i, tp := range r.Partitions {
			out[i] = PartitionResult{tp, code}
		}
		return out
	}
	if r.TxnID == "" {
		return all(kerr.InvalidRequest.Code)
	}
	_, m, code := c.lookup(r.TxnID)
	switch {
	case code != 0:
		return all(code)
	case m == nil, m.producerID != r.ProducerID:
		return all(kerr.InvalidProducerIDMapping.Code)
	case m.epoch != r.Epoch:
		return all(kerr.ProducerFenced.Code)
	case m.state == PrepareCommit, m.state == PrepareAbort:
		return all(kerr.ConcurrentTransactions.Code)
	}
	out := all(0)
	for i, tp := range r.Partitions {
		if _, ok := m.partitions[tp]; !ok || m.state != Ongoing {
			out[i].Err = kerr.TransactionAbortable.Code
		}
	}
	return out
}

// MarkerAck is a partition leader's answer to one partition of a
// [Marker]. Err is the WriteTxnMarkers partition error, or
// NETWORK_EXCEPTION / REQUEST_TIMED_OUT when the request itself failed.
// Deleted says instead that the partition is not in the metadata any more
// (its topic was deleted): Kafka skips such a partition rather than send
// it a marker.
type MarkerAck struct {
	TxnID            string
	CoordinatorEpoch int32
	ProducerID       int64
	Epoch            int16
	Partition        TopicPartition
	Err              int16
	Deleted          bool
}

// Marker error classes (Kafka's TransactionMarkerRequestCompletionHandler).
type markerClass int8

const (
	markerDone  markerClass = iota // written
	markerDrop                     // the partition is gone: stop trying it
	markerRetry                    // send it again
	markerStop                     // give up the txn's markers until a reload
)

func classifyMarker(code int16) markerClass {
	switch code {
	case 0:
		return markerDone
	case kerr.UnsupportedForMessageFormat.Code, kerr.UnsupportedVersion.Code:
		// The producer could not have written to it either.
		return markerDrop
	case kerr.UnknownTopicOrPartition.Code, kerr.NotLeaderForPartition.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code, kerr.KafkaStorageError.Code,
		kerr.NetworkException.Code:
		// The leader moved or is catching up: resend (to the leader the
		// metadata names then; a partition gone from it comes back Deleted).
		return markerRetry
	}
	// INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer
	// producer epoch or coordinator took over. CORRUPT_MESSAGE,
	// MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_REQUIRED_ACKS and
	// anything unexpected: Kafka throws; here the txn waits for a reload.
	return markerStop
}

// MarkerDone records a partition leader's answer to a marker. When the
// last partition is acked (or dropped), the CompleteX record is appended.
// Acks that match no outstanding marker (stale epochs, duplicates) are
// ignored.
func (c *Coordinator) MarkerDone(now int64, a MarkerAck) Effects {
	var e Effects
	pt := c.parts[c.PartitionFor(a.TxnID)]
	if pt == nil || pt.state != Loaded || pt.epoch != a.CoordinatorEpoch {
		return e
	}
	m := pt.txns[a.TxnID]
	if m == nil || m.stopped || (m.pending != CompleteCommit && m.pending != CompleteAbort) ||
		m.producerID != a.ProducerID || m.epoch != a.Epoch {
		return e
	}
	if _, ok := m.remaining[a.Partition]; !ok {
		return e
	}
	class := classifyMarker(a.Err)
	if a.Deleted {
		class = markerDrop
	}
	switch class {
	case markerDone:
		delete(m.remaining, a.Partition)
	case markerDrop:
		delete(m.remaining, a.Partition)
		if a.Deleted {
			e.note("%s: marker for %s skipped, the partition is deleted", m.id, a.Partition)
		} else {
			e.note("%s: marker for %s dropped (%s)", m.id, a.Partition, kerr.ErrorForCode(a.Err))
		}
	case markerRetry:
		e.Markers = append(e.Markers, Marker{
			TxnID: m.id, ProducerID: m.producerID, Epoch: m.epoch, Commit: m.state == PrepareCommit,
			CoordinatorEpoch: pt.epoch, Partitions: []TopicPartition{a.Partition},
		})
		return e
	case markerStop:
		m.stopped = true
		e.note("%s: markers stopped at %s (%s), left for the next load", m.id, a.Partition, kerr.ErrorForCode(a.Err))
		return e
	}
	if len(m.remaining) == 0 {
		e.add(c.appendTransit(pt, m, kindComplete, m.complete, nil))
	}
	return e
}

// loadedTxns returns the metadata of every loaded partition, by partition
// then id, for deterministic scans.
func (c *Coordinator) loadedTxns(fn func(pt *partition, m *txnMeta)) {
	for _, p := range slices.Sorted(maps.Keys(c.parts)) {
		pt := c.parts[p]
		if pt.state != Loaded {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(pt.txns)) {
			fn(pt, pt.txns[id])
		}
	}
}

// AbortTimedOut is the scan Kafka runs every
// transaction.abort.timed.out.transaction.cleanup.interval.ms: an Ongoing
// transaction without a pending transition whose start + timeout is before
// now is fenced (epoch + 1) and aborted; the stale producer's next request
// gets PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH).
func (c *Coordinator) AbortTimedOut(now int64) Effects {
	var e Effects
	c.loadedTxns(func(pt *partition, m *txnMeta) {
		if m.state == Ongoing && !m.hasPending() && m.startMs+int64(m.timeoutMs) < now {
			e.note("%s: transaction of producer %d epoch %d timed out, aborting", m.id, m.producerID, m.epoch)
			e.add(c.fence(now, pt, m, nil))
		}
	})
	return e
}

// ExpireIDs is the sweep of idle transactional ids
// (transactional.id.expiration.ms, Kafka runs it hourly): an id in Empty,
// CompleteCommit or CompleteAbort, without a pending transition, not
// updated for the expiration time, goes pending Dead and its tombstone is
// appended; once durable the id is forgotten.
func (c *Coordinator) ExpireIDs(now int64) Effects {
	var e Effects
	c.loadedTxns(func(pt *partition, m *txnMeta) {
		if !expirationAllowed(m.state) || m.hasPending() || m.lastUpdateMs > now-c.cfg.IDExpirationMs {
			return
		}
		t := m.base(m.lastUpdateMs)
		t.state, t.partitions = Dead, tpSet{}
		if err := m.prepare(t); err != nil {
			e.note("%v", err)
			return
		}
		e.add(c.appendTransit(pt, m, kindDead, t, nil))
	})
	return e
}

// LeaderVerifyCode maps one partition's [Verify] result to what a
// partition leader answers the producer (Kafka's AddPartitionsToTxnManager):
// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (what producers expect on
// produce), and TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE unless the
// request knows it (abortableKnown: Kafka uses Produce versions above 10,
// and TxnOffsetCommit versions above 4, as knowing it). Other codes pass.
func LeaderVerifyCode(code int16, abortableKnown bool) int16 {
	switch {
	case code == kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case code == kerr.TransactionAbortable.Code && !abortableKnown:
		return kerr.InvalidTxnState.Code
	}
	return code
}
