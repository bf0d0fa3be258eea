package txncoord

import (
	"bytes"
	"testing"
)

// FuzzDecodeRecord feeds arbitrary key and value bytes to the
// __transaction_state decoder and to Load. Invariants:
//   - neither DecodeKey, DecodeValue nor Load panics;
//   - a key that decodes re-encodes to a prefix of its bytes (trailing
//     bytes are ignored, as Kafka's generated readers ignore them);
//   - a value that decodes has a written state (Empty..CompleteAbort),
//     sorted unique partitions, none when Empty, and re-encoding it decodes
//     to an equal record (encode∘decode is stable);
//   - Load succeeds exactly when every record decodes (or has an unknown
//     key version, which is skipped), and then serves the partition.
//
// The seed corpus (valid records of every state, a version 0 value, and
// mangled ones) runs with plain go test; fuzz with
//
//	go test ./broker/txncoord -run '^$' -fuzz '^FuzzDecodeRecord$' -fuzztime 60s
func FuzzDecodeRecord(f *testing.F) {
	tps := []TopicPartition{{"a", 0}, {"b", 3}}
	for st := Empty; st <= CompleteAbort; st++ {
		r := TxnRecord{ProducerID: int64(st) + 1, PreviousProducerID: -1, Epoch: int16(st), TimeoutMs: 100, State: st, Partitions: tps, StartMs: 5, LastUpdateMs: 6}
		if st == Empty {
			r.Partitions = nil
		}
		v := EncodeValue(r)
		f.Add(EncodeKey("txn"), v)
		f.Add(EncodeKey(""), v[:len(v)/2])
	}
	f.Add(EncodeKey("x"), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 100, 2, 0, 0, 0, 1, 0, 1, 'a', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 1, 'x'}, []byte{0, 1})
	f.Add([]byte{}, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		id, kerr := DecodeKey(key)
		if kerr == nil && !bytes.HasPrefix(key, EncodeKey(id)) {
			t.Fatalf("key %x decodes to %q, re-encodes to %x", key, id, EncodeKey(id))
		}
		var verr error
		if value != nil {
			r, err := DecodeValue(value)
			verr = err
			if err == nil {
				if r.State < Empty || r.State > CompleteAbort {
					t.Fatalf("decoded state %d", r.State)
				}
				if r.State == Empty && r.Partitions != nil {
					t.Fatalf("Empty with partitions %v", r.Partitions)
				}
				for i := 1; i < len(r.Partitions); i++ {
					if compareTP(r.Partitions[i-1], r.Partitions[i]) >= 0 {
						t.Fatalf("partitions not sorted/unique: %v", r.Partitions)
					}
				}
				again, err := DecodeValue(EncodeValue(r))
				if err != nil || !again.equal(r) {
					t.Fatalf("re-encode: %v\n%s\n%s", err, recordString(r), recordString(again))
				}
			}
		}
		c := New(Config{Partitions: 1}, nil)
		_, lerr := c.Load(0, 0, 1, []Record{{Key: key, Value: value}})
		skipped := kerr != nil && len(key) >= 2 && !(key[0] == 0 && key[1] == 0)
		wantOK := kerr == nil && verr == nil || skipped
		if (lerr == nil) != wantOK {
			t.Fatalf("load error %v; key error %v, value error %v", lerr, kerr, verr)
		}
		if st, _ := c.PartitionState(0); (st == Loaded) != wantOK {
			t.Fatalf("partition state %d after load error %v", st, lerr)
		}
	})
}
