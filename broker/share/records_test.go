package share

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

var testTopic = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// TestRecordGoldenBytes pins the layout to Kafka's schemas, byte by byte
// (written out by hand from the JSON specs, not from the encoder).
func TestRecordGoldenBytes(t *testing.T) {
	k := Key{Group: "g", TopicID: testTopic, Partition: 3}
	snap := Record{Type: SnapshotRecord, Key: k, Snapshot: &SnapshotValue{
		SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 4, DeliveryCompleteCount: -1,
		CreateTimestamp: 5, WriteTimestamp: 6,
		StateBatches: []StateBatch{{FirstOffset: 4, LastOffset: 5, DeliveryState: Acknowledged, DeliveryCount: 1}},
	}}
	upd := Record{Type: UpdateRecord, Key: k, Update: &UpdateValue{
		SnapshotEpoch: 1, LeaderEpoch: 3, StartOffset: -1, DeliveryCompleteCount: 7,
	}}
	clean := func(s string) string { return strings.Join(strings.Fields(s), "") }
	for _, tc := range []struct {
		name       string
		r          Record
		key, value string
	}{
		{"snapshot", snap,
			"0000 0001 67 0102030405060708090a0b0c0d0e0f10 00000003",
			"0000 00000001 00000002 00000003 0000000000000004 0000000000000005 0000000000000006" +
				" 02 0000000000000004 0000000000000005 02 0001 00" + // one batch, its empty tags
				" 00"}, // no tags: delivery_complete_count is the default -1
		{"update", upd,
			"0001 0001 67 0102030405060708090a0b0c0d0e0f10 00000003",
			"0000 00000001 00000003 ffffffffffffffff" +
				" 01" + // no batches
				" 01 00 04 00000007"}, // tag 0, 4 bytes: delivery_complete_count 7
		{"tombstone", Record{Type: UpdateRecord, Key: k},
			"0001 0001 67 0102030405060708090a0b0c0d0e0f10 00000003", ""},
	} {
		key, value := EncodeRecord(tc.r)
		if got := hex.EncodeToString(key); got != clean(tc.key) {
			t.Errorf("%s key = %s, want %s", tc.name, got, clean(tc.key))
		}
		if got := hex.EncodeToString(value); got != clean(tc.value) {
			t.Errorf("%s value = %s, want %s", tc.name, got, clean(tc.value))
		}
		if tc.value == "" && value != nil {
			t.Errorf("%s: tombstone value not nil", tc.name)
		}
		back, err := DecodeRecord(key, value)
		if err != nil || !reflect.DeepEqual(back, tc.r) {
			t.Errorf("%s decode = %+v, %v; want %+v", tc.name, back, err, tc.r)
		}
	}
}

func randRecord(rng *rand.Rand) Record {
	k := Key{Group: strings.Repeat("g", rng.Intn(20)), Partition: rng.Int31()}
	rng.Read(k.TopicID[:])
	var bs []StateBatch
	for i := rng.Intn(5); i > 0; i-- {
		bs = append(bs, StateBatch{rng.Int63(), rng.Int63(), RecordState(rng.Intn(5)), int16(rng.Intn(100))})
	}
	dcc := int32(-1)
	if rng.Intn(2) == 0 {
		dcc = rng.Int31()
	}
	switch rng.Intn(3) {
	case 0:
		return Record{Type: SnapshotRecord, Key: k, Snapshot: &SnapshotValue{
			SnapshotEpoch: rng.Int31(), StateEpoch: rng.Int31(), LeaderEpoch: rng.Int31(), StartOffset: rng.Int63(),
			DeliveryCompleteCount: dcc, CreateTimestamp: rng.Int63(), WriteTimestamp: rng.Int63(), StateBatches: bs,
		}}
	case 1:
		return Record{Type: UpdateRecord, Key: k, Update: &UpdateValue{
			SnapshotEpoch: rng.Int31(), LeaderEpoch: rng.Int31(), StartOffset: rng.Int63(),
			DeliveryCompleteCount: dcc, StateBatches: bs,
		}}
	}
	return Record{Type: RecordType(rng.Intn(2)), Key: k}
}

func TestRecordRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		r := randRecord(rng)
		k, v := EncodeRecord(r)
		back, err := DecodeRecord(k, v)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip: got %+v, want %+v", back, r)
		}
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	k, v := EncodeRecord(Record{Type: SnapshotRecord, Key: Key{Group: "g"}, Snapshot: &SnapshotValue{
		StateBatches: []StateBatch{{1, 2, Available, 1}},
	}})
	badType := append([]byte{0, 2}, k[2:]...)
	badVersion := append([]byte{0, 1}, v[2:]...)
	for name, kv := range map[string][2][]byte{
		"short key":        {k[:len(k)-1], v},
		"key trailing":     {append(append([]byte{}, k...), 0), v},
		"record type 2":    {badType, v},
		"value version 1":  {k, badVersion},
		"short value":      {k, v[:len(v)-1]},
		"value trailing":   {k, append(append([]byte{}, v...), 0)},
		"null group":       {append([]byte{0, 0, 0xff, 0xff}, make([]byte, 20)...), nil},
		"huge batch count": {k, append(append([]byte{}, v[:2+4*3+8*3]...), 0xff, 0xff, 0xff, 0xff, 0x0f)},
	} {
		if _, err := DecodeRecord(kv[0], kv[1]); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: err = %v, want ErrBadRecord", name, err)
		}
	}
}

// FuzzDecodeRecord: decoding arbitrary bytes never panics nor allocates
// beyond the input's size; whatever decodes re-encodes to a record that
// decodes to the same value (the encoding is canonical up to unknown tags,
// which are dropped), and replaying it into a journal never panics.
func FuzzDecodeRecord(f *testing.F) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 8; i++ {
		k, v := EncodeRecord(randRecord(rng))
		f.Add(k, v)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if len(value) == 0 {
			value = nil
		}
		r, err := DecodeRecord(key, value)
		if err != nil {
			return
		}
		k2, v2 := EncodeRecord(r)
		if !bytes.Equal(k2, key) {
			t.Fatalf("key not canonical: %x vs %x", k2, key)
		}
		r2, err := DecodeRecord(k2, v2)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-decode differs: %+v vs %+v", r, r2)
		}
		j := NewJournal()
		j.Apply(r)
		if st, ok := j.State(r.Key); ok && len(st.Batches) > 0 &&
			st.Batches[len(st.Batches)-1].LastOffset-st.StartOffset < 1<<16 {
			_, _ = Restore(DefaultConfig(), st) // a small window: cheap enough per input
		}
	})
}
