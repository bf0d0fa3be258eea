package producer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/strata-io/strata/internal/batch"
)

// FuzzRestoreTxns feeds arbitrary bytes to [RestoreTxns]. Invariants:
//
//   - RestoreTxns never panics, and never allocates beyond what the
//     input's length justifies (both counts are checked against the bytes
//     present before anything is decoded);
//   - a rejected input returns an error wrapping [ErrCorruptSnapshot];
//   - an accepted input is canonical: Snapshot at its offset returns it
//     byte for byte;
//   - a restored table is consistent and usable: FirstUnstable is the
//     smallest first offset of its open and unreplicated transactions,
//     CheckMarker, ApplyBatch, ApplyMarker, OnHighWatermark and
//     RemoveExpired do not panic, and a snapshot taken after them restores.
//
// The seed corpus is testdata/fuzz/FuzzRestoreTxns plus the snapshots
// added below; `go test` runs them all.
func FuzzRestoreTxns(f *testing.F) {
	addTxnSeeds(f)
	f.Fuzz(checkRestoreTxns)
}

// FuzzRestoreTxnsResealed is [FuzzRestoreTxns] with the CRC recomputed
// over the fuzzed bytes first, so the fuzzer reaches the structural checks
// behind the checksum. Same invariants.
func FuzzRestoreTxnsResealed(f *testing.F) {
	addTxnSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= txnSnapHeaderSize {
			data = bytes.Clone(data)
			binary.BigEndian.PutUint32(data[6:], crc32.Checksum(data[10:], castagnoli))
		}
		checkRestoreTxns(t, data)
	})
}

func sampleTxns() *Txns {
	t := NewTxns()
	t.ApplyBatch(batch.Header{BaseOffset: 3, LastOffsetDelta: 1, ProducerID: 1, ProducerEpoch: 2, Attributes: attrTransactional}, 10)
	t.ApplyBatch(batch.Header{BaseOffset: 5, ProducerID: 2, Attributes: attrTransactional}, 11)
	t.ApplyMarker(Marker{ProducerID: 2, CoordinatorEpoch: 4}, 6, 12)
	t.ApplyMarker(Marker{ProducerID: 9, ProducerEpoch: 1, CoordinatorEpoch: 4, Commit: true}, 7, 13)
	t.OnHighWatermark(7)
	return t
}

func addTxnSeeds(f *testing.F) {
	f.Add(NewTxns().Snapshot(0))
	f.Add(sampleTxns().Snapshot(8))
	f.Add(sampleTxns().Snapshot(1 << 40))
	f.Add([]byte("STX0"))
	bad := sampleTxns().Snapshot(8)
	bad[len(bad)-1] ^= 1
	f.Add(bad)
}

func checkRestoreTxns(t *testing.T, data []byte) {
	tx, off, err := RestoreTxns(data)
	if err != nil {
		if !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
		}
		return
	}
	if got := tx.Snapshot(off); !bytes.Equal(got, data) {
		t.Fatalf("accepted snapshot is not canonical:\n in  %x\n out %x", data, got)
	}
	want := int64(-1)
	for _, p := range tx.Producers() {
		if p.FirstOffset >= 0 && (want < 0 || p.FirstOffset < want) {
			want = p.FirstOffset
		}
	}
	for _, c := range tx.unreplicated {
		if want < 0 || c.FirstOffset < want {
			want = c.FirstOffset
		}
	}
	if tx.FirstUnstable() != want {
		t.Fatalf("FirstUnstable %d, want %d", tx.FirstUnstable(), want)
	}
	for _, p := range tx.Producers() {
		m := Marker{ProducerID: p.ID, ProducerEpoch: p.Epoch, CoordinatorEpoch: max(p.CoordinatorEpoch, 0)}
		if err := tx.CheckMarker(m); err != nil {
			t.Fatalf("producer %d: its own epochs refused: %v", p.ID, err)
		}
		if off < 1<<62 {
			tx.ApplyBatch(batch.Header{BaseOffset: off, ProducerID: p.ID, ProducerEpoch: p.Epoch, Attributes: attrTransactional}, 0)
			tx.ApplyMarker(m, off+1, 0)
			off += 2
		}
	}
	tx.OnHighWatermark(off)
	tx.RemoveExpired(1<<40, 0)
	if _, _, err := RestoreTxns(tx.Snapshot(off)); err != nil {
		t.Fatalf("snapshot after use does not restore: %v", err)
	}
}
