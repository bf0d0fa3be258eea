package group

// The records of __consumer_offsets, in Kafka's own schemas (kmsg carries
// them, generated from Kafka's group-coordinator JSON), so Kafka's tools
// (kafka-console-consumer with the OffsetsMessageFormatter, kafka-dump-log
// --offsets-decoder) read our log as theirs:
//
//	key   = int16 version | fields
//	        version 0/1: OffsetCommitKey   group string | topic string | partition int32
//	        version 2:   GroupMetadataKey  group string
//	value = int16 version | fields, or null (a tombstone: the key is deleted)
//	        OffsetCommitValue v3: offset int64 | leader_epoch int32 |
//	                              metadata string | commit_timestamp int64
//	        OffsetCommitValue v1: offset int64 | metadata string |
//	                              commit_timestamp int64 | expire_timestamp int64
//	                              (only when a v1 client set a retention)
//	        GroupMetadataValue v3: protocol_type string | generation int32 |
//	                              protocol nullable string | leader nullable string |
//	                              current_state_timestamp int64 | members [...]
//
// The records go into uncompressed magic-2 batches with no producer id
// (Kafka's coordinator writes them the same way: compression none,
// offsets.topic.compression.codec 0), built here and appended through the
// partition's leader append path.
//
// Format migration: a reader accepts every key version Kafka ever wrote
// (0-2) and every value version kmsg decodes; writers use the versions
// above, the newest non-flexible ones every Kafka since 2.3 reads.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
)

// Record key versions, as Kafka's GroupCoordinatorRecordSerde numbers them.
const (
	offsetCommitKeyVersion  = 1 // 0 and 1 are both OffsetCommitKey
	groupMetadataKeyVersion = 2

	offsetCommitValueVersion        = 3
	offsetCommitValueVersionExpires = 1 // the one version with an expire timestamp
	groupMetadataValueVersion       = 3
)

// ErrBadRecord is returned by [DecodeRecord] for a __consumer_offsets
// record whose key or value does not decode with Kafka's schemas.
var ErrBadRecord = errors.New("group: bad __consumer_offsets record")

// Offset is one committed offset of a group, as OffsetCommitValue stores
// it. ExpireTimestamp is -1 unless a v1 OffsetCommit asked for a retention.
type Offset struct {
	Offset          int64
	LeaderEpoch     int32
	Metadata        string
	CommitTimestamp int64
	ExpireTimestamp int64
}

// KV is one record to append: Value nil is a tombstone.
type KV struct {
	Key, Value []byte
}

// OffsetCommitRecord returns the record storing off for group/topic/
// partition; off nil gives the tombstone that deletes it.
func OffsetCommitRecord(group, topic string, partition int32, off *Offset) KV {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = offsetCommitKeyVersion, group, topic, partition
	kv := KV{Key: k.AppendTo(nil)}
	if off == nil {
		return kv
	}
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetCommitValueVersion
	if off.ExpireTimestamp >= 0 {
		v.Version = offsetCommitValueVersionExpires
	}
	v.Offset, v.LeaderEpoch, v.Metadata = off.Offset, off.LeaderEpoch, off.Metadata
	v.CommitTimestamp, v.ExpireTimestamp = off.CommitTimestamp, off.ExpireTimestamp
	kv.Value = v.AppendTo(nil)
	return kv
}

// GroupMetadataRecord returns the record storing g; tombstone true gives
// the record deleting the group.
func GroupMetadataRecord(g GroupSnapshot, tombstone bool) KV {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = groupMetadataKeyVersion, g.Group
	kv := KV{Key: k.AppendTo(nil)}
	if tombstone {
		return kv
	}
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	v.ProtocolType, v.Generation, v.CurrentStateTimestamp = g.ProtocolType, g.Generation, g.StateTimestamp
	if g.Protocol != "" {
		v.Protocol = kmsg.StringPtr(g.Protocol)
	}
	if g.Leader != "" {
		v.Leader = kmsg.StringPtr(g.Leader)
	}
	v.Members = []kmsg.GroupMetadataValueMember{}
	for _, m := range g.Members {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = m.RebalanceTimeoutMs, m.SessionTimeoutMs
		vm.Subscription, vm.Assignment = nonNil(m.Subscription), nonNil(m.Assignment)
		v.Members = append(v.Members, vm)
	}
	kv.Value = v.AppendTo(nil)
	return kv
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Entry is one decoded __consumer_offsets record: either an offset
// (Topic set) or a group's metadata (Topic empty). Deleted is a tombstone.
type Entry struct {
	Group     string
	Topic     string
	Partition int32
	IsOffset  bool
	Deleted   bool
	Offset    Offset        // when IsOffset && !Deleted
	Snapshot  GroupSnapshot // when !IsOffset && !Deleted
}

// DecodeRecord decodes one record (value nil: tombstone). Keys of other
// versions (3+: KIP-848 consumer group records, which the Loader hands to
// broker/group/consumer, and share or streams groups) return ok false and
// no error. The entry copies every byte it keeps.
func DecodeRecord(key, value []byte) (e Entry, ok bool, err error) {
	if len(key) < 2 {
		return e, false, fmt.Errorf("%w: key of %d bytes", ErrBadRecord, len(key))
	}
	switch ver := int16(binary.BigEndian.Uint16(key)); ver {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return e, false, fmt.Errorf("%w: offset key: %v", ErrBadRecord, err)
		}
		e = Entry{Group: k.Group, Topic: k.Topic, Partition: k.Partition, IsOffset: true, Deleted: value == nil}
		if value == nil {
			return e, true, nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return e, false, fmt.Errorf("%w: offset value: %v", ErrBadRecord, err)
		}
		e.Offset = Offset{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata,
			CommitTimestamp: v.CommitTimestamp, ExpireTimestamp: -1}
		if v.Version < 3 {
			e.Offset.LeaderEpoch = -1
		}
		if v.Version == 1 {
			e.Offset.ExpireTimestamp = v.ExpireTimestamp
		}
		return e, true, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return e, false, fmt.Errorf("%w: group key: %v", ErrBadRecord, err)
		}
		e = Entry{Group: k.Group, Deleted: value == nil}
		if value == nil {
			return e, true, nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(value); err != nil {
			return e, false, fmt.Errorf("%w: group value: %v", ErrBadRecord, err)
		}
		// Members is never nil here: nil members mean a tombstone to
		// Coordinator.LoadGroup, and an Empty group has none.
		g := GroupSnapshot{Group: k.Group, ProtocolType: v.ProtocolType, Generation: v.Generation,
			StateTimestamp: v.CurrentStateTimestamp, Members: []MemberSnapshot{}}
		if v.Version < 2 {
			g.StateTimestamp = -1
		}
		if v.Protocol != nil {
			g.Protocol = *v.Protocol
		}
		if v.Leader != nil {
			g.Leader = *v.Leader
		}
		for _, m := range v.Members {
			ms := MemberSnapshot{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost,
				RebalanceTimeoutMs: m.RebalanceTimeoutMillis, SessionTimeoutMs: m.SessionTimeoutMillis,
				Subscription: append([]byte{}, m.Subscription...), Assignment: append([]byte{}, m.Assignment...)}
			if v.Version < 1 {
				ms.RebalanceTimeoutMs = m.SessionTimeoutMillis
			}
			if m.InstanceID != nil {
				id := *m.InstanceID
				ms.InstanceID = &id
			}
			g.Members = append(g.Members, ms)
		}
		e.Snapshot = g
		return e, true, nil
	default:
		return e, false, nil
	}
}

// BuildBatch encodes records as one uncompressed magic-2 batch (base
// offset 0, no producer id, every record stamped nowMs) with its CRC-32C
// set: the bytes storage.Log.Append validates and assigns offsets to.
//
//	baseOffset int64 | length int32 | partitionLeaderEpoch int32 | magic int8 (2) |
//	crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32 |
//	firstTimestamp int64 | maxTimestamp int64 | producerId int64 (-1) |
//	producerEpoch int16 (-1) | baseSequence int32 (-1) | records [count int32 | record...]
func BuildBatch(records []KV, nowMs int64) []byte {
	return buildBatch(records, nowMs, -1, -1, -1, 0)
}

// BuildTxnBatch is [BuildBatch] for TxnOffsetCommit: a transactional
// batch (attributes 0x10) of producerID at producerEpoch, base sequence 0,
// as Kafka's coordinator writes transactional offset commits (the log
// does not check the sequences of the coordinator's own batches).
func BuildTxnBatch(records []KV, nowMs int64, producerID int64, producerEpoch int16) []byte {
	return buildBatch(records, nowMs, producerID, producerEpoch, 0, attrTransactional)
}

// attrTransactional is the batch attribute bit of transactional batches.
const attrTransactional = 0x10

func buildBatch(records []KV, nowMs int64, producerID int64, producerEpoch int16, baseSequence int32, attrs int16) []byte {
	var body []byte
	for i, kv := range records {
		r := kmsg.Record{OffsetDelta: int32(i), Key: kv.Key, Value: kv.Value}
		enc := r.AppendTo(nil) // Length 0: a one-byte varint prefix
		r.Length = int32(len(enc) - 1)
		body = r.AppendTo(body)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(records) - 1),
		FirstTimestamp: nowMs, MaxTimestamp: nowMs, ProducerID: producerID, ProducerEpoch: producerEpoch, FirstSequence: baseSequence,
		NumRecords: int32(len(records)), Records: body,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], batch.Checksum(out))
	return out
}

// DecodeBatch calls fn for each record of one whole batch b (any
// compression, as a log written by another tool may hold), with the
// record's offset. Unknown key versions are skipped.
func DecodeBatch(b []byte, fn func(offset int64, e Entry) error) error {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if h.Control() {
		return nil // transaction markers: no group data
	}
	return batch.Records(b, func(r batch.Record) error {
		if r.KeyNull {
			return nil // Kafka skips keyless records here too
		}
		var val []byte
		if !r.ValueNull {
			val = r.Value
		}
		e, ok, err := DecodeRecord(r.Key, val)
		if err != nil || !ok {
			return err
		}
		return fn(h.BaseOffset+int64(r.OffsetDelta), e)
	})
}
