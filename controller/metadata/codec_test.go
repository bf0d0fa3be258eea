package metadata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/broker/authz"
)

// sampleRecords returns records of every type, with optional fields both
// set and unset and values at the edges of their ranges.
func sampleRecords() []Record {
	id := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	seg := uuid.MustParse("f47ac10b-58cc-4372-a567-0e02b2c3d479")
	val := "compact,delete"
	empty := ""
	return []Record{
		&RegisterBrokerRecord{BrokerID: 1, IncarnationID: id, BrokerEpoch: 7, Listeners: []Listener{
			{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"},
			{Name: "CONTROLLER", Host: "::1", Port: 65535, SecurityProtocol: "SSL"},
		}, Rack: "rack-a", Fenced: true},
		&RegisterBrokerRecord{BrokerID: math.MaxInt32, BrokerEpoch: math.MaxInt64},
		&UnregisterBrokerRecord{BrokerID: 3, BrokerEpoch: -1},
		&BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 9},
		&BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 9, Fenced: ptr(false), InControlledShutdown: ptr(true)},
		&TopicRecord{Name: "orders.v1", TopicID: id},
		&PartitionRecord{TopicID: id, Partition: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{3, 1}, Leader: 3, LeaderEpoch: 5, PartitionEpoch: 12},
		&PartitionRecord{TopicID: id, Partition: math.MaxInt32, Replicas: []int32{}, ISR: []int32{}, Leader: NoLeader, LeaderEpoch: math.MinInt32, PartitionEpoch: math.MaxInt32},
		&PartitionChangeRecord{TopicID: id, Partition: 0},
		&PartitionChangeRecord{TopicID: id, Partition: 1, Leader: ptr(NoLeader), ISR: []int32{}, Replicas: []int32{4, 5}},
		&PartitionChangeRecord{TopicID: id, Partition: 2, Leader: ptr(int32(7)), ISR: []int32{7}},
		&PartitionRecord{TopicID: id, Partition: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1,
			ELR: []int32{2}, LastKnownELR: []int32{3}, LeaderRecoveryState: LeaderRecovering},
		&PartitionChangeRecord{TopicID: id, Partition: 3, ELR: []int32{}, LastKnownELR: []int32{2, 3}, LeaderRecoveryState: ptr(LeaderRecovered)},
		&PartitionChangeRecord{TopicID: id, Partition: 3, ELR: []int32{1}, LeaderRecoveryState: ptr(LeaderRecovering)},
		&PartitionRecord{TopicID: id, Partition: 6, Replicas: []int32{4, 1, 2}, ISR: []int32{1, 2}, Leader: 1,
			AddingReplicas: []int32{4}, RemovingReplicas: []int32{2}},
		&PartitionChangeRecord{TopicID: id, Partition: 6, Replicas: []int32{4, 1, 2}, AddingReplicas: []int32{4}, RemovingReplicas: []int32{2}},
		&PartitionChangeRecord{TopicID: id, Partition: 6, AddingReplicas: []int32{}, RemovingReplicas: []int32{}},
		&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders.v1", Name: "cleanup.policy", Value: &val},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "", Name: "log.retention.ms"},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "12", Name: "x", Value: &empty},
		&RemoveTopicRecord{TopicID: id},
		&RemoteSegmentRecord{SegmentID: seg, TopicID: id, Partition: 3, BaseOffset: 100, EndOffset: 199, MaxTimestamp: 1700000000000,
			LeaderEpochs: []EpochStart{{Epoch: 1, StartOffset: 100}, {Epoch: 4, StartOffset: 150}}, SizeBytes: 1 << 30,
			State: DeleteStarted, BrokerID: 2, EventTimestamp: -5, WriterLeaderEpoch: 7},
		&RemoteSegmentRecord{SegmentID: seg, State: CopyStarted},
		&RemoteSegmentRecord{SegmentID: seg, State: CopyFinished, WriterLeaderEpoch: UnknownLeaderEpoch},
		&NoOpRecord{},
		&FeatureLevelRecord{Name: "metadata.version", Level: math.MaxInt16},
		&FeatureLevelRecord{Name: "", Level: math.MinInt16},
		&ClusterIDRecord{ClusterID: "MkU3OEVBNTcwNTJENDM2Qk"},
		&AccessControlEntryRecord{ID: seg, ACL: authz.ACL{ResourceType: authz.ResTopic, ResourceName: "orders", PatternType: authz.PatPrefixed,
			Principal: "User:alice", Host: "10.0.0.1", Operation: authz.OpDescribeConfigs, Permission: authz.PermDeny}},
		&AccessControlEntryRecord{ID: id, ACL: authz.ACL{ResourceType: authz.ResCluster, ResourceName: "kafka-cluster", PatternType: authz.PatLiteral,
			Principal: "User:*", Host: "*", Operation: authz.OpAll, Permission: authz.PermAllow}},
		&RemoveAccessControlEntryRecord{ID: seg},
		&UserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256, Salt: []byte("salt"), StoredKey: bytes.Repeat([]byte{1}, 32),
			ServerKey: bytes.Repeat([]byte{2}, 32), Iterations: 4096},
		&UserScramCredentialRecord{Name: "we,ird=name", Mechanism: ScramSHA512, Salt: []byte{0}, StoredKey: bytes.Repeat([]byte{0xff}, 64),
			ServerKey: make([]byte, 64), Iterations: 16384},
		&RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512},
		&ClientQuotaRecord{Entity: QuotaEntity{User: NamedQuota("alice"), ClientID: DefaultQuota()}, Key: QuotaProducerByteRate, Value: 1048576},
		&ClientQuotaRecord{Entity: QuotaEntity{IP: NamedQuota("10.0.0.1")}, Key: QuotaConnectionCreationRate, Remove: true},
		&ClientQuotaRecord{Entity: QuotaEntity{ClientID: NamedQuota("c")}, Key: QuotaRequestPercentage, Value: 12.5},
	}
}

func TestRecordEncodeDecodeRoundTripsEveryType(t *testing.T) {
	seen := map[RecordType]bool{}
	for _, r := range sampleRecords() {
		seen[r.Type()] = true
		b := Encode(r)
		if RecordType(b[0]) != r.Type() || b[1] != r.Version() {
			t.Fatalf("%T: header %d/%d, want %d/%d", r, b[0], b[1], r.Type(), r.Version())
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%T round trip:\n got %#v\nwant %#v", r, got, r)
		}
		if !bytes.Equal(Encode(got), b) {
			t.Fatalf("%T: re-encoding differs", r)
		}
	}
	for typ := RecordType(1); typ < typeEnd; typ++ {
		if !seen[typ] {
			t.Errorf("no sample of %s", typ)
		}
	}
}

// TestRecordTypeEndIsOnePastTheLast pins the sentinel the tests above walk
// to: every type below typeEnd has a name and decodes, typeEnd has neither.
// A type added after the last without moving typeEnd fails here.
func TestRecordTypeEndIsOnePastTheLast(t *testing.T) {
	for typ := RecordType(1); typ < typeEnd; typ++ {
		if typ.String() == fmt.Sprintf("RecordType(%d)", uint8(typ)) {
			t.Errorf("type %d below typeEnd has no name", uint8(typ))
		}
	}
	if got, want := typeEnd.String(), fmt.Sprintf("RecordType(%d)", uint8(typeEnd)); got != want {
		t.Errorf("typeEnd is named %q: a type was added without moving typeEnd", got)
	}
	for v := 0; v < 256; v++ {
		if _, err := Decode([]byte{byte(typeEnd), byte(v)}); !errors.Is(err, ErrUnknownRecord) {
			t.Fatalf("type typeEnd version %d decodes (err %v): a type was added without moving typeEnd", v, err)
		}
	}
}

func TestRecordDecodeRejectsEveryTruncationAndTrailingBytes(t *testing.T) {
	for _, r := range sampleRecords() {
		b := Encode(r)
		for n := 0; n < len(b); n++ {
			if _, err := Decode(b[:n]); !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("%T cut to %d of %d bytes: err %v, want ErrCorruptRecord", r, n, len(b), err)
			}
		}
		if _, err := Decode(append(b, 0)); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("%T with a trailing byte: err %v", r, err)
		}
	}
}

func TestRecordDecodeRejectsUnknownTypesVersionsAndEnums(t *testing.T) {
	for _, b := range [][]byte{{0, 0}, {200, 0}, {byte(TypeTopic), 1}, {byte(TypeNoOp), 255}} {
		if _, err := Decode(b); !errors.Is(err, ErrUnknownRecord) {
			t.Errorf("% x: err %v, want ErrUnknownRecord", b, err)
		}
	}
	cfg := Encode(&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "t", Name: "n"})
	cfg[2] = 3 // resource type byte
	if _, err := Decode(cfg); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("bad resource type: err %v", err)
	}
	seg := Encode(&RemoteSegmentRecord{State: DeleteFinished})
	seg[len(seg)-4] = 9 // the state byte, before broker id, timestamp and writer epoch (one byte each here)
	if _, err := Decode(seg); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("bad segment state: err %v", err)
	}
	bad := Encode(&TopicRecord{Name: "t"})
	bad[2] = 0x7f // name length far beyond the input
	if _, err := Decode(bad); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("overlong string: err %v", err)
	}
	flag := Encode(&RegisterBrokerRecord{})
	flag[len(flag)-1] = 2 // Fenced must be 0 or 1
	if _, err := Decode(flag); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("bad bool: err %v", err)
	}
}

// TestRecordDecodesVersion0PartitionRecords: PartitionRecord and
// PartitionChangeRecord as version 0 wrote them (before ELR, last known
// ELR and the leader recovery state) still decode, with those fields
// empty, RECOVERED, and (for a change) unchanged.
func TestRecordDecodesVersion0PartitionRecords(t *testing.T) {
	id := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	// PartitionRecord v0: topic, partition, replicas, ISR, leader, epochs.
	e := encoder{}
	e.u8(uint8(TypePartition))
	e.u8(0)
	e.uuid(id)
	e.i32(2)
	e.i32s([]int32{1, 2})
	e.i32s([]int32{1})
	e.i32(1)
	e.i32(3)
	e.i32(4)
	got, err := Decode(e.b)
	want := &PartitionRecord{TopicID: id, Partition: 2, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 4}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("v0 PartitionRecord: %#v, %v", got, err)
	}
	// PartitionChangeRecord v0: topic, partition, leader?, ISR?, replicas?.
	e = encoder{}
	e.u8(uint8(TypePartitionChange))
	e.u8(0)
	e.uuid(id)
	e.i32(2)
	e.bool(true)
	e.i32(NoLeader)
	e.optI32s([]int32{2})
	e.optI32s(nil)
	got, err = Decode(e.b)
	wantChange := &PartitionChangeRecord{TopicID: id, Partition: 2, Leader: ptr(NoLeader), ISR: []int32{2}}
	if err != nil || !reflect.DeepEqual(got, wantChange) {
		t.Fatalf("v0 PartitionChangeRecord: %#v, %v", got, err)
	}
	// Version 1 bytes are refused as version 0 (trailing fields), and a
	// recovery state no version writes is corrupt.
	v1 := Encode(&PartitionChangeRecord{TopicID: id, ELR: []int32{1}})
	v1[1] = 0
	if _, err := Decode(v1); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("v1 body as v0: %v", err)
	}
	// PartitionRecord v1 (before KIP-455) decodes with no reassignment.
	v1p := Encode(&PartitionRecord{TopicID: id, Partition: 2, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 4, ELR: []int32{2}})
	v1p = v1p[:len(v1p)-2] // the two empty v2 slices
	v1p[1] = 1
	got, err = Decode(v1p)
	want.ELR, want.LastKnownELR = []int32{2}, nil
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("v1 PartitionRecord: %#v, %v", got, err)
	}
	// PartitionChangeRecord v1 likewise: adding and removing unchanged.
	v1c := Encode(&PartitionChangeRecord{TopicID: id, Partition: 2, ISR: []int32{2}})
	v1c = v1c[:len(v1c)-2] // the two absent v2 slices
	v1c[1] = 1
	got, err = Decode(v1c)
	if err != nil || !reflect.DeepEqual(got, &PartitionChangeRecord{TopicID: id, Partition: 2, ISR: []int32{2}}) {
		t.Fatalf("v1 PartitionChangeRecord: %#v, %v", got, err)
	}
	bad := Encode(&PartitionRecord{TopicID: id, Replicas: []int32{1}})
	bad[len(bad)-3] = 7 // the recovery state, before the two empty v2 slices
	if _, err := Decode(bad); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("recovery state 7: %v", err)
	}
}

func TestRecordBatchRoundTripsAndRejectsDamage(t *testing.T) {
	recs := sampleRecords()
	b := EncodeBatch(recs)
	got, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatal("batch round trip differs")
	}
	if got, err := DecodeBatch(EncodeBatch(nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %v %v", got, err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := DecodeBatch(b[:n]); err == nil {
			t.Fatalf("batch cut to %d of %d decoded", n, len(b))
		}
	}
	if _, err := DecodeBatch(append(b, 1)); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("trailing byte: %v", err)
	}
}

// FuzzDecode checks Decode and DecodeBatch on arbitrary input. Invariants:
//   - they never panic;
//   - an error is ErrCorruptRecord or ErrUnknownRecord;
//   - a decoded record re-encodes to bytes that decode to an equal record
//     (the encoding may differ: varints have non-minimal forms).
func FuzzDecode(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(Encode(r))
	}
	f.Add(EncodeBatch(sampleRecords()[:3]))
	f.Add([]byte{})
	f.Add([]byte{byte(TypePartition), 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{byte(TypeRegisterBroker), 0, 2, 0x10, 0x10})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) && !errors.Is(err, ErrUnknownRecord) {
				t.Fatalf("unexpected error kind: %v", err)
			}
		} else {
			again, err := Decode(Encode(r))
			if err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			if !reflect.DeepEqual(again, r) {
				t.Fatalf("re-decode differs: %#v vs %#v", again, r)
			}
		}
		if recs, err := DecodeBatch(b); err == nil {
			again, err := DecodeBatch(EncodeBatch(recs))
			if err != nil || !reflect.DeepEqual(again, recs) {
				t.Fatalf("batch re-decode: %v", err)
			}
		}
	})
}

// TestRecordDecodesVersion0RemoteSegmentRecords: a RemoteSegmentRecord as
// version 0 wrote it (before the writer's leader epoch) decodes with
// WriterLeaderEpoch UnknownLeaderEpoch, which the planner does not fence;
// version 1 bytes are refused as version 0 (a trailing field).
func TestRecordDecodesVersion0RemoteSegmentRecords(t *testing.T) {
	id := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	seg := uuid.MustParse("f47ac10b-58cc-4372-a567-0e02b2c3d479")
	e := encoder{}
	e.u8(uint8(TypeRemoteSegment))
	e.u8(0)
	e.uuid(seg)
	e.uuid(id)
	e.i32(3)
	e.i64(100)
	e.i64(199)
	e.i64(5)
	e.count(1)
	e.i32(2)
	e.i64(100)
	e.i64(4096)
	e.u8(uint8(CopyFinished))
	e.i32(2)
	e.i64(6)
	got, err := Decode(e.b)
	want := &RemoteSegmentRecord{SegmentID: seg, TopicID: id, Partition: 3, BaseOffset: 100, EndOffset: 199, MaxTimestamp: 5,
		LeaderEpochs: []EpochStart{{Epoch: 2, StartOffset: 100}}, SizeBytes: 4096, State: CopyFinished, BrokerID: 2, EventTimestamp: 6,
		WriterLeaderEpoch: UnknownLeaderEpoch}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("v0 RemoteSegmentRecord: %#v, %v", got, err)
	}
	v1 := Encode(&RemoteSegmentRecord{SegmentID: seg, WriterLeaderEpoch: 3})
	if v1[1] != 1 {
		t.Fatalf("RemoteSegmentRecord written at version %d, want 1", v1[1])
	}
	v1[1] = 0
	if _, err := Decode(v1); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("v1 body as v0: %v", err)
	}
}

// TestRemoteSegmentRecordJSONWithoutWriterEpochIsUnknown: the controller
// RPC carries the record as JSON; a broker that predates fencing sends no
// WriterLeaderEpoch, which must decode as UnknownLeaderEpoch (not fenced),
// not as epoch 0. A body with the field keeps it.
func TestRemoteSegmentRecordJSONWithoutWriterEpochIsUnknown(t *testing.T) {
	var old RemoteSegmentRecord
	if err := json.Unmarshal([]byte(`{"Partition":1,"State":1,"BrokerID":2}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.WriterLeaderEpoch != UnknownLeaderEpoch || old.Partition != 1 || old.State != CopyFinished || old.BrokerID != 2 {
		t.Fatalf("old body: %+v", old)
	}
	in := RemoteSegmentRecord{Partition: 1, BrokerID: 2, WriterLeaderEpoch: 0}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out RemoteSegmentRecord
	if err := json.Unmarshal(b, &out); err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip %s: %+v, %v", b, out, err)
	}
}
