package txncoord

import (
	"fmt"
	"math"
)

// noPending marks a txnMeta without a transition in flight.
const noPending State = -1

// txnMeta is one transactional id's metadata (Kafka's TransactionMetadata).
// Every field but lastEpoch, pending, complete, remaining, stopped and
// epochAhead is durable (and epoch, while epochAhead):
// it is what the newest __transaction_state record of the id says.
type txnMeta struct {
	id             string
	producerID     int64
	lastProducerID int64 // Kafka's lastProducerId (PreviousProducerId tag): the id before a rotation
	epoch          int16 // -1 until the first InitProducerId is durable
	lastEpoch      int16 // in memory only, as in Kafka: the epoch before a KIP-360 bump, for retries
	timeoutMs      int32
	state          State
	partitions     tpSet
	startMs        int64 // -1 when no transaction has started
	lastUpdateMs   int64

	// pending is the state a transition in flight moves to (noPending when
	// none): an append to the log, or, for CompleteCommit/CompleteAbort,
	// the markers and then the append. It blocks other transitions
	// (CONCURRENT_TRANSACTIONS).
	pending State
	// complete is the CompleteX transition prepared when the PrepareX
	// record became durable (valid while pending is CompleteX).
	complete transit
	// remaining are the partitions whose marker has not been acked yet,
	// while pending is CompleteX; stopped is set when marker sending gave up
	// (the coordinator was fenced) and the txn waits for a reload.
	remaining tpSet
	stopped   bool
	// epochAhead: a fence bumped the epoch in memory ahead of the log. The
	// PrepareAbort at the new epoch is in flight, or failed: then the bumped
	// epoch stays (it was never handed to a client, and the old producer
	// stays fenced) and the next fence does not bump again (Kafka's
	// hasFailedEpochFence).
	epochAhead bool
}

// transit is a prepared transition (Kafka's TxnTransitMetadata): the
// metadata as it will be once its record is durable.
type transit struct {
	producerID     int64
	lastProducerID int64
	epoch          int16
	lastEpoch      int16
	timeoutMs      int32
	state          State
	partitions     tpSet
	startMs        int64
	lastUpdateMs   int64
}

func newMeta(id string, producerID int64, timeoutMs int32, now int64) *txnMeta {
	return &txnMeta{
		id: id, producerID: producerID, lastProducerID: -1, epoch: -1, lastEpoch: -1,
		timeoutMs: timeoutMs, state: Empty, partitions: tpSet{}, startMs: -1, lastUpdateMs: now,
		pending: noPending,
	}
}

func metaFromRecord(id string, r TxnRecord) *txnMeta {
	return &txnMeta{
		id: id, producerID: r.ProducerID, lastProducerID: r.PreviousProducerID, epoch: r.Epoch,
		lastEpoch: -1, timeoutMs: r.TimeoutMs, state: r.State, partitions: setOf(r.Partitions),
		startMs: r.StartMs, lastUpdateMs: r.LastUpdateMs, pending: noPending,
	}
}

func (m *txnMeta) hasPending() bool { return m.pending != noPending }

// epochExhausted is Kafka's isEpochExhausted: the last epochs are kept for
// a fence (which bumps once more) so an id rotates at 32766.
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// base returns a transit that changes nothing but the last-update time.
func (m *txnMeta) base(now int64) transit {
	return transit{
		producerID: m.producerID, lastProducerID: m.producerID, epoch: m.epoch, lastEpoch: m.lastEpoch,
		timeoutMs: m.timeoutMs, state: m.state, partitions: m.partitions.clone(), startMs: m.startMs,
		lastUpdateMs: now,
	}
}

// prepare validates a transition to t.state and marks it pending (Kafka's
// prepareTransitionTo).
func (m *txnMeta) prepare(t transit) error {
	switch {
	case m.hasPending():
		return fmt.Errorf("txncoord: %s: transition to %s while %s is pending", m.id, t.state, m.pending)
	case !ValidTransition(m.state, t.state):
		return fmt.Errorf("txncoord: %s: illegal transition %s → %s", m.id, m.state, t.state)
	case t.producerID < 0:
		return fmt.Errorf("txncoord: %s: illegal producer id %d", m.id, t.producerID)
	case t.state != Dead && t.epoch < 0:
		return fmt.Errorf("txncoord: %s: illegal producer epoch %d", m.id, t.epoch)
	}
	m.pending = t.state
	return nil
}

// completeTransition applies a durable transit (Kafka's
// completeTransitionTo), checking what Kafka checks: the epoch moves only
// by a bump or a rotation (Empty), partitions only grow while Ongoing and
// are frozen by Prepare, the timeout changes only with InitProducerId.
func (m *txnMeta) completeTransition(t transit) error {
	if m.pending != t.state {
		return fmt.Errorf("txncoord: %s: completing %s, pending is %s", m.id, t.state, m.pending)
	}
	sameProducer := t.producerID == m.producerID && t.epoch == m.epoch
	ok := false
	switch t.state {
	case Empty:
		bump := t.epoch == m.epoch+1 || (t.epoch == 0 && t.producerID != m.producerID)
		ok = (t.epoch == m.epoch || bump) && len(t.partitions) == 0 && t.startMs == -1
	case Ongoing:
		ok = sameProducer && t.partitions.containsAll(m.partitions.sorted()) && t.timeoutMs == m.timeoutMs
	case PrepareCommit, PrepareAbort:
		ok = sameProducer && t.partitions.equal(m.partitions) && t.timeoutMs == m.timeoutMs && t.startMs == m.startMs
	case CompleteCommit, CompleteAbort:
		ok = sameProducer && t.timeoutMs == m.timeoutMs && t.startMs != -1
	}
	if !ok {
		m.pending = noPending
		return fmt.Errorf("txncoord: %s: invalid transition %s(pid %d epoch %d) → %s(pid %d epoch %d)",
			m.id, m.state, m.producerID, m.epoch, t.state, t.producerID, t.epoch)
	}
	m.producerID, m.lastProducerID = t.producerID, t.lastProducerID
	m.epoch, m.lastEpoch = t.epoch, t.lastEpoch
	m.timeoutMs, m.state = t.timeoutMs, t.state
	m.partitions, m.startMs, m.lastUpdateMs = t.partitions, t.startMs, t.lastUpdateMs
	if t.state == CompleteCommit || t.state == CompleteAbort {
		m.partitions = tpSet{}
	}
	m.pending, m.epochAhead, m.remaining, m.stopped = noPending, false, nil, false
	return nil
}

func (t transit) record() TxnRecord {
	r := TxnRecord{
		ProducerID: t.producerID, PreviousProducerID: t.lastProducerID, Epoch: t.epoch,
		TimeoutMs: t.timeoutMs, State: t.state, LastUpdateMs: t.lastUpdateMs, StartMs: t.startMs,
	}
	if t.state != Empty {
		r.Partitions = t.partitions.sorted()
	}
	return r
}

// durable returns the metadata as its newest record says (what a replay
// rebuilds).
func (m *txnMeta) durable() TxnRecord {
	return transit{
		producerID: m.producerID, lastProducerID: m.lastProducerID, epoch: m.epoch,
		timeoutMs: m.timeoutMs, state: m.state, partitions: m.partitions, startMs: m.startMs,
		lastUpdateMs: m.lastUpdateMs,
	}.record()
}
