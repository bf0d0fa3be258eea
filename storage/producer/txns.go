package producer

import (
	"fmt"
	"slices"

	"github.com/strata-io/strata/internal/batch"
)

// Transactions on one partition: the deterministic core storage.Log
// drives (storage/txn.go). A [Txns] knows, for every producer that wrote a
// transactional batch or a transaction marker here, its epoch, the
// coordinator epoch of its last marker, the first offset of its open
// transaction and its last offset; from that it answers the first unstable
// offset (the smallest first offset of any open transaction, what bounds
// the last stable offset), checks a marker against Kafka's fencing rules
// ([Txns.CheckMarker]) and says what a marker completed
// ([Txns.ApplyMarker], the entry storage adds to the aborted-transaction
// index). It is a sibling of [State], not a part of it: the broker owns
// the State (idempotence, under its own lock), the log owns its Txns
// (under its append lock, persisted in its own snapshot file), so the
// transaction truth of a partition never depends on the broker feeding
// markers to a second table.
//
// Kafka's rules, from ProducerAppendInfo (appendDataBatch,
// appendEndTxnMarker) and ProducerStateManager (lastStableOffset):
//
//   - a transactional data batch opens its producer's transaction at its
//     base offset if none is open;
//   - a marker (COMMIT or ABORT) with a producer epoch older than the
//     producer's is refused (INVALID_PRODUCER_EPOCH), one with a
//     coordinator epoch older than the producer's last marker's is refused
//     (TRANSACTION_COORDINATOR_FENCED); otherwise it closes the open
//     transaction, and a marker for a producer with no open transaction is
//     still written (its completed transaction spans the marker alone);
//   - an aborted transaction's index entry carries the last stable offset
//     at its abort: the first offset of the earliest other open
//     transaction, or the marker's offset + 1.
//
// Replication and recovery apply without checks (the leader checked).
//
// A Txns is not safe for concurrent use; it does no I/O and reads no clock.
type Txns struct {
	producers map[int64]*TxnProducer
	open      int   // producers with FirstOffset >= 0
	first     int64 // smallest FirstOffset of an open transaction; -1 none

	// unreplicated are the transactions completed by a marker at or above
	// the high watermark hw, by marker offset: they stay unstable until the
	// marker is replicated (Kafka's ProducerStateManager.unreplicatedTxns,
	// KAFKA-5121), so a read_committed consumer never sees a transaction's
	// outcome that a new leader might not have. Kept in the snapshot (Kafka
	// keeps them in memory only) with their first and last offsets.
	unreplicated []CompletedTxn
	unreplFirst  int64 // smallest FirstOffset in unreplicated; -1 none
	hw           int64
}

// Marker is one transaction marker a coordinator asks a partition to
// write (WriteTxnMarkers' per-producer entry).
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool // false: ABORT
}

// TxnProducer is one producer's transactional state, as [Txns.Producer]
// copies it.
type TxnProducer struct {
	ID               int64
	Epoch            int16
	CoordinatorEpoch int32 // of its last marker; -1 before one
	FirstOffset      int64 // first offset of the open transaction; -1 none
	LastOffset       int64 // its last offset here (data batch or marker)
	LastTimestamp    int64 // ms, of its last batch or marker
}

// CompletedTxn is what a marker ended.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64 // the transaction's first offset; the marker's when none was open
	LastOffset  int64 // the marker's offset
	Aborted     bool
	// LastStableOffset is the last stable offset right after the marker:
	// the first offset of the earliest other open transaction, or
	// LastOffset + 1.
	LastStableOffset int64
}

// NewTxns returns an empty table.
func NewTxns() *Txns {
	return &Txns{producers: map[int64]*TxnProducer{}, first: -1, unreplFirst: -1}
}

// FirstUnstable returns the smallest first offset of an open transaction
// or of a completed one whose marker is not below the high watermark yet
// ([Txns.OnHighWatermark]), or -1 when there is none: the last stable
// offset is min(FirstUnstable, high watermark).
func (t *Txns) FirstUnstable() int64 {
	f, u := t.first, t.unreplFirst
	if f < 0 || (u >= 0 && u < f) {
		return u
	}
	return f
}

// Unreplicated returns how many completed transactions wait for the high
// watermark to pass their marker.
func (t *Txns) Unreplicated() int { return len(t.unreplicated) }

// OnHighWatermark records the partition's high watermark: completed
// transactions whose marker lies below it become stable. It returns
// whether any did.
func (t *Txns) OnHighWatermark(hw int64) bool {
	t.hw = hw
	n := 0
	for n < len(t.unreplicated) && t.unreplicated[n].LastOffset < hw {
		n++
	}
	if n == 0 {
		return false
	}
	t.unreplicated = append(t.unreplicated[:0], t.unreplicated[n:]...)
	t.recomputeUnreplFirst()
	return true
}

// recomputeUnreplFirst is O(unreplicated), run when the high watermark
// prunes them: appends keep it in O(1).
func (t *Txns) recomputeUnreplFirst() {
	t.unreplFirst = -1
	for _, c := range t.unreplicated {
		if t.unreplFirst < 0 || c.FirstOffset < t.unreplFirst {
			t.unreplFirst = c.FirstOffset
		}
	}
}

// Open returns how many transactions are open.
func (t *Txns) Open() int { return t.open }

// Len returns how many producers the table knows.
func (t *Txns) Len() int { return len(t.producers) }

// Ongoing returns the first offset of producer id's open transaction.
func (t *Txns) Ongoing(id int64) (firstOffset int64, ok bool) {
	if e := t.producers[id]; e != nil && e.FirstOffset >= 0 {
		return e.FirstOffset, true
	}
	return -1, false
}

// Producer returns a copy of producer id's state.
func (t *Txns) Producer(id int64) (TxnProducer, bool) {
	e := t.producers[id]
	if e == nil {
		return TxnProducer{}, false
	}
	return *e, true
}

// Producers returns a copy of every producer's state, by ascending id.
func (t *Txns) Producers() []TxnProducer {
	out := make([]TxnProducer, 0, len(t.producers))
	for _, e := range t.producers {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b TxnProducer) int { return cmpInt64(a.ID, b.ID) })
	return out
}

// Clone returns an independent copy.
func (t *Txns) Clone() *Txns {
	c := &Txns{producers: make(map[int64]*TxnProducer, len(t.producers)), open: t.open, first: t.first,
		unreplicated: slices.Clone(t.unreplicated), unreplFirst: t.unreplFirst, hw: t.hw}
	for id, e := range t.producers {
		cp := *e
		c.producers[id] = &cp
	}
	return c
}

// CheckMarker applies Kafka's fencing rules to a marker a coordinator
// wants written; it changes nothing. It returns [ErrInvalidProducerEpoch]
// for a producer epoch older than the producer's and
// [ErrTransactionCoordinatorFenced] for a coordinator epoch older than the
// one of the producer's last marker (a deposed coordinator), in Kafka's
// order. A producer the table does not know passes.
func (t *Txns) CheckMarker(m Marker) error {
	e := t.producers[m.ProducerID]
	if e == nil {
		return nil
	}
	if m.ProducerEpoch < e.Epoch {
		return fmt.Errorf("%w: marker for producer %d at epoch %d, the producer is at epoch %d",
			ErrInvalidProducerEpoch, m.ProducerID, m.ProducerEpoch, e.Epoch)
	}
	if m.CoordinatorEpoch < e.CoordinatorEpoch {
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, last marker's was %d",
			ErrTransactionCoordinatorFenced, m.ProducerID, m.CoordinatorEpoch, e.CoordinatorEpoch)
	}
	return nil
}

// ApplyBatch records an appended data batch at its own offsets (h's
// BaseOffset, as the log assigned it) and time ts (ms). Only
// transactional data batches with a producer id count; control batches go
// through [Txns.ApplyMarker].
func (t *Txns) ApplyBatch(h batch.Header, ts int64) {
	if !h.Transactional() || h.Control() || !h.HasProducerID() {
		return
	}
	e := t.producers[h.ProducerID]
	if e == nil {
		e = &TxnProducer{ID: h.ProducerID, CoordinatorEpoch: -1, FirstOffset: -1, LastOffset: -1}
		t.producers[h.ProducerID] = e
	}
	e.Epoch = h.ProducerEpoch
	if e.FirstOffset < 0 {
		e.FirstOffset = h.BaseOffset
		t.open++
		if t.first < 0 || h.BaseOffset < t.first {
			t.first = h.BaseOffset
		}
	}
	e.LastOffset = max(e.LastOffset, h.LastOffset())
	e.LastTimestamp = ts
}

// ApplyMarker records marker m written at offset at time ts (ms) and
// returns the transaction it completed. It does not check m: the leader
// calls [Txns.CheckMarker] first, replicas and recovery trust the log.
func (t *Txns) ApplyMarker(m Marker, offset, ts int64) CompletedTxn {
	e := t.producers[m.ProducerID]
	if e == nil {
		e = &TxnProducer{ID: m.ProducerID, FirstOffset: -1}
		t.producers[m.ProducerID] = e
	}
	e.Epoch, e.CoordinatorEpoch = m.ProducerEpoch, m.CoordinatorEpoch
	e.LastOffset, e.LastTimestamp = offset, ts
	c := CompletedTxn{ProducerID: m.ProducerID, FirstOffset: offset, LastOffset: offset, Aborted: !m.Commit}
	if e.FirstOffset >= 0 {
		c.FirstOffset = e.FirstOffset
		t.closeTxn(e)
	}
	c.LastStableOffset = offset + 1
	if t.first >= 0 && t.first < c.LastStableOffset {
		c.LastStableOffset = t.first
	}
	if offset >= t.hw {
		t.unreplicated = append(t.unreplicated, c)
		if t.unreplFirst < 0 || c.FirstOffset < t.unreplFirst {
			t.unreplFirst = c.FirstOffset
		}
	}
	return c
}

func (t *Txns) closeTxn(e *TxnProducer) {
	was := e.FirstOffset
	e.FirstOffset = -1
	t.open--
	if was == t.first {
		t.recomputeFirst()
	}
}

func (t *Txns) recomputeFirst() {
	t.first = -1
	if t.open == 0 {
		return
	}
	for _, e := range t.producers {
		if e.FirstOffset >= 0 && (t.first < 0 || e.FirstOffset < t.first) {
			t.first = e.FirstOffset
		}
	}
}

// RemoveExpired forgets producers without an open transaction whose last
// write is at least expirationMs before now (ms), as Kafka's
// producer.id.expiration.ms does; a producer with an open transaction is
// never expired. Negative expirationMs expires nothing. It returns how many
// it removed.
func (t *Txns) RemoveExpired(now, expirationMs int64) int {
	if expirationMs < 0 {
		return 0
	}
	n := 0
	for id, e := range t.producers {
		if e.FirstOffset < 0 && now-e.LastTimestamp >= expirationMs {
			delete(t.producers, id)
			n++
		}
	}
	return n
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
