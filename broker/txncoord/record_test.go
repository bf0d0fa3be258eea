package txncoord

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRecordRoundTrip: every state that is written decodes back to the
// record it came from; Empty carries no partitions (null on the wire).
func TestRecordRoundTrip(t *testing.T) {
	tps := []TopicPartition{{"__consumer_offsets", 3}, {"a", 0}, {"a", 2}, {"b", 1}}
	for st := Empty; st <= CompleteAbort; st++ {
		r := TxnRecord{ProducerID: 1 << 40, PreviousProducerID: 7, Epoch: 32767, TimeoutMs: 60000, State: st,
			Partitions: tps, LastUpdateMs: 1700000000123, StartMs: 1700000000000}
		if st == Empty {
			r.Partitions, r.StartMs = nil, -1
		}
		got, err := DecodeValue(EncodeValue(r))
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		if !got.equal(r) {
			t.Fatalf("%s:\n got %s\nwant %s", st, recordString(got), recordString(r))
		}
	}
	// Empty with partitions given: they are not written (Kafka writes null).
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(EncodeValue(TxnRecord{State: Empty, Partitions: tps, PreviousProducerID: -1})); err != nil {
		t.Fatal(err)
	}
	if v.Topics != nil {
		t.Fatalf("Empty wrote partitions %v", v.Topics)
	}
	id, err := DecodeKey(EncodeKey("my-txn"))
	if err != nil || id != "my-txn" {
		t.Fatalf("key: %q %v", id, err)
	}
}

// TestDecodeValueVersion0: Kafka before 4.0 writes value version 0 (not
// flexible, no tags); it decodes with PreviousProducerID -1.
func TestDecodeValueVersion0(t *testing.T) {
	v := kmsg.NewTxnMetadataValue()
	v.Version = 0
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = 42, 3, 1000
	v.State = PrepareCommit
	v.Topics = []kmsg.TxnMetadataValueTopic{{Topic: "b", Partitions: []int32{1, 0}}, {Topic: "a", Partitions: []int32{5}}}
	v.LastUpdateTimestamp, v.StartTimestamp = 20, 10
	v.PreviousProducerID = 99 // a tag: not written in version 0
	got, err := DecodeValue(v.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := TxnRecord{ProducerID: 42, PreviousProducerID: -1, Epoch: 3, TimeoutMs: 1000, State: PrepareCommit,
		Partitions: []TopicPartition{{"a", 5}, {"b", 0}, {"b", 1}}, LastUpdateMs: 20, StartMs: 10}
	if !got.equal(want) {
		t.Fatalf("got %s\nwant %s", recordString(got), recordString(want))
	}
}

// TestDecodeErrors: versions and states the decoder refuses, and how Load
// treats them (unknown key versions skipped, the rest fail the load).
func TestDecodeErrors(t *testing.T) {
	good := EncodeValue(TxnRecord{ProducerID: 1, Epoch: 0, TimeoutMs: 1, State: Empty, StartMs: -1, PreviousProducerID: -1})
	v2 := append([]byte{0, 2}, good[2:]...)
	dead := EncodeValue(TxnRecord{ProducerID: 1, State: Dead, PreviousProducerID: -1})
	for name, c := range map[string]struct {
		key, value []byte
		want       error
		loads      bool
	}{
		"key version 1":    {append([]byte{0, 1}, EncodeKey("x")[2:]...), good, ErrUnknownVersion, true},
		"short key":        {[]byte{0}, good, ErrCorrupt, false},
		"truncated key":    {EncodeKey("abc")[:4], good, ErrCorrupt, false},
		"value version 2":  {EncodeKey("x"), v2, ErrUnknownVersion, false},
		"truncated value":  {EncodeKey("x"), good[:len(good)-3], ErrCorrupt, false},
		"Dead is not kept": {EncodeKey("x"), dead, ErrCorrupt, false},
	} {
		_, kerr := DecodeKey(c.key)
		var err error
		if kerr != nil {
			err = kerr
		} else {
			_, err = DecodeValue(c.value)
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
		co := New(Config{Partitions: 1}, nil)
		_, lerr := co.Load(0, 0, 1, []Record{{Key: c.key, Value: c.value}})
		if (lerr == nil) != c.loads {
			t.Errorf("%s: load error %v, want loads=%v", name, lerr, c.loads)
		}
		if st, _ := co.PartitionState(0); lerr != nil && st != Loading {
			t.Errorf("%s: failed load left the partition %d, want Loading", name, st)
		}
	}
}

// TestPartitionForJavaHash: the partition is Kafka's
// abs(String.hashCode) % partitions ("test".hashCode() is 3556498 in Java).
func TestPartitionForJavaHash(t *testing.T) {
	if got := PartitionFor("test", 50); got != 3556498%50 {
		t.Fatalf("PartitionFor(test) = %d, want %d", got, 3556498%50)
	}
	c := New(Config{}, nil)
	if got := c.PartitionFor("test"); got != 48 {
		t.Fatalf("default partitions: %d", got)
	}
}
