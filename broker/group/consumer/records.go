package consumer

// The __consumer_offsets records of consumer groups, in Kafka's
// group-coordinator schemas (kmsg has no types for them, so they are
// defined here; the byte primitives are franz-go's kbin):
//
//	key   = int16 type | group string16 [| member string16]      (not flexible)
//	value = int16 version (0) | fields (flexible: compact strings and
//	        arrays, uvarint lengths) | tagged fields, or null (tombstone)
//
//	type 3 ConsumerGroupMetadata          value: epoch int32 | tag0 metadata_hash int64
//	type 4 ConsumerGroupPartitionMetadata value: topics [id uuid | name | partitions int32 |
//	                                             partition_racks [partition int32 | racks []string]]
//	type 5 ConsumerGroupMemberMetadata    value: instance_id? | rack_id? | client_id | client_host |
//	                                             subscribed_topic_names []string | regex? |
//	                                             rebalance_timeout_ms int32 | server_assignor?
//	type 6 ConsumerGroupTargetAssignmentMetadata value: assignment_epoch int32
//	type 7 ConsumerGroupTargetAssignmentMember   value: topic_partitions [id uuid | partitions []int32]
//	type 8 ConsumerGroupCurrentMemberAssignment  value: member_epoch int32 | previous_member_epoch int32 |
//	                                             state int8 | assigned [id | partitions] |
//	                                             pending_revocation [id | partitions]
//
// ("?" is a compact nullable string: null is written for "".)
//
// Type 5 carries Kafka's tagged ClassicMemberMetadata (tag 0: session
// timeout int32 | protocols [name | metadata bytes]) for classic-protocol
// members of a consumer group.
//
// Format migration: readers skip tagged fields they do not know (Kafka's
// CreationTimeMs, AssignmentEpochs of KIP-1251,
// AssignmentTimestamp) and accept value version 0 only, the one Kafka
// has. Type 4 is decoded for logs of Kafka before 4.1 but never written:
// the metadata hash of type 3 replaced it (KIP-1101), and [Replay] only
// needs the hash.

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kbin"
)

// Record key types of the consumer group records.
const (
	TypeGroupMetadata     int16 = 3
	TypePartitionMetadata int16 = 4
	TypeMemberMetadata    int16 = 5
	TypeTargetMetadata    int16 = 6
	TypeTargetMember      int16 = 7
	TypeCurrentAssignment int16 = 8
)

// maxRackedPartition bounds the partition index of a type 4 record's rack
// entry (Kafka caps a topic far below it in practice).
const maxRackedPartition = 1 << 20

// ErrBadRecord is returned by [DecodeRecord] for bytes that do not decode
// with the schemas above.
var ErrBadRecord = errors.New("consumer: bad consumer group record")

// Record is one consumer group record; Deleted marks a tombstone.
type Record interface {
	// Type is the record's key type (3-8).
	Type() int16
	// GroupID is the group the record belongs to.
	GroupID() string
}

// GroupMetadataRecord is ConsumerGroupMetadataKey/Value (type 3).
type GroupMetadataRecord struct {
	Group        string
	Deleted      bool
	Epoch        int32
	MetadataHash int64
}

// PartitionMetadataRecord is ConsumerGroupPartitionMetadataKey/Value
// (type 4), the subscribed topics' metadata before KIP-1101.
type PartitionMetadataRecord struct {
	Group   string
	Deleted bool
	Topics  []Topic
}

// MemberMetadataRecord is ConsumerGroupMemberMetadataKey/Value (type 5).
type MemberMetadataRecord struct {
	Group, MemberID      string
	Deleted              bool
	InstanceID, RackID   string
	ClientID, ClientHost string
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	RebalanceTimeoutMs   int32
	ServerAssignor       string
	// Classic is the tagged ClassicMemberMetadata (tag 0): set for a
	// member that speaks the classic protocol inside a consumer group
	// (online migration), nil for a consumer-protocol member.
	Classic *ClassicMetadata
}

// ClassicMetadata is what a classic-protocol member of a consumer group
// keeps of its JoinGroup (Kafka's ClassicMemberMetadata): its session
// timeout and the protocols it supports, in its order.
type ClassicMetadata struct {
	SessionTimeoutMs int32
	Protocols        []ClassicProtocol
}

// ClassicProtocol is one JoinGroup protocol: its name (an assignor) and
// its metadata (ConsumerProtocol subscription bytes).
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

func (c *ClassicMetadata) clone() *ClassicMetadata {
	if c == nil {
		return nil
	}
	n := &ClassicMetadata{SessionTimeoutMs: c.SessionTimeoutMs, Protocols: make([]ClassicProtocol, len(c.Protocols))}
	for i, p := range c.Protocols {
		n.Protocols[i] = ClassicProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)}
	}
	return n
}

func (c *ClassicMetadata) equal(o *ClassicMetadata) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.SessionTimeoutMs == o.SessionTimeoutMs && slices.EqualFunc(c.Protocols, o.Protocols, func(a, b ClassicProtocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// TargetMetadataRecord is ConsumerGroupTargetAssignmentMetadataKey/Value
// (type 6).
type TargetMetadataRecord struct {
	Group           string
	Deleted         bool
	AssignmentEpoch int32
}

// TargetMemberRecord is ConsumerGroupTargetAssignmentMemberKey/Value
// (type 7).
type TargetMemberRecord struct {
	Group, MemberID string
	Deleted         bool
	Partitions      Assignment
}

// CurrentAssignmentRecord is ConsumerGroupCurrentMemberAssignmentKey/Value
// (type 8).
type CurrentAssignmentRecord struct {
	Group, MemberID     string
	Deleted             bool
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               MemberState
	Assigned            Assignment
	PendingRevocation   Assignment
}

func (*GroupMetadataRecord) Type() int16     { return TypeGroupMetadata }
func (*PartitionMetadataRecord) Type() int16 { return TypePartitionMetadata }
func (*MemberMetadataRecord) Type() int16    { return TypeMemberMetadata }
func (*TargetMetadataRecord) Type() int16    { return TypeTargetMetadata }
func (*TargetMemberRecord) Type() int16      { return TypeTargetMember }
func (*CurrentAssignmentRecord) Type() int16 { return TypeCurrentAssignment }

func (r *GroupMetadataRecord) GroupID() string     { return r.Group }
func (r *PartitionMetadataRecord) GroupID() string { return r.Group }
func (r *MemberMetadataRecord) GroupID() string    { return r.Group }
func (r *TargetMetadataRecord) GroupID() string    { return r.Group }
func (r *TargetMemberRecord) GroupID() string      { return r.Group }
func (r *CurrentAssignmentRecord) GroupID() string { return r.Group }

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func appendAssignment(dst []byte, a Assignment) []byte {
	ids := a.topicIDs()
	dst = kbin.AppendCompactArrayLen(dst, len(ids))
	for _, t := range ids {
		dst = kbin.AppendUuid(dst, t)
		dst = kbin.AppendCompactArrayLen(dst, len(a[t]))
		for _, p := range a[t] {
			dst = kbin.AppendInt32(dst, p)
		}
		dst = kbin.AppendUvarint(dst, 0) // no tagged fields
	}
	return dst
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = kbin.AppendCompactString(dst, s)
	}
	return dst
}

// EncodeRecord returns the key and value bytes of r (value nil for a
// tombstone).
func EncodeRecord(r Record) (key, value []byte) {
	key = kbin.AppendInt16(nil, r.Type())
	key = kbin.AppendString(key, r.GroupID())
	var deleted bool
	switch r := r.(type) {
	case *GroupMetadataRecord:
		deleted = r.Deleted
		value = kbin.AppendInt16(nil, 0)
		value = kbin.AppendInt32(value, r.Epoch)
		if r.MetadataHash != 0 {
			value = kbin.AppendUvarint(value, 1)
			value = kbin.AppendUvarint(value, 0) // tag 0
			value = kbin.AppendUvarint(value, 8)
			value = kbin.AppendInt64(value, r.MetadataHash)
		} else {
			value = kbin.AppendUvarint(value, 0)
		}
	case *PartitionMetadataRecord:
		deleted = r.Deleted
		value = kbin.AppendInt16(nil, 0)
		value = kbin.AppendInt32(value, 0) // epoch, unused since 3.8
		value = kbin.AppendCompactArrayLen(value, len(r.Topics))
		for _, t := range r.Topics {
			value = kbin.AppendUuid(value, t.ID)
			value = kbin.AppendCompactString(value, t.Name)
			value = kbin.AppendInt32(value, t.Partitions)
			racked := 0
			for _, rs := range t.Racks {
				if len(rs) > 0 {
					racked++
				}
			}
			value = kbin.AppendCompactArrayLen(value, racked)
			for p, rs := range t.Racks {
				if len(rs) == 0 {
					continue // a partition without racks has no entry
				}
				value = kbin.AppendInt32(value, int32(p))
				value = appendStrings(value, rs)
				value = kbin.AppendUvarint(value, 0)
			}
			value = kbin.AppendUvarint(value, 0)
		}
		value = kbin.AppendUvarint(value, 0)
	case *MemberMetadataRecord:
		key = kbin.AppendString(key, r.MemberID)
		deleted = r.Deleted
		value = kbin.AppendInt16(nil, 0)
		value = kbin.AppendCompactNullableString(value, nullable(r.InstanceID))
		value = kbin.AppendCompactNullableString(value, nullable(r.RackID))
		value = kbin.AppendCompactString(value, r.ClientID)
		value = kbin.AppendCompactString(value, r.ClientHost)
		value = appendStrings(value, r.SubscribedTopicNames)
		value = kbin.AppendCompactNullableString(value, nullable(r.SubscribedTopicRegex))
		value = kbin.AppendInt32(value, r.RebalanceTimeoutMs)
		value = kbin.AppendCompactNullableString(value, nullable(r.ServerAssignor))
		if c := r.Classic; c != nil {
			f := kbin.AppendInt32(nil, c.SessionTimeoutMs)
			f = kbin.AppendCompactArrayLen(f, len(c.Protocols))
			for _, p := range c.Protocols {
				f = kbin.AppendCompactString(f, p.Name)
				f = kbin.AppendCompactBytes(f, p.Metadata)
				f = kbin.AppendUvarint(f, 0)
			}
			f = kbin.AppendUvarint(f, 0)
			value = kbin.AppendUvarint(value, 1)
			value = kbin.AppendUvarint(value, 0) // tag 0
			value = kbin.AppendUvarint(value, uint32(len(f)))
			value = append(value, f...)
		} else {
			value = kbin.AppendUvarint(value, 0)
		}
	case *TargetMetadataRecord:
		deleted = r.Deleted
		value = kbin.AppendInt16(nil, 0)
		value = kbin.AppendInt32(value, r.AssignmentEpoch)
		value = kbin.AppendUvarint(value, 0)
	case *TargetMemberRecord:
		key = kbin.AppendString(key, r.MemberID)
		deleted = r.Deleted
		value = kbin.AppendInt16(nil, 0)
		value = appendAssignment(value, r.Partitions)
		value = kbin.AppendUvarint(value, 0)
	case *CurrentAssignmentRecord:
		key = kbin.AppendString(key, r.MemberID)
		deleted = r.Deleted
		value = kbin.AppendInt16(nil, 0)
		value = kbin.AppendInt32(value, r.MemberEpoch)
		value = kbin.AppendInt32(value, r.PreviousMemberEpoch)
		value = kbin.AppendInt8(value, int8(r.State))
		value = appendAssignment(value, r.Assigned)
		value = appendAssignment(value, r.PendingRevocation)
		value = kbin.AppendUvarint(value, 0)
	default:
		panic(fmt.Sprintf("consumer: unknown record %T", r))
	}
	if deleted {
		value = nil
	}
	return key, value
}

// reader wraps kbin.Reader with the pieces the schemas share.
type reader struct{ kbin.Reader }

// skipTags reads a tagged-field section, handing known tags to f (which
// reads exactly the field from the span it is given); unknown tags are
// skipped.
func (r *reader) skipTags(f func(tag uint32, field *reader)) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag := r.Uvarint()
		size := r.Uvarint()
		if int(size) > len(r.Src) || !r.Ok() {
			r.Span(int(size) + 1 + len(r.Src)) // mark bad
			return
		}
		span := r.Span(int(size))
		if f != nil {
			field := &reader{kbin.Reader{Src: span}}
			f(tag, field)
		}
	}
}

func (r *reader) arrayLen() int {
	n := r.CompactArrayLen()
	// A length can never exceed the bytes left (each element takes one
	// at least): refuse it before allocating.
	if n < 0 || int(n) > len(r.Src) {
		if n != 0 {
			r.Span(len(r.Src) + 1)
		}
		return 0
	}
	return int(n)
}

func (r *reader) strings() []string {
	n := r.arrayLen()
	ss := make([]string, 0, n)
	for i := 0; i < n && r.Ok(); i++ {
		ss = append(ss, r.CompactString())
	}
	return ss
}

func (r *reader) assignment() Assignment {
	a := Assignment{}
	n := r.arrayLen()
	for i := 0; i < n && r.Ok(); i++ {
		t := uuid.UUID(r.Uuid())
		np := r.arrayLen()
		for j := 0; j < np && r.Ok(); j++ {
			a.add(t, r.Int32())
		}
		r.skipTags(nil)
	}
	return a
}

// DecodeRecord decodes one record (value nil: a tombstone). Keys of other
// types (offset commits 0-1, classic groups 2, share groups 9+) return ok
// false and no error: the caller handles them elsewhere. Decoded records
// copy every byte they keep.
func DecodeRecord(key, value []byte) (rec Record, ok bool, err error) {
	kr := reader{kbin.Reader{Src: key}}
	typ := kr.Int16()
	if !kr.Ok() {
		return nil, false, fmt.Errorf("%w: key of %d bytes", ErrBadRecord, len(key))
	}
	if typ < TypeGroupMetadata || typ > TypeCurrentAssignment {
		return nil, false, nil
	}
	group := kr.String()
	var member string
	switch typ {
	case TypeMemberMetadata, TypeTargetMember, TypeCurrentAssignment:
		member = kr.String()
	}
	if err := complete(&kr); err != nil {
		return nil, false, fmt.Errorf("%w: type %d key: %v", ErrBadRecord, typ, err)
	}
	deleted := value == nil
	vr := reader{kbin.Reader{Src: value}}
	if !deleted {
		if v := vr.Int16(); vr.Ok() && v != 0 {
			return nil, false, fmt.Errorf("%w: type %d value version %d", ErrBadRecord, typ, v)
		}
	}
	switch typ {
	case TypeGroupMetadata:
		r := &GroupMetadataRecord{Group: group, Deleted: deleted}
		if !deleted {
			r.Epoch = vr.Int32()
			vr.skipTags(func(tag uint32, f *reader) {
				if tag == 0 {
					r.MetadataHash = f.Int64()
					vr.absorb(f)
				}
			})
		}
		rec = r
	case TypePartitionMetadata:
		r := &PartitionMetadataRecord{Group: group, Deleted: deleted}
		if !deleted {
			vr.Int32()
			n := vr.arrayLen()
			for i := 0; i < n && vr.Ok(); i++ {
				t := Topic{ID: uuid.UUID(vr.Uuid()), Name: vr.CompactString(), Partitions: vr.Int32()}
				nr := vr.arrayLen()
				for j := 0; j < nr && vr.Ok(); j++ {
					p := vr.Int32()
					racks := vr.strings()
					vr.skipTags(nil)
					if p >= maxRackedPartition {
						// Racks are held per partition index: refuse an
						// index that would allocate more than any real
						// topic has partitions.
						vr.Span(len(vr.Src) + 1)
					}
					if p >= 0 && p < t.Partitions && len(racks) > 0 && vr.Ok() {
						for len(t.Racks) <= int(p) {
							t.Racks = append(t.Racks, nil)
						}
						t.Racks[p] = racks
					}
				}
				vr.skipTags(nil)
				r.Topics = append(r.Topics, t)
			}
			vr.skipTags(nil)
		}
		rec = r
	case TypeMemberMetadata:
		r := &MemberMetadataRecord{Group: group, MemberID: member, Deleted: deleted}
		if !deleted {
			r.InstanceID = deref(vr.CompactNullableString())
			r.RackID = deref(vr.CompactNullableString())
			r.ClientID = vr.CompactString()
			r.ClientHost = vr.CompactString()
			r.SubscribedTopicNames = vr.strings()
			r.SubscribedTopicRegex = deref(vr.CompactNullableString())
			r.RebalanceTimeoutMs = vr.Int32()
			r.ServerAssignor = deref(vr.CompactNullableString())
			vr.skipTags(func(tag uint32, f *reader) {
				if tag != 0 {
					return
				}
				c := &ClassicMetadata{SessionTimeoutMs: f.Int32()}
				n := f.arrayLen()
				for i := 0; i < n && f.Ok(); i++ {
					p := ClassicProtocol{Name: f.CompactString(), Metadata: slices.Clone(f.CompactBytes())}
					f.skipTags(nil)
					c.Protocols = append(c.Protocols, p)
				}
				f.skipTags(nil)
				if complete(f) != nil {
					f.Span(len(f.Src) + 1)
				}
				vr.absorb(f)
				r.Classic = c
			})
		}
		rec = r
	case TypeTargetMetadata:
		r := &TargetMetadataRecord{Group: group, Deleted: deleted}
		if !deleted {
			r.AssignmentEpoch = vr.Int32()
			vr.skipTags(nil)
		}
		rec = r
	case TypeTargetMember:
		r := &TargetMemberRecord{Group: group, MemberID: member, Deleted: deleted}
		if !deleted {
			r.Partitions = vr.assignment()
			vr.skipTags(nil)
		}
		rec = r
	case TypeCurrentAssignment:
		r := &CurrentAssignmentRecord{Group: group, MemberID: member, Deleted: deleted}
		if !deleted {
			r.MemberEpoch = vr.Int32()
			r.PreviousMemberEpoch = vr.Int32()
			r.State = MemberState(vr.Int8())
			r.Assigned = vr.assignment()
			r.PendingRevocation = vr.assignment()
			vr.skipTags(nil)
		}
		rec = r
	}
	if !deleted {
		if err := complete(&vr); err != nil {
			return nil, false, fmt.Errorf("%w: type %d value: %v", ErrBadRecord, typ, err)
		}
	}
	return rec, true, nil
}

// absorb marks r bad when a tagged field's reader f went bad (a field
// shorter than its type).
func (r *reader) absorb(f *reader) {
	if !f.Ok() {
		r.Span(len(r.Src) + 1)
	}
}

// complete fails a reader that ran short or has bytes left over.
func complete(r *reader) error {
	if err := r.Complete(); err != nil {
		return err
	}
	if len(r.Src) > 0 {
		return fmt.Errorf("%d trailing bytes", len(r.Src))
	}
	return nil
}
