package sharegroup

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
)

func TestRecordsRoundTrip(t *testing.T) {
	a := Assignment{}
	a.Add(topicID("a"), 2)
	a.Add(topicID("a"), 0)
	a.Add(topicID("b"), 1)
	recs := []Record{
		&MemberMetadataRecord{Group: "g", MemberID: "m", RackID: "r", ClientID: "c", ClientHost: "/127.0.0.1", SubscribedTopicNames: []string{"a", "b"}},
		&MemberMetadataRecord{Group: "g", MemberID: "m", ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{}},
		&MemberMetadataRecord{Group: "g", MemberID: "m", Deleted: true},
		&GroupMetadataRecord{Group: "g", Epoch: 7, MetadataHash: -42},
		&GroupMetadataRecord{Group: "g", Deleted: true},
		&TargetMetadataRecord{Group: "g", AssignmentEpoch: 7},
		&TargetMemberRecord{Group: "g", MemberID: "m", Partitions: a},
		&CurrentAssignmentRecord{Group: "g", MemberID: "m", MemberEpoch: 7, PreviousMemberEpoch: 6, Assigned: a},
		&StatePartitionMetadataRecord{Group: "g", Initializing: []StateTopic{{ID: topicID("c"), Name: "c", Partitions: []int32{0}, CreateMs: 5}},
			Initialized: []StateTopic{{ID: topicID("a"), Name: "a", Partitions: []int32{0, 2}, CreateMs: 1}},
			Deleting:    []StateTopic{{ID: topicID("d"), Name: "d"}}},
		&StatePartitionMetadataRecord{Group: "g", Deleted: true},
	}
	for _, r := range recs {
		k, v := EncodeRecord(r)
		got, ok, err := DecodeRecord(k, v)
		if err != nil || !ok {
			t.Fatalf("%T: ok=%v err=%v", r, ok, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
		}
		// Every strict prefix of a value is refused, never a panic.
		for i := 0; i < len(v); i++ {
			if _, _, err := DecodeRecord(k, v[:i:i]); !errors.Is(err, ErrBadRecord) {
				t.Fatalf("%T: prefix %d of %d: err=%v", r, i, len(v), err)
			}
		}
		if v != nil {
			if _, _, err := DecodeRecord(k, append(bytes.Clone(v), 0)); !errors.Is(err, ErrBadRecord) {
				t.Fatalf("%T: trailing byte accepted", r)
			}
		}
	}
}

// TestRecordBytes pins the layout of one record against bytes written by
// hand from Kafka's ShareGroupMetadataKey/Value schemas.
func TestRecordBytes(t *testing.T) {
	k, v := EncodeRecord(&GroupMetadataRecord{Group: "g", Epoch: 3, MetadataHash: 1})
	if got := hex.EncodeToString(k); got != "000b000167" {
		t.Fatalf("key %s", got)
	}
	if got := hex.EncodeToString(v); got != "0000"+"00000003"+"0000000000000001"+"00" {
		t.Fatalf("value %s", got)
	}
	// Types outside 10-15 (offset commits, classic and consumer groups,
	// the pre-KIP-1101 type 9) are someone else's.
	for _, typ := range []int16{0, 2, 3, 8, 9, 16} {
		if _, ok, err := DecodeRecord(kbin.AppendString(kbin.AppendInt16(nil, typ), "g"), nil); ok || err != nil {
			t.Fatalf("type %d: ok=%v err=%v", typ, ok, err)
		}
	}
}

// FuzzDecodeRecord: DecodeRecord never panics; a record it accepts
// encodes back to bytes that decode to the same record (the encoding is
// canonical up to skipped tagged fields and the null-for-empty rack).
func FuzzDecodeRecord(f *testing.F) {
	a := Assignment{}
	a.Add(topicID("a"), 1)
	for _, r := range []Record{
		&MemberMetadataRecord{Group: "g", MemberID: "m", ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{"a"}},
		&GroupMetadataRecord{Group: "g", Epoch: 1},
		&TargetMemberRecord{Group: "g", MemberID: "m", Partitions: a},
		&CurrentAssignmentRecord{Group: "g", MemberID: "m", MemberEpoch: 1, Assigned: a},
		&StatePartitionMetadataRecord{Group: "g", Initialized: []StateTopic{{ID: topicID("a"), Name: "a", Partitions: []int32{1}}}},
	} {
		k, v := EncodeRecord(r)
		f.Add(k, v)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, ok, err := DecodeRecord(key, value)
		if err != nil || !ok {
			return
		}
		k2, v2 := EncodeRecord(r)
		r2, ok, err := DecodeRecord(k2, v2)
		if err != nil || !ok || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoding %#v: %v %v %#v", r, ok, err, r2)
		}
	})
}
