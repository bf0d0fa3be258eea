package txncoord

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's defaults for the coordinator's settings.
const (
	DefaultPartitions     = 50         // transaction.state.log.num.partitions
	DefaultMaxTimeoutMs   = 900_000    // transaction.max.timeout.ms (15 min)
	DefaultIDExpirationMs = 604800_000 // transactional.id.expiration.ms (7 d)
	// DefaultOffsetsPartitions is offsets.topic.num.partitions.
	DefaultOffsetsPartitions = 50
	// OffsetsTopic is the topic AddOffsetsToTxn adds a partition of.
	OffsetsTopic = "__consumer_offsets"
)

// Config holds the coordinator's settings, with Kafka's names.
type Config struct {
	// Partitions is transaction.state.log.num.partitions.
	Partitions int32
	// OffsetsPartitions is offsets.topic.num.partitions: AddOffsetsToTxn
	// adds __consumer_offsets-PartitionFor(group, OffsetsPartitions).
	OffsetsPartitions int32
	// MaxTimeoutMs is transaction.max.timeout.ms: a larger client timeout
	// gets INVALID_TRANSACTION_TIMEOUT.
	MaxTimeoutMs int32
	// IDExpirationMs is transactional.id.expiration.ms.
	IDExpirationMs int64
}

func (c *Config) defaults() {
	if c.Partitions <= 0 {
		c.Partitions = DefaultPartitions
	}
	if c.OffsetsPartitions <= 0 {
		c.OffsetsPartitions = DefaultOffsetsPartitions
	}
	if c.MaxTimeoutMs <= 0 {
		c.MaxTimeoutMs = DefaultMaxTimeoutMs
	}
	if c.IDExpirationMs <= 0 {
		c.IDExpirationMs = DefaultIDExpirationMs
	}
}

// Allocator returns a fresh producer id. An error that is a *kerr.Error
// answers the request with its code, any other KAFKA_STORAGE_ERROR (as
// the broker's non-transactional InitProducerId does).
type Allocator func() (int64, error)

// ReqID identifies a client request to the caller; the coordinator hands
// it back in the request's [Answer], now or in the [Effects] of a later
// call.
type ReqID uint64

// Answer is the reply to one request. Err is a Kafka error code, already
// mapped for the request's version (PRODUCER_FENCED becomes
// INVALID_PRODUCER_EPOCH for versions before KIP-588). ProducerID and
// Epoch are set for InitProducerId (-1, -1 with an error).
type Answer struct {
	Req        ReqID
	Err        int16
	ProducerID int64
	Epoch      int16
}

// Append is a record the broker must append to __transaction_state
// partition Partition, as its leader at CoordinatorEpoch, and acknowledge
// with [Coordinator.AppendDone] once it is durable (acks=all, min ISR) or
// failed. Value nil is a tombstone.
type Append struct {
	Token            uint64
	Partition        int32
	CoordinatorEpoch int32
	TxnID            string
	Key, Value       []byte
}

// Marker is a WriteTxnMarkers entry the broker must deliver to the leaders
// of Partitions and acknowledge per partition with
// [Coordinator.MarkerDone]. A retried marker comes back with only the
// partitions to retry; the broker should back off (retry.backoff.ms)
// before resending.
type Marker struct {
	TxnID            string
	ProducerID       int64
	Epoch            int16
	Commit           bool
	CoordinatorEpoch int32
	Partitions       []TopicPartition
}

// Effects is what a call asks of the broker: answers to send, records to
// append, markers to deliver, and notes worth a log line.
type Effects struct {
	Answers []Answer
	Appends []Append
	Markers []Marker
	Notes   []string
}

func (e *Effects) add(o Effects) {
	e.Answers = append(e.Answers, o.Answers...)
	e.Appends = append(e.Appends, o.Appends...)
	e.Markers = append(e.Markers, o.Markers...)
	e.Notes = append(e.Notes, o.Notes...)
}

func (e *Effects) note(format string, args ...any) {
	e.Notes = append(e.Notes, fmt.Sprintf(format, args...))
}

// waiter is a request waiting for an append.
type waiter struct {
	req     ReqID
	api     kmsg.Key
	version int16
	// onSuccess is the answer once the append is durable: NONE, or
	// CONCURRENT_TRANSACTIONS for the abort an InitProducerId fence starts.
	onSuccess int16
}

type appendKind int8

const (
	kindInit     appendKind = iota // InitProducerId → Empty
	kindAdd                        // AddPartitionsToTxn / AddOffsetsToTxn → Ongoing
	kindPrepare                    // EndTxn, fence or timeout → PrepareCommit/PrepareAbort
	kindComplete                   // all markers acked → CompleteCommit/CompleteAbort
	kindDead                       // expiry → tombstone
)

type pendingAppend struct {
	kind       appendKind
	part       int32
	coordEpoch int32
	txnID      string
	t          transit
	w          *waiter // nil when no client waits
}

type partition struct {
	state PartitionState
	epoch int32
	txns  map[string]*txnMeta
}

// Coordinator is the transaction coordinator's deterministic core: the
// metadata of every transactional id of the __transaction_state
// partitions this broker leads, and the planner of their transitions. It
// does no I/O and starts no goroutine; time comes in as milliseconds.
//
// It is not safe for concurrent use: the broker serialises calls (one
// mutex). Every slice in returned [Effects] (keys, values, partitions) is
// freshly allocated and owned by the caller; Records passed to Load are
// only read during the call. Load's errors wrap [ErrCorrupt] or
// [ErrUnknownVersion]; no other method fails (refusals are Kafka error
// codes in answers). AppendDone and MarkerDone are idempotent: a token or
// ack seen before, or of an older coordinator epoch, is ignored. The same
// calls in the same order give the same Effects in the same order.
type Coordinator struct {
	cfg     Config
	alloc   Allocator
	parts   map[int32]*partition
	appends map[uint64]*pendingAppend // in flight, by token
	nextTok uint64
}

// New returns a coordinator owning no partition.
func New(cfg Config, alloc Allocator) *Coordinator {
	cfg.defaults()
	return &Coordinator{cfg: cfg, alloc: alloc, parts: map[int32]*partition{}, appends: map[uint64]*pendingAppend{}}
}

// PartitionFor returns the __transaction_state partition of txnID.
func (c *Coordinator) PartitionFor(txnID string) int32 { return PartitionFor(txnID, c.cfg.Partitions) }

// PartitionState returns the state of __transaction_state partition p and
// the coordinator epoch it was loaded at.
func (c *Coordinator) PartitionState(p int32) (PartitionState, int32) {
	if pt := c.parts[p]; pt != nil {
		return pt.state, pt.epoch
	}
	return NotOwned, -1
}

// lookup finds txnID's partition and metadata (m nil when unknown). code is
// NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when the partition is not
// served.
func (c *Coordinator) lookup(txnID string) (*partition, *txnMeta, int16) {
	pt := c.parts[c.PartitionFor(txnID)]
	switch {
	case pt == nil:
		return nil, nil, kerr.NotCoordinator.Code
	case pt.state == Loading:
		return nil, nil, kerr.CoordinatorLoadInProgress.Code
	}
	return pt, pt.txns[txnID], 0
}

// clientCode maps a coordinator error for an API version: KIP-588 made
// PRODUCER_FENCED the answer from InitProducerId v4, AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn v2; older versions get INVALID_PRODUCER_EPOCH.
func clientCode(api kmsg.Key, version int16, code int16) int16 {
	if code != kerr.ProducerFenced.Code {
		return code
	}
	switch {
	case api == kmsg.InitProducerID && version < 4,
		(api == kmsg.AddPartitionsToTxn || api == kmsg.AddOffsetsToTxn || api == kmsg.EndTxn) && version < 2:
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// appendCode maps the error of a __transaction_state append as Kafka's
// TransactionStateManager does, so the client retries or re-discovers.
func appendCode(code int16) int16 {
	switch code {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code:
		return kerr.UnknownServerError.Code
	}
	return code
}

func allocCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.KafkaStorageError.Code
}

func (w *waiter) answer(code int16, pid int64, epoch int16) Answer {
	code = clientCode(w.api, w.version, code)
	if code != 0 || w.api != kmsg.InitProducerID {
		pid, epoch = -1, -1
	}
	return Answer{Req: w.req, Err: code, ProducerID: pid, Epoch: epoch}
}

// answerNow is the Effects of a request answered without an append.
func answerNow(w *waiter, code int16) Effects {
	return Effects{Answers: []Answer{w.answer(code, -1, -1)}}
}

// appendTransit asks for t to be appended for m, at partition pt.
func (c *Coordinator) appendTransit(pt *partition, m *txnMeta, kind appendKind, t transit, w *waiter) Effects {
	c.nextTok++
	tok := c.nextTok
	p := c.PartitionFor(m.id)
	c.appends[tok] = &pendingAppend{kind: kind, part: p, coordEpoch: pt.epoch, txnID: m.id, t: t, w: w}
	a := Append{Token: tok, Partition: p, CoordinatorEpoch: pt.epoch, TxnID: m.id, Key: EncodeKey(m.id)}
	if kind != kindDead {
		a.Value = EncodeValue(t.record())
	}
	return Effects{Appends: []Append{a}}
}

// AppendDone acknowledges the append of token: code is the produce error
// of the __transaction_state write (0 when durable). A stale token (its
// partition unloaded or reloaded since) is ignored.
func (c *Coordinator) AppendDone(now int64, token uint64, code int16) Effects {
	var e Effects
	pa := c.appends[token]
	if pa == nil {
		return e
	}
	delete(c.appends, token)
	pt := c.parts[pa.part]
	if pt == nil || pt.state != Loaded || pt.epoch != pa.coordEpoch {
		return e // Unload answered the waiter already
	}
	m := pt.txns[pa.txnID]
	if m == nil {
		return e
	}
	code = appendCode(code)
	if code != 0 {
		switch {
		case pa.kind == kindComplete && code == kerr.CoordinatorNotAvailable.Code:
			e.note("%s: append of %s failed (%s), retrying", m.id, pa.t.state, kerr.ErrorForCode(code))
			e.add(c.appendTransit(pt, m, kindComplete, pa.t, nil))
		case pa.kind == kindComplete:
			e.note("%s: append of %s failed (%s), left for the next load", m.id, pa.t.state, kerr.ErrorForCode(code))
		default:
			m.pending = noPending // a failed fence keeps its epochAhead
			if pa.w != nil {
				e.Answers = append(e.Answers, pa.w.answer(code, -1, -1))
			}
		}
		return e
	}
	if pa.kind == kindDead {
		delete(pt.txns, m.id)
		return e
	}
	if err := m.completeTransition(pa.t); err != nil {
		e.note("%v", err)
		if pa.w != nil {
			e.Answers = append(e.Answers, pa.w.answer(kerr.UnknownServerError.Code, -1, -1))
		}
		return e
	}
	if pa.w != nil {
		e.Answers = append(e.Answers, pa.w.answer(pa.w.onSuccess, m.producerID, m.epoch))
	}
	if pa.kind == kindPrepare {
		e.add(c.startMarkers(pt, m, now))
	}
	return e
}

// startMarkers moves a durable PrepareX to pending CompleteX and asks for
// its markers (Kafka's prepareComplete + addTxnMarkersToSend).
func (c *Coordinator) startMarkers(pt *partition, m *txnMeta, now int64) Effects {
	t := m.base(now)
	t.partitions = tpSet{} // Kafka's prepareComplete writes no partitions
	t.state = CompleteCommit
	if m.state == PrepareAbort {
		t.state = CompleteAbort
	}
	if err := m.prepare(t); err != nil {
		return Effects{Notes: []string{err.Error()}}
	}
	m.complete, m.remaining, m.stopped = t, m.partitions.clone(), false
	if len(m.remaining) == 0 {
		return c.appendTransit(pt, m, kindComplete, t, nil)
	}
	return Effects{Markers: []Marker{{
		TxnID: m.id, ProducerID: m.producerID, Epoch: m.epoch, Commit: m.state == PrepareCommit,
		CoordinatorEpoch: pt.epoch, Partitions: m.remaining.sorted(),
	}}}
}

// Unload gives up __transaction_state partition p (leadership lost):
// requests waiting for one of its appends are answered NOT_COORDINATOR,
// and later acknowledgements of its appends and markers are ignored.
func (c *Coordinator) Unload(p int32) Effects {
	var e Effects
	for _, tok := range slices.Sorted(maps.Keys(c.appends)) {
		pa := c.appends[tok]
		if pa.part != p {
			continue
		}
		delete(c.appends, tok)
		if pa.w != nil {
			e.Answers = append(e.Answers, pa.w.answer(kerr.NotCoordinator.Code, -1, -1))
		}
	}
	delete(c.parts, p)
	return e
}

// BeginLoad marks partition p Loading at coordinator epoch coordEpoch (the
// partition's leader epoch): its ids get COORDINATOR_LOAD_IN_PROGRESS
// until [Coordinator.Load]. State of an earlier epoch is unloaded first.
func (c *Coordinator) BeginLoad(p int32, coordEpoch int32) Effects {
	e := c.Unload(p)
	c.parts[p] = &partition{state: Loading, epoch: coordEpoch, txns: map[string]*txnMeta{}}
	return e
}

// Load replays the records of partition p in offset order (newest record
// of an id wins, a tombstone removes it) and serves the partition at
// coordEpoch. Transactions found in PrepareCommit/PrepareAbort have their
// markers (re)sent: they come back in the Effects, carrying coordEpoch.
// On an error (a corrupt record, an unknown value version) the partition
// stays Loading and nothing of it is served.
func (c *Coordinator) Load(now int64, p int32, coordEpoch int32, recs []Record) (Effects, error) {
	var e Effects
	if pt := c.parts[p]; pt == nil || pt.state != Loading || pt.epoch != coordEpoch {
		e = c.BeginLoad(p, coordEpoch)
	}
	txns := map[string]*txnMeta{}
	for i, r := range recs {
		id, err := DecodeKey(r.Key)
		if errors.Is(err, ErrUnknownVersion) {
			e.note("record %d: %v, skipped", i, err)
			continue
		}
		if err != nil {
			return e, fmt.Errorf("txncoord: load partition %d, record %d: %w", p, i, err)
		}
		if r.Value == nil {
			delete(txns, id)
			continue
		}
		v, err := DecodeValue(r.Value)
		if err != nil {
			return e, fmt.Errorf("txncoord: load partition %d, record %d (%q): %w", p, i, id, err)
		}
		txns[id] = metaFromRecord(id, v)
	}
	pt := c.parts[p]
	pt.txns, pt.state = txns, Loaded
	for _, id := range slices.Sorted(maps.Keys(txns)) {
		if m := txns[id]; m.state == PrepareCommit || m.state == PrepareAbort {
			e.add(c.startMarkers(pt, m, now))
		}
	}
	return e, nil
}
