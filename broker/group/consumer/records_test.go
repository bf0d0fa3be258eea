package consumer

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

// sampleRecords has one record of every type, with every field set, and
// the tombstones.
func sampleRecords() []Record {
	a, b := topicID("a"), topicID("b")
	return []Record{
		&GroupMetadataRecord{Group: "g", Epoch: 7, MetadataHash: -42},
		&GroupMetadataRecord{Group: "g", Epoch: 1},
		&GroupMetadataRecord{Group: "g", Deleted: true},
		&PartitionMetadataRecord{Group: "g", Topics: []Topic{
			{ID: a, Name: "a", Partitions: 2, Racks: [][]string{{"r1", "r2"}, {"r3"}}},
			{ID: b, Name: "b", Partitions: 1},
		}},
		&MemberMetadataRecord{Group: "g", MemberID: "m1", InstanceID: "i1", RackID: "r1", ClientID: "c", ClientHost: "/127.0.0.1",
			SubscribedTopicNames: []string{"a", "b"}, SubscribedTopicRegex: "x.*", RebalanceTimeoutMs: 30000, ServerAssignor: "range"},
		&MemberMetadataRecord{Group: "g", MemberID: "m2", ClientID: "", ClientHost: "", SubscribedTopicNames: []string{}, RebalanceTimeoutMs: -1},
		&MemberMetadataRecord{Group: "g", MemberID: "m2", Deleted: true},
		&TargetMetadataRecord{Group: "g", AssignmentEpoch: 7},
		&TargetMemberRecord{Group: "g", MemberID: "m1", Partitions: Assignment{a: {0, 1}, b: {0}}},
		&TargetMemberRecord{Group: "g", MemberID: "m1", Partitions: Assignment{}},
		&TargetMemberRecord{Group: "g", MemberID: "m1", Deleted: true},
		&CurrentAssignmentRecord{Group: "g", MemberID: "m1", MemberEpoch: 7, PreviousMemberEpoch: 6, State: UnrevokedPartitions,
			Assigned: Assignment{a: {1}}, PendingRevocation: Assignment{a: {0}, b: {0}}},
		&CurrentAssignmentRecord{Group: "g", MemberID: "m1", MemberEpoch: -2, PreviousMemberEpoch: 7, State: Stable,
			Assigned: Assignment{}, PendingRevocation: Assignment{}},
		&CurrentAssignmentRecord{Group: "g", MemberID: "m1", Deleted: true},
	}
}

// normalize makes decoded and original records comparable: tombstones
// carry only their key, nil and empty slices are the same.
func normalize(r Record) Record {
	switch r := r.(type) {
	case *MemberMetadataRecord:
		c := *r
		if c.SubscribedTopicNames == nil {
			c.SubscribedTopicNames = []string{}
		}
		return &c
	case *TargetMemberRecord:
		c := *r
		if c.Partitions == nil {
			c.Partitions = Assignment{}
		}
		return &c
	case *CurrentAssignmentRecord:
		c := *r
		if c.Assigned == nil {
			c.Assigned = Assignment{}
		}
		if c.PendingRevocation == nil {
			c.PendingRevocation = Assignment{}
		}
		return &c
	}
	return r
}

func TestRecordsRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		k, v := EncodeRecord(r)
		d, ok, err := DecodeRecord(k, v)
		if err != nil || !ok {
			t.Fatalf("%T %+v: ok=%v err=%v", r, r, ok, err)
		}
		if !reflect.DeepEqual(normalize(d), normalize(r)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", d, r)
		}
	}
}

// TestRecordsKafkaLayout checks the bytes against Kafka's schemas written
// out by hand (not produced by the encoder): keys are non-flexible with
// int16 string lengths, values flexible with uvarint lengths+1 and tagged
// fields; tags Kafka added that we do not use are skipped on read.
func TestRecordsKafkaLayout(t *testing.T) {
	a := topicID("a")
	cases := []struct {
		name       string
		key, value string // hex
		want       Record
		encodeSame bool // our encoder writes exactly these bytes
	}{{
		name: "group metadata with hash (tag 0) and creation time (tag 1, skipped)",
		key:  "0003" + "0001" + "67",
		value: "0000" + "00000005" + "02" +
			"00" + "08" + "000000000000002a" +
			"01" + "08" + "00000000000003e8",
		want: &GroupMetadataRecord{Group: "g", Epoch: 5, MetadataHash: 42},
	}, {
		name:       "group metadata without hash",
		key:        "0003" + "0001" + "67",
		value:      "0000" + "00000001" + "00",
		want:       &GroupMetadataRecord{Group: "g", Epoch: 1},
		encodeSame: true,
	}, {
		// ClassicMemberMetadata: session_timeout_ms int32 | protocols
		// [name compact string | metadata compact bytes | tags] | tags.
		name: "member metadata with classic member metadata (tag 0)",
		key:  "0005" + "0001" + "67" + "0002" + "6d31",
		value: "0000" + "00" + "03" + "7231" + "02" + "63" + "02" + "68" +
			"02" + "02" + "61" + "00" + "00007530" + "06" + "72616e6765" +
			"01" + "00" + "10" + "0000afc8" + "02" + "06" + "72616e6765" + "03" + "0001" + "00" + "00",
		want: &MemberMetadataRecord{Group: "g", MemberID: "m1", RackID: "r1", ClientID: "c", ClientHost: "h",
			SubscribedTopicNames: []string{"a"}, RebalanceTimeoutMs: 30000, ServerAssignor: "range",
			Classic: &ClassicMetadata{SessionTimeoutMs: 45000, Protocols: []ClassicProtocol{{Name: "range", Metadata: []byte{0, 1}}}}},
		encodeSame: true,
	}, {
		name: "member metadata with a tag Kafka may add (tag 1, skipped)",
		key:  "0005" + "0001" + "67" + "0002" + "6d31",
		value: "0000" + "00" + "03" + "7231" + "02" + "63" + "02" + "68" +
			"02" + "02" + "61" + "00" + "00007530" + "06" + "72616e6765" +
			"01" + "01" + "03" + "000000",
		want: &MemberMetadataRecord{Group: "g", MemberID: "m1", RackID: "r1", ClientID: "c", ClientHost: "h",
			SubscribedTopicNames: []string{"a"}, RebalanceTimeoutMs: 30000, ServerAssignor: "range"},
	}, {
		name: "current assignment with KIP-1251 assignment epochs (tag 0 of a topic, skipped)",
		key:  "0008" + "0001" + "67" + "0002" + "6d31",
		value: "0000" + "00000003" + "00000002" + "00" +
			"02" + hex.EncodeToString(a[:]) + "02" + "00000001" + "01" + "00" + "05" + "0200000003" +
			"01" + "00",
		want: &CurrentAssignmentRecord{Group: "g", MemberID: "m1", MemberEpoch: 3, PreviousMemberEpoch: 2, State: Stable,
			Assigned: Assignment{a: {1}}, PendingRevocation: Assignment{}},
	}, {
		name:       "target assignment metadata",
		key:        "0006" + "0001" + "67",
		value:      "0000" + "00000009" + "00",
		want:       &TargetMetadataRecord{Group: "g", AssignmentEpoch: 9},
		encodeSame: true,
	}, {
		name:       "tombstone",
		key:        "0007" + "0001" + "67" + "0002" + "6d31",
		want:       &TargetMemberRecord{Group: "g", MemberID: "m1", Deleted: true},
		encodeSame: true,
	}}
	for _, c := range cases {
		k, _ := hex.DecodeString(c.key)
		var v []byte
		if c.value != "" {
			v, _ = hex.DecodeString(c.value)
		}
		got, ok, err := DecodeRecord(k, v)
		if err != nil || !ok {
			t.Fatalf("%s: ok=%v err=%v", c.name, ok, err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(c.want)) {
			t.Fatalf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
		if c.encodeSame {
			ek, ev := EncodeRecord(c.want)
			if !bytes.Equal(ek, k) || !bytes.Equal(ev, v) {
				t.Fatalf("%s: encoded %x / %x, want %x / %x", c.name, ek, ev, k, v)
			}
		}
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	k, v := EncodeRecord(&CurrentAssignmentRecord{Group: "g", MemberID: "m", Assigned: Assignment{topicID("a"): {0, 1}}})
	for name, tc := range map[string]struct{ key, value []byte }{
		"short key":       {[]byte{0}, v},
		"truncated key":   {k[:len(k)-1], v},
		"truncated value": {k, v[:len(v)-3]},
		"trailing bytes":  {k, append(append([]byte{}, v...), 0)},
		"value version 1": {k, append([]byte{0, 1}, v[2:]...)},
		"huge array":      {k, append(append([]byte{}, v[:11]...), 0xff, 0xff, 0xff, 0xff, 0x0f)},
	} {
		if _, _, err := DecodeRecord(tc.key, tc.value); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: err %v, want ErrBadRecord", name, err)
		}
	}
	// Other key types are not ours: skipped without error.
	for _, typ := range []byte{0, 1, 2, 9, 16} {
		if _, ok, err := DecodeRecord([]byte{0, typ, 0, 1, 'g'}, nil); ok || err != nil {
			t.Errorf("type %d: ok=%v err=%v, want skipped", typ, ok, err)
		}
	}
}

// FuzzDecodeRecord: for any key and value bytes, DecodeRecord
//   - never panics and never allocates beyond the input's size;
//   - returns ok only for key types 3-8, and an error only wrapping
//     ErrBadRecord;
//   - when it decodes, re-encoding and decoding again gives the same
//     record (decode ∘ encode is the identity on what decode returns).
//
// The seed corpus is testdata/fuzz/FuzzDecodeRecord plus every sample
// record.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		k, v := EncodeRecord(r)
		f.Add(k, v)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if len(value) == 0 {
			value = nil // a tombstone; the fuzzer cannot say nil
		}
		rec, ok, err := DecodeRecord(key, value)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) || ok {
				t.Fatalf("err %v ok %v", err, ok)
			}
			return
		}
		if !ok {
			return
		}
		if typ := rec.Type(); typ < 3 || typ > 8 {
			t.Fatalf("decoded type %d", typ)
		}
		k2, v2 := EncodeRecord(rec)
		again, ok, err := DecodeRecord(k2, v2)
		if err != nil || !ok {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(again), normalize(rec)) {
			t.Fatalf("re-encode changed the record:\n%+v\n%+v", rec, again)
		}
	})
}
