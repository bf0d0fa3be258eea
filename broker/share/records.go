package share

// The records of __share_group_state, in Kafka's share-coordinator schemas
// (ShareSnapshotKey/Value apiKey 0, ShareUpdateKey/Value apiKey 1; kmsg has
// no types for them), so Kafka's tools read our log as theirs:
//
//	key   = int16 record type (0 snapshot, 1 update) | fields, not flexible:
//	        group string (int16 length) | topic id uuid (16 bytes) | partition int32
//	value = int16 version (0) | fields, flexible (compact arrays, tagged fields),
//	        or null (a tombstone: DeleteShareGroupState removed the key)
//	        ShareSnapshotValue v0: snapshot_epoch int32 | state_epoch int32 |
//	            leader_epoch int32 | start_offset int64 | create_timestamp int64 |
//	            write_timestamp int64 | state_batches [batch] | tags
//	        ShareUpdateValue v0:   snapshot_epoch int32 | leader_epoch int32 |
//	            start_offset int64 (-1: unchanged) | state_batches [batch] | tags
//	        batch = first_offset int64 | last_offset int64 | delivery_state int8 |
//	            delivery_count int16 | tags
//	        tag 0 of both values: delivery_complete_count int32 (KIP-1226,
//	            Kafka 4.2; default -1, written only when not -1)
//
// [ ] is a compact array: uvarint(n+1), then the elements. Tags are
// uvarint(count) then per tag uvarint(tag) uvarint(size) bytes; unknown
// tags are skipped on read.
//
// Format migration: value version 0 is the only one Kafka defines; a
// reader refuses any other (ErrBadRecord) rather than guess.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// RecordType is a __share_group_state key's record type.
type RecordType int16

// The record types.
const (
	SnapshotRecord RecordType = 0
	UpdateRecord   RecordType = 1
)

const valueVersion = 0

// ErrBadRecord is returned by [DecodeRecord] for bytes that do not decode
// with Kafka's schemas.
var ErrBadRecord = errors.New("share: bad __share_group_state record")

// Key identifies one share-partition: the key of both record types.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// SnapshotValue is ShareSnapshotValue: the whole state of a
// share-partition.
type SnapshotValue struct {
	SnapshotEpoch         int32
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32 // -1: unknown
	CreateTimestamp       int64
	WriteTimestamp        int64
	StateBatches          []StateBatch
}

// UpdateValue is ShareUpdateValue: the batches changed since the snapshot
// of the same SnapshotEpoch.
type UpdateValue struct {
	SnapshotEpoch         int32
	LeaderEpoch           int32
	StartOffset           int64 // -1: unchanged
	DeliveryCompleteCount int32 // -1: unknown
	StateBatches          []StateBatch
}

// Record is one decoded __share_group_state record; a tombstone has
// neither value.
type Record struct {
	Type     RecordType
	Key      Key
	Snapshot *SnapshotValue
	Update   *UpdateValue
}

// Tombstone reports whether the record deletes its key.
func (r Record) Tombstone() bool { return r.Snapshot == nil && r.Update == nil }

type enc struct{ b []byte }

func (e *enc) i8(v int8)   { e.b = append(e.b, byte(v)) }
func (e *enc) i16(v int16) { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *enc) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *enc) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *enc) uv(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *enc) batches(bs []StateBatch) {
	e.uv(uint64(len(bs)) + 1)
	for _, b := range bs {
		e.i64(b.FirstOffset)
		e.i64(b.LastOffset)
		e.i8(int8(b.DeliveryState))
		e.i16(b.DeliveryCount)
		e.uv(0)
	}
}

func (e *enc) completeCountTag(n int32) {
	if n == -1 {
		e.uv(0)
		return
	}
	e.uv(1)
	e.uv(0) // tag
	e.uv(4) // size
	e.i32(n)
}

// EncodeKey encodes a record key.
func EncodeKey(t RecordType, k Key) []byte {
	e := enc{b: make([]byte, 0, 2+2+len(k.Group)+16+4)}
	e.i16(int16(t))
	e.i16(int16(len(k.Group)))
	e.b = append(e.b, k.Group...)
	e.b = append(e.b, k.TopicID[:]...)
	e.i32(k.Partition)
	return e.b
}

// EncodeRecord encodes a record; value is nil for a tombstone. Group names
// longer than 32767 bytes are not representable (Kafka's limit too) and
// panic: group ids are validated long before.
func EncodeRecord(r Record) (key, value []byte) {
	if len(r.Key.Group) > 1<<15-1 {
		panic("share: group id too long")
	}
	key = EncodeKey(r.Type, r.Key)
	switch {
	case r.Type == SnapshotRecord && r.Snapshot != nil:
		s := r.Snapshot
		e := enc{}
		e.i16(valueVersion)
		e.i32(s.SnapshotEpoch)
		e.i32(s.StateEpoch)
		e.i32(s.LeaderEpoch)
		e.i64(s.StartOffset)
		e.i64(s.CreateTimestamp)
		e.i64(s.WriteTimestamp)
		e.batches(s.StateBatches)
		e.completeCountTag(s.DeliveryCompleteCount)
		value = e.b
	case r.Type == UpdateRecord && r.Update != nil:
		u := r.Update
		e := enc{}
		e.i16(valueVersion)
		e.i32(u.SnapshotEpoch)
		e.i32(u.LeaderEpoch)
		e.i64(u.StartOffset)
		e.batches(u.StateBatches)
		e.completeCountTag(u.DeliveryCompleteCount)
		value = e.b
	}
	return key, value
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) take(n int) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		d.err = ErrBadRecord
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) i8() int8 {
	if v := d.take(1); v != nil {
		return int8(v[0])
	}
	return 0
}

func (d *dec) i16() int16 {
	if v := d.take(2); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (d *dec) i32() int32 {
	if v := d.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (d *dec) i64() int64 {
	if v := d.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (d *dec) uv() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = ErrBadRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

// tags reads a tagged-field section; tag 0 (delivery_complete_count) sets
// *complete, the rest are skipped.
func (d *dec) tags(complete *int32) {
	n := d.uv()
	for i := uint64(0); i < n && d.err == nil; i++ {
		tag, size := d.uv(), d.uv()
		if size > uint64(len(d.b)) {
			d.err = ErrBadRecord
			return
		}
		body := d.take(int(size))
		if tag == 0 && complete != nil {
			if len(body) != 4 {
				d.err = ErrBadRecord
				return
			}
			*complete = int32(binary.BigEndian.Uint32(body))
		}
	}
}

func (d *dec) batches() []StateBatch {
	n := d.uv()
	if d.err != nil {
		return nil
	}
	if n == 0 { // a null array: not valid here
		d.err = ErrBadRecord
		return nil
	}
	n--
	if n > uint64(len(d.b))/20 { // each batch is at least 20 bytes
		d.err = ErrBadRecord
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]StateBatch, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		b := StateBatch{FirstOffset: d.i64(), LastOffset: d.i64(), DeliveryState: RecordState(d.i8()), DeliveryCount: d.i16()}
		d.tags(nil)
		out = append(out, b)
	}
	return out
}

// DecodeRecord decodes a record's key and value (nil value: a tombstone).
// It returns ErrBadRecord for a truncated or trailing-garbage input, an
// unknown record type or value version.
func DecodeRecord(key, value []byte) (Record, error) {
	d := dec{b: key}
	r := Record{Type: RecordType(d.i16())}
	if d.err == nil && r.Type != SnapshotRecord && r.Type != UpdateRecord {
		return Record{}, fmt.Errorf("%w: record type %d", ErrBadRecord, r.Type)
	}
	glen := d.i16()
	r.Key.Group = string(d.take(int(glen)))
	copy(r.Key.TopicID[:], d.take(16))
	r.Key.Partition = d.i32()
	if d.err != nil || len(d.b) != 0 {
		return Record{}, fmt.Errorf("%w: key", ErrBadRecord)
	}
	if value == nil {
		return r, nil
	}
	d = dec{b: value}
	if v := d.i16(); d.err == nil && v != valueVersion {
		return Record{}, fmt.Errorf("%w: value version %d", ErrBadRecord, v)
	}
	if r.Type == SnapshotRecord {
		s := &SnapshotValue{DeliveryCompleteCount: -1}
		s.SnapshotEpoch, s.StateEpoch, s.LeaderEpoch = d.i32(), d.i32(), d.i32()
		s.StartOffset, s.CreateTimestamp, s.WriteTimestamp = d.i64(), d.i64(), d.i64()
		s.StateBatches = d.batches()
		d.tags(&s.DeliveryCompleteCount)
		r.Snapshot = s
	} else {
		u := &UpdateValue{DeliveryCompleteCount: -1}
		u.SnapshotEpoch, u.LeaderEpoch, u.StartOffset = d.i32(), d.i32(), d.i64()
		u.StateBatches = d.batches()
		d.tags(&u.DeliveryCompleteCount)
		r.Update = u
	}
	if d.err != nil || len(d.b) != 0 {
		return Record{}, fmt.Errorf("%w: value", ErrBadRecord)
	}
	return r, nil
}
