package producer

import (
	"fmt"
	"math"
	"slices"

	"github.com/strata-io/strata/internal/batch"
)

// DefaultExpirationMs is Kafka's producer.id.expiration.ms default: a
// producer that has not written for a day is forgotten.
const DefaultExpirationMs = 86_400_000

// BatchesPerProducer is how many batches' metadata a [State] keeps per
// producer: a client has at most five produce requests in flight
// (max.in.flight.requests.per.connection = 5 is the most idempotence
// allows), so any retry it can still send is one of the last five.
const BatchesPerProducer = 5

// noEpoch is Kafka's RecordBatch.NO_PRODUCER_EPOCH.
const noEpoch = -1

// Options configure a [State].
type Options struct {
	// ExpirationMs is producer.id.expiration.ms: [State.RemoveExpired]
	// forgets a producer whose last write is at least this old. 0 takes
	// [DefaultExpirationMs]; negative values never expire.
	ExpirationMs int64
}

// BatchMeta describes one appended batch of an idempotent producer.
type BatchMeta struct {
	FirstSeq    int32 // the batch's base sequence
	LastSeq     int32 // FirstSeq + LastOffsetDelta, wrapping past MaxInt32 to 0
	FirstOffset int64 // offset of the batch's first record
	LastOffset  int64 // offset of its last record
	Timestamp   int64 // ms, as given to Update: the LogAppendTime a duplicate reports
}

// Entry is a copy of one producer's state, as [State.Entry] returns it.
type Entry struct {
	ID               int64
	Epoch            int16
	CoordinatorEpoch int32       // -1 until transactions write markers
	TxnFirstOffset   int64       // first offset of the open transaction, -1 none
	LastTimestamp    int64       // ms of the last write, for expiry
	Batches          []BatchMeta // oldest first, at most [BatchesPerProducer]
}

// entry is one producer's state. Batches are kept oldest first in a fixed
// array so that updating an entry never allocates.
type entry struct {
	id               int64
	epoch            int16
	coordinatorEpoch int32
	txnFirstOffset   int64
	lastTimestamp    int64
	n                int
	batches          [BatchesPerProducer]BatchMeta
}

func (e *entry) last() *BatchMeta { return &e.batches[e.n-1] }

// find returns the retained batch with this sequence range, or nil.
func (e *entry) find(first, last int32) *BatchMeta {
	for i := 0; i < e.n; i++ {
		if b := &e.batches[i]; b.FirstSeq == first && b.LastSeq == last {
			return b
		}
	}
	return nil
}

// push appends m, dropping the oldest batch when all slots are taken.
func (e *entry) push(m BatchMeta) {
	if e.n == BatchesPerProducer {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = m
	e.n++
}

// State is one partition's producer-state table: for each idempotent
// producer id, its epoch and the metadata of its last
// [BatchesPerProducer] batches. It is Kafka's ProducerStateManager without
// the files: the storage layer writes [State.Snapshot] at each roll.
//
// A State is not safe for concurrent use: the broker calls it under the
// partition's append lock. It does no I/O and reads no clock; times are the
// caller's milliseconds.
type State struct {
	producers    map[int64]*entry
	expirationMs int64
	tx           Tx
}

// New returns an empty State.
func New(opts Options) *State {
	exp := opts.ExpirationMs
	if exp == 0 {
		exp = DefaultExpirationMs
	}
	s := &State{producers: make(map[int64]*entry), expirationMs: exp}
	s.tx.s = s
	return s
}

// Producers returns how many producers the State tracks.
func (s *State) Producers() int { return len(s.producers) }

// IDs returns the ids of the producers the State tracks, ascending
// (DescribeProducers lists them).
func (s *State) IDs() []int64 { return s.sortedIDs() }

// Entry returns a copy of producer id's state.
func (s *State) Entry(id int64) (Entry, bool) {
	e := s.producers[id]
	if e == nil {
		return Entry{}, false
	}
	return Entry{
		ID:               e.id,
		Epoch:            e.epoch,
		CoordinatorEpoch: e.coordinatorEpoch,
		TxnFirstOffset:   e.txnFirstOffset,
		LastTimestamp:    e.lastTimestamp,
		Batches:          append([]BatchMeta(nil), e.batches[:e.n]...),
	}, true
}

// Check validates a batch a client wants to append against the producer's
// state, before the append; it changes nothing. It returns, in Kafka's
// order (UnifiedLog.analyzeAndValidateProducerState, ProducerAppendInfo):
//
//   - nil, nil for a batch without a producer id;
//   - the original batch's metadata if h repeats one of the producer's last
//     [BatchesPerProducer] batches (same epoch, same first and last
//     sequence): the broker acknowledges those offsets and appends nothing;
//   - [ErrInvalidProducerEpoch] if h's epoch is older than the producer's;
//   - [ErrOutOfOrderSequence] if h opens a newer epoch at a sequence other
//     than 0, or continues the current epoch at a sequence other than the
//     last one plus one (MaxInt32 is followed by 0);
//   - nil, nil otherwise, including for a producer the State does not know
//     at any sequence: since KIP-360 (Kafka 2.5) a producer whose state
//     was lost to retention or expiry is accepted where it stands instead of
//     being answered UNKNOWN_PRODUCER_ID.
//
// Appends from replication are not checked (Kafka checks only client
// appends): followers and recovery call [State.Update] directly.
func (s *State) Check(h batch.Header) (*BatchMeta, error) {
	if !h.HasProducerID() {
		return nil, nil
	}
	if h.BaseSequence < 0 || h.LastOffsetDelta < 0 {
		return nil, fmt.Errorf("%w: producer %d base sequence %d last offset delta %d",
			ErrInvalidSequence, h.ProducerID, h.BaseSequence, h.LastOffsetDelta)
	}
	e := s.producers[h.ProducerID]
	if e == nil {
		return nil, nil
	}
	if h.ProducerEpoch == e.epoch {
		if d := e.find(h.BaseSequence, incSeq(h.BaseSequence, h.LastOffsetDelta)); d != nil {
			dup := *d
			return &dup, nil
		}
	}
	if h.ProducerEpoch < e.epoch {
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than the current epoch %d",
			ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if h.ProducerEpoch != e.epoch {
		// A bumped epoch restarts the sequence, unless the entry never had
		// an epoch (Kafka accepts anything then).
		if h.BaseSequence != 0 && e.epoch != noEpoch {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, not 0 (current epoch %d)",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence, e.epoch)
		}
		return nil, nil
	}
	last := int32(-1)
	if e.n > 0 {
		last = e.last().LastSeq
	}
	if e.epoch != noEpoch && !inSequence(last, h.BaseSequence) {
		return nil, fmt.Errorf("%w: producer %d epoch %d: sequence %d does not follow %d",
			ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence, last)
	}
	return nil, nil
}

// Update records a batch that has been appended at firstOffset, at
// appendTime (ms), for a batch [State.Check] accepted; followers call it
// for every batch they append and recovery for every batch it replays,
// without checks: Update trusts the log. Batches without a producer id are
// ignored. The broker records appends through [Tx.Update] instead, before
// the append, so that a snapshot taken by a roll is exact (see the package
// doc); outside a Tx, call Update after the append succeeds.
//
// A batch at or below the producer's last recorded offset is ignored. A
// batch with a new epoch clears the producer's retained batches. A
// transactional batch opens the producer's transaction if none is open; a
// control batch (a transaction marker) closes it and adds no batch.
func (s *State) Update(h batch.Header, firstOffset, appendTime int64) {
	s.mustNotBeInTx("Update")
	s.update(h, firstOffset, appendTime)
}

func (s *State) update(h batch.Header, firstOffset, appendTime int64) {
	if !h.HasProducerID() {
		return
	}
	// A data batch with a negative sequence or delta never passes
	// batch.Validate; skipping it keeps every State's snapshot restorable.
	// Control batches carry no sequence (-1).
	if !h.Control() && (h.BaseSequence < 0 || h.LastOffsetDelta < 0) {
		return
	}
	e := s.producers[h.ProducerID]
	if e == nil {
		e = &entry{id: h.ProducerID, epoch: h.ProducerEpoch, coordinatorEpoch: -1, txnFirstOffset: -1}
		s.producers[h.ProducerID] = e
	}
	// Offsets only grow: a batch at or below the last one recorded is
	// already recorded (a replay overlapping its snapshot), and taking it
	// again would break the window's order.
	if e.n > 0 && firstOffset <= e.last().LastOffset {
		return
	}
	if e.epoch != h.ProducerEpoch {
		e.epoch = h.ProducerEpoch
		e.n = 0
	}
	e.lastTimestamp = appendTime
	if h.Control() {
		e.txnFirstOffset = -1
		return
	}
	if h.Transactional() && e.txnFirstOffset < 0 {
		e.txnFirstOffset = firstOffset
	}
	e.push(BatchMeta{
		FirstSeq:    h.BaseSequence,
		LastSeq:     incSeq(h.BaseSequence, h.LastOffsetDelta),
		FirstOffset: firstOffset,
		LastOffset:  firstOffset + int64(h.LastOffsetDelta),
		Timestamp:   appendTime,
	})
}

// UpdateMarker records transaction marker m, written at offset at
// appendTime (ms), as [State.Update] records its control batch, and keeps
// its coordinator epoch (which the batch header does not carry) for the
// snapshot and DescribeProducers. The broker calls it after
// storage.Log.AppendMarker, so that a fencing marker's bumped epoch
// refuses the fenced producer's later batches (INVALID_PRODUCER_EPOCH).
func (s *State) UpdateMarker(m Marker, offset, appendTime int64) {
	s.mustNotBeInTx("UpdateMarker")
	s.update(batch.Header{
		BaseOffset: offset, Attributes: markerAttributes, ProducerID: m.ProducerID,
		ProducerEpoch: m.ProducerEpoch, BaseSequence: -1,
	}, offset, appendTime)
	if e := s.producers[m.ProducerID]; e != nil {
		e.coordinatorEpoch = m.CoordinatorEpoch
	}
}

// markerAttributes are a control batch's: transactional (0x10) and
// control (0x20).
const markerAttributes = 0x30

// ReplayBatch is [State.Update] for a batch read back from the log during
// recovery: its offset is its own BaseOffset and its time its
// MaxTimestamp (the append time for LogAppendTime topics, the producer's
// for CreateTime ones, as Kafka uses on reload).
func (s *State) ReplayBatch(h batch.Header) {
	s.Update(h, h.BaseOffset, h.MaxTimestamp)
}

// TruncateTo drops everything at or above offset, for a log truncated to
// end there (a follower truncating to its leader). Batch metadata whose
// last offset is at or above offset goes, and so does an open transaction
// that started there; a producer left without batches is removed entirely,
// so its next batch is accepted at any sequence. Kafka reloads the state
// from a snapshot instead, which can remember more (a producer's batches
// older than the last five); forgetting is the safe side here, since an
// unknown producer is accepted rather than refused.
func (s *State) TruncateTo(offset int64) {
	s.mustNotBeInTx("TruncateTo")
	for id, e := range s.producers {
		n := e.n
		for n > 0 && e.batches[n-1].LastOffset >= offset {
			n--
		}
		e.n = n
		if e.txnFirstOffset >= offset {
			e.txnFirstOffset = -1
		}
		if n == 0 {
			delete(s.producers, id)
		}
	}
}

// RemoveExpired forgets producers whose last write is at least
// ExpirationMs before now (ms) and that have no open transaction, like
// Kafka's removeExpiredProducers. It returns how many it removed. It may
// run while a [Tx] is open (a timer does not hold the append lock) and
// then spares the producers the Tx has touched: they are writing now.
func (s *State) RemoveExpired(now int64) int {
	if s.expirationMs < 0 {
		return 0
	}
	removed := 0
	for id, e := range s.producers {
		if e.txnFirstOffset < 0 && now-e.lastTimestamp >= s.expirationMs && s.tx.record(id) == nil {
			delete(s.producers, id)
			removed++
		}
	}
	return removed
}

// sortedIDs returns the producer ids in ascending order.
func (s *State) sortedIDs() []int64 {
	ids := make([]int64, 0, len(s.producers))
	for id := range s.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *State) mustNotBeInTx(op string) {
	if s.tx.open {
		panic("producer: " + op + " called while a Tx is open")
	}
}

// incSeq returns the sequence delta after seq, wrapping past MaxInt32 to 0
// as Kafka's DefaultRecordBatch.incrementSequence does.
func incSeq(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// inSequence reports whether next may follow last.
func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}
