package sharegroup

// The __consumer_offsets records of share groups, in Kafka's
// group-coordinator schemas (Kafka 4.x, ShareGroup*Key/Value.json; kmsg
// has no types for them, so they are defined here with franz-go's kbin
// primitives, as broker/group/consumer does for types 3-8):
//
//	key   = int16 type | group string16 [| member string16]      (not flexible)
//	value = int16 version (0) | fields (flexible: compact strings and
//	        arrays, uvarint lengths) | tagged fields, or null (tombstone)
//
//	type 10 ShareGroupMemberMetadata   key +member  value: rack_id? | client_id | client_host |
//	                                                      subscribed_topic_names []string
//	type 11 ShareGroupMetadata                      value: epoch int32 | metadata_hash int64
//	type 12 ShareGroupTargetAssignmentMetadata      value: assignment_epoch int32
//	type 13 ShareGroupTargetAssignmentMember +member value: topic_partitions [id uuid | partitions []int32]
//	type 14 ShareGroupCurrentMemberAssignment +member value: member_epoch int32 | previous_member_epoch int32 |
//	                                                      state int8 | assigned [id uuid | partitions []int32]
//	type 15 ShareGroupStatePartitionMetadata        value: initializing [id uuid | name | partitions []int32 |
//	                                                      create_timestamp int64] | initialized [same] |
//	                                                      deleting [id uuid | name]
//
// ("?" is a compact nullable string: null is written for "".)
//
// Format migration: value version 0 only, the one Kafka has; unknown
// tagged fields are skipped. Type 9 (ShareGroupPartitionMetadata, the
// subscribed topics' metadata before KIP-1101's hash in type 11) is
// neither written nor decoded: DecodeRecord returns ok false for it, as
// for every type outside 10-15.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kbin"
)

// Record key types of the share group records.
const (
	TypeMemberMetadata         int16 = 10
	TypeGroupMetadata          int16 = 11
	TypeTargetMetadata         int16 = 12
	TypeTargetMember           int16 = 13
	TypeCurrentAssignment      int16 = 14
	TypeStatePartitionMetadata int16 = 15
)

// IsShareType reports whether a __consumer_offsets key type is one of the
// share group records this package decodes.
func IsShareType(t int16) bool { return t >= TypeMemberMetadata && t <= TypeStatePartitionMetadata }

// ErrBadRecord is returned by [DecodeRecord] for bytes that do not decode
// with the schemas above.
var ErrBadRecord = errors.New("sharegroup: bad share group record")

// Record is one share group record; Deleted marks a tombstone.
type Record interface {
	Type() int16
	GroupID() string
}

// MemberMetadataRecord is ShareGroupMemberMetadataKey/Value (type 10).
type MemberMetadataRecord struct {
	Group, MemberID      string
	Deleted              bool
	RackID               string
	ClientID, ClientHost string
	SubscribedTopicNames []string
}

// GroupMetadataRecord is ShareGroupMetadataKey/Value (type 11).
type GroupMetadataRecord struct {
	Group        string
	Deleted      bool
	Epoch        int32
	MetadataHash int64
}

// TargetMetadataRecord is ShareGroupTargetAssignmentMetadataKey/Value
// (type 12).
type TargetMetadataRecord struct {
	Group           string
	Deleted         bool
	AssignmentEpoch int32
}

// TargetMemberRecord is ShareGroupTargetAssignmentMemberKey/Value (type 13).
type TargetMemberRecord struct {
	Group, MemberID string
	Deleted         bool
	Partitions      Assignment
}

// CurrentAssignmentRecord is ShareGroupCurrentMemberAssignmentKey/Value
// (type 14). State is always 0 (STABLE): a share member never waits for
// a revocation.
type CurrentAssignmentRecord struct {
	Group, MemberID     string
	Deleted             bool
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            Assignment
}

// StateTopic is one topic of a type 15 record.
type StateTopic struct {
	ID         uuid.UUID
	Name       string
	Partitions []int32 // sorted; nil in DeletingTopics
	CreateMs   int64
}

// StatePartitionMetadataRecord is ShareGroupStatePartitionMetadataKey/Value
// (type 15): the topic-partitions whose share state the group has (their
// state is deleted with the group).
type StatePartitionMetadataRecord struct {
	Group        string
	Deleted      bool
	Initializing []StateTopic
	Initialized  []StateTopic
	Deleting     []StateTopic
}

func (*MemberMetadataRecord) Type() int16         { return TypeMemberMetadata }
func (*GroupMetadataRecord) Type() int16          { return TypeGroupMetadata }
func (*TargetMetadataRecord) Type() int16         { return TypeTargetMetadata }
func (*TargetMemberRecord) Type() int16           { return TypeTargetMember }
func (*CurrentAssignmentRecord) Type() int16      { return TypeCurrentAssignment }
func (*StatePartitionMetadataRecord) Type() int16 { return TypeStatePartitionMetadata }

func (r *MemberMetadataRecord) GroupID() string         { return r.Group }
func (r *GroupMetadataRecord) GroupID() string          { return r.Group }
func (r *TargetMetadataRecord) GroupID() string         { return r.Group }
func (r *TargetMemberRecord) GroupID() string           { return r.Group }
func (r *CurrentAssignmentRecord) GroupID() string      { return r.Group }
func (r *StatePartitionMetadataRecord) GroupID() string { return r.Group }

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
	ids := a.TopicIDs()
	dst = kbin.AppendCompactArrayLen(dst, len(ids))
	for _, t := range ids {
		dst = kbin.AppendUuid(dst, t)
		dst = appendInt32s(dst, a[t])
		dst = kbin.AppendUvarint(dst, 0)
	}
	return dst
}

func appendInt32s(dst []byte, ps []int32) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ps))
	for _, p := range ps {
		dst = kbin.AppendInt32(dst, p)
	}
	return dst
}

func appendStateTopics(dst []byte, ts []StateTopic, withPartitions bool) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ts))
	for _, t := range ts {
		dst = kbin.AppendUuid(dst, t.ID)
		dst = kbin.AppendCompactString(dst, t.Name)
		if withPartitions {
			dst = appendInt32s(dst, t.Partitions)
			dst = kbin.AppendInt64(dst, t.CreateMs)
		}
		dst = kbin.AppendUvarint(dst, 0)
	}
	return dst
}

// EncodeRecord returns the key and value bytes of r (value nil for a
// tombstone).
func EncodeRecord(r Record) (key, value []byte) {
	key = kbin.AppendInt16(nil, r.Type())
	key = kbin.AppendString(key, r.GroupID())
	var deleted bool
	value = kbin.AppendInt16(nil, 0)
	switch r := r.(type) {
	case *MemberMetadataRecord:
		key = kbin.AppendString(key, r.MemberID)
		deleted = r.Deleted
		value = kbin.AppendCompactNullableString(value, nullable(r.RackID))
		value = kbin.AppendCompactString(value, r.ClientID)
		value = kbin.AppendCompactString(value, r.ClientHost)
		value = kbin.AppendCompactArrayLen(value, len(r.SubscribedTopicNames))
		for _, s := range r.SubscribedTopicNames {
			value = kbin.AppendCompactString(value, s)
		}
	case *GroupMetadataRecord:
		deleted = r.Deleted
		value = kbin.AppendInt32(value, r.Epoch)
		value = kbin.AppendInt64(value, r.MetadataHash)
	case *TargetMetadataRecord:
		deleted = r.Deleted
		value = kbin.AppendInt32(value, r.AssignmentEpoch)
	case *TargetMemberRecord:
		key = kbin.AppendString(key, r.MemberID)
		deleted = r.Deleted
		value = appendAssignment(value, r.Partitions)
	case *CurrentAssignmentRecord:
		key = kbin.AppendString(key, r.MemberID)
		deleted = r.Deleted
		value = kbin.AppendInt32(value, r.MemberEpoch)
		value = kbin.AppendInt32(value, r.PreviousMemberEpoch)
		value = kbin.AppendInt8(value, r.State)
		value = appendAssignment(value, r.Assigned)
	case *StatePartitionMetadataRecord:
		deleted = r.Deleted
		value = appendStateTopics(value, r.Initializing, true)
		value = appendStateTopics(value, r.Initialized, true)
		value = appendStateTopics(value, r.Deleting, false)
	default:
		panic(fmt.Sprintf("sharegroup: unknown record %T", r))
	}
	value = kbin.AppendUvarint(value, 0) // no tagged fields
	if deleted {
		value = nil
	}
	return key, value
}

type reader struct{ kbin.Reader }

func (r *reader) bad() { r.Span(len(r.Src) + 1) }

func (r *reader) skipTags() {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint()
		size := r.Uvarint()
		if int(size) > len(r.Src) {
			r.bad()
			return
		}
		r.Span(int(size))
	}
}

func (r *reader) arrayLen() int {
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src) {
		if n != 0 {
			r.bad()
		}
		return 0
	}
	return int(n)
}

func (r *reader) int32s() []int32 {
	n := r.arrayLen()
	ps := make([]int32, 0, n)
	for i := 0; i < n && r.Ok(); i++ {
		ps = append(ps, r.Int32())
	}
	return ps
}

func (r *reader) assignment() Assignment {
	a := Assignment{}
	n := r.arrayLen()
	for i := 0; i < n && r.Ok(); i++ {
		t := uuid.UUID(r.Uuid())
		for _, p := range r.int32s() {
			a.Add(t, p)
		}
		r.skipTags()
	}
	return a
}

func (r *reader) stateTopics(withPartitions bool) []StateTopic {
	n := r.arrayLen()
	var ts []StateTopic
	for i := 0; i < n && r.Ok(); i++ {
		t := StateTopic{ID: uuid.UUID(r.Uuid()), Name: r.CompactString()}
		if withPartitions {
			t.Partitions = r.int32s()
			slices.Sort(t.Partitions)
			t.CreateMs = r.Int64()
		}
		r.skipTags()
		ts = append(ts, t)
	}
	return ts
}

// DecodeRecord decodes one record (value nil: a tombstone). Keys of other
// types return ok false and no error. Decoded records copy every byte
// they keep.
func DecodeRecord(key, value []byte) (rec Record, ok bool, err error) {
	kr := reader{kbin.Reader{Src: key}}
	typ := kr.Int16()
	if !kr.Ok() {
		return nil, false, fmt.Errorf("%w: key of %d bytes", ErrBadRecord, len(key))
	}
	if !IsShareType(typ) {
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
	case TypeMemberMetadata:
		r := &MemberMetadataRecord{Group: group, MemberID: member, Deleted: deleted}
		if !deleted {
			r.RackID = deref(vr.CompactNullableString())
			r.ClientID = vr.CompactString()
			r.ClientHost = vr.CompactString()
			n := vr.arrayLen()
			r.SubscribedTopicNames = make([]string, 0, n)
			for i := 0; i < n && vr.Ok(); i++ {
				r.SubscribedTopicNames = append(r.SubscribedTopicNames, vr.CompactString())
			}
		}
		rec = r
	case TypeGroupMetadata:
		r := &GroupMetadataRecord{Group: group, Deleted: deleted}
		if !deleted {
			r.Epoch = vr.Int32()
			r.MetadataHash = vr.Int64()
		}
		rec = r
	case TypeTargetMetadata:
		r := &TargetMetadataRecord{Group: group, Deleted: deleted}
		if !deleted {
			r.AssignmentEpoch = vr.Int32()
		}
		rec = r
	case TypeTargetMember:
		r := &TargetMemberRecord{Group: group, MemberID: member, Deleted: deleted}
		if !deleted {
			r.Partitions = vr.assignment()
		}
		rec = r
	case TypeCurrentAssignment:
		r := &CurrentAssignmentRecord{Group: group, MemberID: member, Deleted: deleted}
		if !deleted {
			r.MemberEpoch = vr.Int32()
			r.PreviousMemberEpoch = vr.Int32()
			r.State = vr.Int8()
			r.Assigned = vr.assignment()
		}
		rec = r
	case TypeStatePartitionMetadata:
		r := &StatePartitionMetadataRecord{Group: group, Deleted: deleted}
		if !deleted {
			r.Initializing = vr.stateTopics(true)
			r.Initialized = vr.stateTopics(true)
			r.Deleting = vr.stateTopics(false)
		}
		rec = r
	}
	if !deleted {
		vr.skipTags()
		if err := complete(&vr); err != nil {
			return nil, false, fmt.Errorf("%w: type %d value: %v", ErrBadRecord, typ, err)
		}
	}
	return rec, true, nil
}

func complete(r *reader) error {
	if err := r.Complete(); err != nil {
		return err
	}
	if len(r.Src) > 0 {
		return fmt.Errorf("%d trailing bytes", len(r.Src))
	}
	return nil
}
