package txncoord

// The records of __transaction_state, written and read with kmsg's
// TxnMetadataKey / TxnMetadataValue (Kafka's TransactionLogKey and
// TransactionLogValue). One record per transition, keyed by transactional
// id; the topic is compacted, so the newest record of an id is its state,
// and a tombstone (null value) removes an expired id.
//
//	key   (version 0, not flexible):
//	  version int16 = 0 | transactional id: int16 length + bytes
//	value (version 1, flexible):
//	  version int16 = 1 | producer id int64 | producer epoch int16 |
//	  timeout ms int32 | state int8 (0..5) |
//	  partitions: compact nullable array of {topic compact string,
//	    partitions compact array of int32, tags} — null when Empty |
//	  last update ms int64 | start ms int64 |
//	  tags: 0 PreviousProducerId int64 (written when not -1),
//	        1 NextProducerId (-1, TV2 only, not written),
//	        2 ClientTransactionVersion int16 (0, not written),
//	        3 NextProducerEpoch (-1, KIP-939, not written)
//
// Format migration: Strata has always written value version 1. The
// decoder also reads version 0 (Kafka before 4.0: the same fields, not
// flexible, no tags). A key version other than 0 is skipped on load, as
// Kafka skips unknown keys; a value version above 1 fails the load, as
// Kafka does, because skipping it could resurrect an older state.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	keyVersion   = 0
	valueVersion = 1
)

// ErrCorrupt is returned by [DecodeKey] and [DecodeValue] (and so by
// [Coordinator.Load]) for bytes that do not parse, or that name a state
// that is never written (Dead, PrepareEpochFence, unknown ids).
var ErrCorrupt = errors.New("txncoord: corrupt __transaction_state record")

// ErrUnknownVersion is returned by [DecodeKey] for a key version other
// than 0 (Load skips such records) and by [DecodeValue] for a value
// version above 1 (Load fails).
var ErrUnknownVersion = errors.New("txncoord: unknown __transaction_state record version")

// Record is one record of a __transaction_state partition as the broker
// reads it back: Value nil is a tombstone.
type Record struct {
	Key, Value []byte
}

// TxnRecord is the decoded value of a __transaction_state record: the
// durable part of a transaction's metadata.
type TxnRecord struct {
	ProducerID         int64
	PreviousProducerID int64 // -1 when none; the id before the last rotation
	Epoch              int16
	TimeoutMs          int32
	State              State
	Partitions         []TopicPartition // sorted; nil when Empty
	LastUpdateMs       int64
	StartMs            int64 // -1 when no transaction has started
}

// EncodeKey returns the record key of a transactional id.
func EncodeKey(txnID string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version = keyVersion
	k.TransactionalID = txnID
	return k.AppendTo(nil)
}

// DecodeKey returns the transactional id of a record key.
func DecodeKey(b []byte) (string, error) {
	if len(b) < 2 {
		return "", fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(b))
	}
	if v := int16(b[0])<<8 | int16(b[1]); v != keyVersion {
		return "", fmt.Errorf("%w: key version %d", ErrUnknownVersion, v)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(b); err != nil {
		return "", fmt.Errorf("%w: key: %v", ErrCorrupt, err)
	}
	return k.TransactionalID, nil
}

// EncodeValue returns the record value of r (version 1, with tags).
func EncodeValue(r TxnRecord) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID = r.ProducerID
	v.ProducerEpoch = r.Epoch
	v.TimeoutMillis = r.TimeoutMs
	v.State = r.State
	v.LastUpdateTimestamp = r.LastUpdateMs
	v.StartTimestamp = r.StartMs
	v.PreviousProducerID = r.PreviousProducerID
	if r.State != Empty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range r.Partitions {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic})
			}
			t := &v.Topics[len(v.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
	}
	return v.AppendTo(nil)
}

// DecodeValue parses a non-nil record value.
func DecodeValue(b []byte) (TxnRecord, error) {
	if len(b) < 2 {
		return TxnRecord{}, fmt.Errorf("%w: value of %d bytes", ErrCorrupt, len(b))
	}
	if ver := int16(b[0])<<8 | int16(b[1]); ver < 0 || ver > valueVersion {
		return TxnRecord{}, fmt.Errorf("%w: value version %d", ErrUnknownVersion, ver)
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(b); err != nil {
		return TxnRecord{}, fmt.Errorf("%w: value: %v", ErrCorrupt, err)
	}
	if v.State < Empty || v.State > CompleteAbort {
		return TxnRecord{}, fmt.Errorf("%w: state %d", ErrCorrupt, v.State)
	}
	r := TxnRecord{
		ProducerID:         v.ProducerID,
		PreviousProducerID: v.PreviousProducerID,
		Epoch:              v.ProducerEpoch,
		TimeoutMs:          v.TimeoutMillis,
		State:              v.State,
		LastUpdateMs:       v.LastUpdateTimestamp,
		StartMs:            v.StartTimestamp,
	}
	if r.State != Empty { // Kafka ignores the partitions of an Empty record
		set := tpSet{}
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				set[TopicPartition{t.Topic, p}] = struct{}{}
			}
		}
		r.Partitions = set.sorted()
	}
	return r, nil
}

func (r TxnRecord) equal(o TxnRecord) bool {
	return r.ProducerID == o.ProducerID && r.PreviousProducerID == o.PreviousProducerID &&
		r.Epoch == o.Epoch && r.TimeoutMs == o.TimeoutMs && r.State == o.State &&
		r.LastUpdateMs == o.LastUpdateMs && r.StartMs == o.StartMs &&
		slices.Equal(r.Partitions, o.Partitions)
}
