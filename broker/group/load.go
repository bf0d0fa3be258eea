package group

// Loading a __consumer_offsets partition: the broker reads the partition's
// log from its start, batch by batch, and hands each batch to a [Loader];
// the loader installs offsets in the [Store] as it goes and keeps the
// newest GroupMetadata record of each group (or its tombstone); Finish
// hands those to the membership state machine. Offsets of a partition
// are visible only once the broker marks it loaded (requests meanwhile get
// COORDINATOR_LOAD_IN_PROGRESS), so a half-replayed state is never served.

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group/consumer"
	"github.com/strata-io/strata/broker/group/sharegroup"
	"github.com/strata-io/strata/internal/batch"
)

// controlType returns the type of a control batch's first record
// (kmsg.ControlRecordKeyTypeAbort or Commit); ok false for other control
// records.
func controlType(b []byte) (typ kmsg.ControlRecordKeyType, ok bool, err error) {
	first := true
	err = batch.Records(b, func(r batch.Record) error {
		if !first {
			return nil
		}
		first = false
		var k kmsg.ControlRecordKey
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("%w: control record key: %v", ErrBadRecord, err)
		}
		typ = k.Type
		ok = typ == kmsg.ControlRecordKeyTypeAbort || typ == kmsg.ControlRecordKeyTypeCommit
		return nil
	})
	return typ, ok, err
}

// Loader replays one partition's records. It is not safe for concurrent
// use: one goroutine loads one partition.
type Loader struct {
	store     *Store
	partition int32
	groups    map[string]*GroupSnapshot // nil value: tombstoned
	order     []string
	// Records counts the records replayed; Skipped those of unknown key
	// versions.
	Records, Skipped int
	// consumer holds the KIP-848 consumer group records (key versions
	// 3-8) in log order, for consumer.Replay.
	consumer []consumer.Record
	// share holds the share group records (key versions 10-15) in log
	// order, for sharegroup.Replay.
	share []sharegroup.Record
}

// NewLoader starts the load of partition into store. It first forgets
// whatever store held for the partition (a reload starts from nothing).
// From then until Finish (or Store.Unload) the store remembers the
// transaction completions made on the partition, to apply them again at
// Finish: a marker written after the loader's last read completes offsets
// the loader replays later.
func NewLoader(store *Store, partition int32) *Loader {
	store.Unload(partition)
	store.mu.Lock()
	store.loading[partition] = []completion{}
	store.mu.Unlock()
	return &Loader{store: store, partition: partition, groups: map[string]*GroupSnapshot{}}
}

// Batch replays one whole record batch read from the log. The records of
// a transactional batch are held pending for its producer; a control
// batch (a COMMIT or ABORT marker) completes the producer's pending
// offsets written before it, as Kafka's loader does: committed ones apply
// (unless a newer record committed the partition), aborted ones never;
// those still open at the end of the log stay pending.
func (l *Loader) Batch(b []byte) error {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if h.Control() {
		if !h.HasProducerID() {
			return nil
		}
		typ, ok, err := controlType(b)
		if err != nil || !ok {
			return err
		}
		l.store.mu.Lock()
		l.store.completeLocked(l.partition, completion{producerID: h.ProducerID,
			commit: typ == kmsg.ControlRecordKeyTypeCommit, before: h.BaseOffset})
		l.store.mu.Unlock()
		return nil
	}
	txn := h.Transactional() && h.HasProducerID()
	if !txn {
		if err := l.consumerRecords(b); err != nil {
			return err
		}
	}
	return DecodeBatch(b, func(at int64, e Entry) error {
		l.Records++
		if txn && e.IsOffset {
			l.store.applyPending(l.partition, h.ProducerID, e, at)
			return nil
		}
		l.store.Apply(l.partition, e, at)
		if e.IsOffset {
			return nil
		}
		if _, seen := l.groups[e.Group]; !seen {
			l.order = append(l.order, e.Group)
		}
		if e.Deleted {
			l.groups[e.Group] = nil
			return nil
		}
		g := e.Snapshot
		l.groups[e.Group] = &g
		return nil
	})
}

// Finish calls fn with the newest snapshot of each group seen, in first-seen
// order; a group whose newest record is a tombstone comes as a snapshot
// with only Group set and nil Members (the contract's "remove").
func (l *Loader) Finish(fn func(partition int32, g GroupSnapshot)) {
	l.store.mu.Lock()
	late := l.store.loading[l.partition]
	delete(l.store.loading, l.partition)
	for _, c := range late {
		l.store.completeLocked(l.partition, c)
	}
	l.store.mu.Unlock()
	for _, name := range l.order {
		g := l.groups[name]
		if g == nil {
			fn(l.partition, GroupSnapshot{Group: name})
			continue
		}
		fn(l.partition, *g)
	}
}

// consumerRecords keeps the consumer group records (key versions 3-8) of
// one non-control batch; the other versions are DecodeBatch's.
func (l *Loader) consumerRecords(b []byte) error {
	return batch.Records(b, func(r batch.Record) error {
		if r.KeyNull || len(r.Key) < 2 {
			return nil
		}
		var val []byte
		if !r.ValueNull {
			val = r.Value
		}
		v := int16(binary.BigEndian.Uint16(r.Key))
		if sharegroup.IsShareType(v) {
			rec, ok, err := sharegroup.DecodeRecord(r.Key, val)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrBadRecord, err)
			}
			if ok {
				l.Records++
				l.share = append(l.share, rec)
			}
			return nil
		}
		if v < consumer.TypeGroupMetadata || v > consumer.TypeCurrentAssignment {
			return nil
		}
		rec, ok, err := consumer.DecodeRecord(r.Key, val)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadRecord, err)
		}
		if ok {
			l.Records++
			l.consumer = append(l.consumer, rec)
		}
		return nil
	})
}

// ConsumerRecords returns the consumer group records (key versions 3-8)
// replayed so far, in log order: the input of consumer.Replay.
func (l *Loader) ConsumerRecords() []consumer.Record { return l.consumer }

// ShareRecords returns the share group records (key versions 10-15)
// replayed so far, in log order: the input of sharegroup.Replay.
func (l *Loader) ShareRecords() []sharegroup.Record { return l.share }
