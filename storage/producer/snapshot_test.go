package producer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// rewriting reports the -rewrite flag, which cockroachdb/datadriven
// registers: one flag regenerates the scripts and the golden files.
func rewriting() bool {
	f := flag.Lookup("rewrite")
	return f != nil && f.Value.String() == "true"
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	s := sampleState()
	snap := s.Snapshot()
	r := New(Options{})
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if r.Producers() != s.Producers() {
		t.Fatalf("%d producers restored, want %d", r.Producers(), s.Producers())
	}
	for _, id := range s.sortedIDs() {
		a, _ := s.Entry(id)
		b, _ := r.Entry(id)
		if !equalProducer(a, b) {
			t.Errorf("producer %d: restored %+v, want %+v", id, b, a)
		}
	}
	if again := r.Snapshot(); !bytes.Equal(again, snap) {
		t.Fatal("restore then snapshot changed the bytes")
	}
	// The restored State answers as the original does.
	for _, h := range []struct{ pid, seq, n int64 }{{7, 21, 1}, {7, 18, 3}, {3, 11, 1}, {1 << 40, 2, 1}, {0, 101, 1}, {7, 5, 1}} {
		hd := hdr(h.pid, 0, int32(h.seq), int32(h.n))
		if pr, ok := s.Entry(h.pid); ok {
			hd.ProducerEpoch = pr.Epoch
		}
		d1, e1 := s.Check(hd)
		d2, e2 := r.Check(hd)
		if errKind(e1) != errKind(e2) || (d1 == nil) != (d2 == nil) || (d1 != nil && *d1 != *d2) {
			t.Errorf("pid %d seq %d: original %v %v, restored %v %v", h.pid, h.seq, d1, e1, d2, e2)
		}
	}
}

func equalProducer(a, b Entry) bool {
	if a.ID != b.ID || a.Epoch != b.Epoch || a.CoordinatorEpoch != b.CoordinatorEpoch ||
		a.TxnFirstOffset != b.TxnFirstOffset || a.LastTimestamp != b.LastTimestamp || len(a.Batches) != len(b.Batches) {
		return false
	}
	for i := range a.Batches {
		if a.Batches[i] != b.Batches[i] {
			return false
		}
	}
	return true
}

func TestSnapshotIsDeterministic(t *testing.T) {
	a, b := New(Options{}), New(Options{})
	ids := []int64{5, 1, 9, 3, 7, 2}
	for i, id := range ids {
		a.Update(hdr(id, 0, 0, 1), int64(i), 1)
	}
	// Same producers and offsets, inserted in the opposite order.
	for i := len(ids) - 1; i >= 0; i-- {
		b.Update(hdr(ids[i], 0, 0, 1), int64(i), 1)
	}
	if !bytes.Equal(a.Snapshot(), b.Snapshot()) {
		t.Fatal("snapshot depends on insertion order")
	}
	for i := 0; i < 20; i++ { // map iteration order varies between calls
		if !bytes.Equal(a.Snapshot(), a.Snapshot()) {
			t.Fatal("snapshot differs between calls")
		}
	}
}

func TestSnapshotEmptyState(t *testing.T) {
	snap := New(Options{}).Snapshot()
	if len(snap) != snapHeaderSize {
		t.Fatalf("empty snapshot is %d bytes", len(snap))
	}
	s := sampleState()
	if err := s.Restore(snap); err != nil || s.Producers() != 0 {
		t.Fatalf("restore empty: %v, %d producers", err, s.Producers())
	}
}

func TestAppendSnapshotAtAppends(t *testing.T) {
	s := sampleState()
	prefix := []byte("keep")
	out := s.AppendSnapshotAt(append(make([]byte, 0, 8), prefix...), math.MaxInt64)
	if !bytes.HasPrefix(out, prefix) || !bytes.Equal(out[len(prefix):], s.Snapshot()) {
		t.Fatal("AppendSnapshotAt did not append the snapshot after dst")
	}
	buf := make([]byte, 0, 4096)
	if out := s.AppendSnapshotAt(buf, math.MaxInt64); &out[0] != &buf[:1][0] {
		t.Fatal("AppendSnapshotAt reallocated a large enough buffer")
	}
}

// TestSnapshotGoldenV1 pins format version 1: a change to the encoding
// must come with a new version, not silently alter these bytes.
func TestSnapshotGoldenV1(t *testing.T) {
	path := filepath.Join("testdata", "snapshot", "v1.bin")
	got := sampleState().Snapshot()
	if rewriting() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("snapshot bytes differ from %s (run with -rewrite only if the format version changed)", path)
	}
	if err := New(Options{}).Restore(want); err != nil {
		t.Fatalf("golden snapshot does not restore: %v", err)
	}
}

// TestRestoreRejectsEveryFlippedByte: the CRC covers everything after
// itself and the header fields are checked, so any single damaged byte is
// caught.
func TestRestoreRejectsEveryFlippedByte(t *testing.T) {
	snap := sampleState().Snapshot()
	for i := range snap {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(snap)
			b[i] ^= mask
			if err := New(Options{}).Restore(b); !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("byte %d ^ %#x: %v", i, mask, err)
			}
		}
	}
}

func TestRestoreRejectsTruncatedAndExtended(t *testing.T) {
	snap := sampleState().Snapshot()
	for n := 0; n < len(snap); n++ {
		if err := New(Options{}).Restore(snap[:n]); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("%d of %d bytes: %v", n, len(snap), err)
		}
	}
	if err := New(Options{}).Restore(reseal(append(bytes.Clone(snap), 0))); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("trailing byte: %v", err)
	}
}

// reseal recomputes a snapshot's CRC, so that a test can reach the checks
// behind it.
func reseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offSnapCRC:], crc32.Checksum(b[offSnapCount:], castagnoli))
	return b
}

// TestRestoreRejectsInconsistentContent damages fields behind a valid CRC:
// a writer bug, or a snapshot from elsewhere, must not load.
func TestRestoreRejectsInconsistentContent(t *testing.T) {
	one := func() []byte { // one producer (id 4) with two batches
		s := New(Options{})
		s.Update(hdr(4, 0, 0, 3), 10, 1)
		s.Update(hdr(4, 0, 3, 3), 13, 1)
		return s.Snapshot()
	}
	e := snapHeaderSize      // entry start
	b0 := e + snapEntrySize  // first batch start
	b1 := b0 + snapBatchSize // second batch start
	put32 := binary.BigEndian.PutUint32
	put64 := func(b []byte, v int64) { binary.BigEndian.PutUint64(b, uint64(v)) }
	tests := []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"unknown version", func(b []byte) []byte { b[offSnapVersion+1] = 2; return b }},
		{"count too large", func(b []byte) []byte { put32(b[offSnapCount:], 2); return b }},
		{"count huge", func(b []byte) []byte { put32(b[offSnapCount:], 1<<31); return b }},
		{"count too small", func(b []byte) []byte { put32(b[offSnapCount:], 0); return b }},
		{"negative producer id", func(b []byte) []byte { put64(b[e:], -4); return b }},
		{"open txn offset below -1", func(b []byte) []byte { put64(b[e+14:], -2); return b }},
		{"six batches", func(b []byte) []byte { b[e+30] = 6; return b }},
		{"batch count past the end", func(b []byte) []byte { b[e+30] = 3; return b }},
		{"negative first sequence", func(b []byte) []byte { put32(b[b0:], 0xffffffff); return b }},
		{"last sequence off the offsets", func(b []byte) []byte { put32(b[b0+4:], 3); return b }},
		{"negative first offset", func(b []byte) []byte { put64(b[b0+8:], -1); return b }},
		{"last offset before first", func(b []byte) []byte { put64(b[b0+16:], 9); return b }},
		{"batches overlap", func(b []byte) []byte { put64(b[b1+8:], 12); put64(b[b1+16:], 14); return b }},
		{"span over MaxInt32", func(b []byte) []byte { put64(b[b1+16:], 13+1<<31); return b }},
	}
	if err := New(Options{}).Restore(one()); err != nil {
		t.Fatalf("unedited: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sampleState()
			before := s.Snapshot()
			err := s.Restore(reseal(tc.edit(one())))
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("Restore = %v, want ErrCorruptSnapshot", err)
			}
			if !bytes.Equal(s.Snapshot(), before) {
				t.Fatal("a failed Restore changed the state")
			}
		})
	}
}

func TestRestoreRejectsUnsortedOrDuplicateIDs(t *testing.T) {
	two := func(a, b int64) []byte {
		s := New(Options{})
		s.Update(hdr(a, 0, 0, 1), 0, 1)
		s.Update(hdr(b, 0, 0, 1), 1, 1)
		return s.Snapshot()
	}
	snap := two(1, 2)
	// Swap the two equal-sized entries: ids 2 then 1.
	n := snapEntrySize + snapBatchSize
	sw := bytes.Clone(snap)
	copy(sw[snapHeaderSize:], snap[snapHeaderSize+n:])
	copy(sw[snapHeaderSize+n:], snap[snapHeaderSize:snapHeaderSize+n])
	if err := New(Options{}).Restore(reseal(sw)); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("unsorted ids: %v", err)
	}
	dup := bytes.Clone(snap)
	binary.BigEndian.PutUint64(dup[snapHeaderSize+n:], 1)
	if err := New(Options{}).Restore(reseal(dup)); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("duplicate ids: %v", err)
	}
}

// TestSnapshotAtDuringTxIsExactOnBothSidesOfTheWrite: a roll inside the
// log append, before the request's batches are written, snapshots at
// their first offset and must see the state before the Tx, evictions and
// epoch bumps undone; a roll after the write and before Commit snapshots
// at the new end and must see the committed result.
func TestSnapshotAtDuringTxIsExactOnBothSidesOfTheWrite(t *testing.T) {
	s := sampleState()
	end := int64(1000)
	before := s.Snapshot()
	tx := s.Begin()
	tx.Update(hdr(7, 0, 21, 2), end, 9)   // evicts producer 7's oldest batch
	tx.Update(hdr(3, 3, 0, 1), end+2, 9)  // epoch bump clears producer 3's batches
	tx.Update(hdr(55, 0, 0, 1), end+3, 9) // a new producer
	tx.Update(hdr(12, 1, 2, 1), end+4, 9) // producer 12 has a transaction open
	if got := s.SnapshotAt(end); !bytes.Equal(got, before) {
		t.Fatal("snapshot at the Tx's first offset is not the state before the Tx")
	}
	during := s.SnapshotAt(end + 5)
	tx.Commit()
	if !bytes.Equal(during, s.Snapshot()) {
		t.Fatal("snapshot at the end after the write is not the committed state")
	}
	// Part way through the request (a torn view no roll can see, but the
	// rule is the same): the first two batches in, the rest out.
	s2 := sampleState()
	tx = s2.Begin()
	tx.Update(hdr(7, 0, 21, 2), end, 9)
	tx.Update(hdr(3, 3, 0, 1), end+2, 9)
	part := s2.SnapshotAt(end + 2)
	tx.Abort()
	tx = s2.Begin()
	tx.Update(hdr(7, 0, 21, 2), end, 9)
	tx.Commit()
	if !bytes.Equal(part, s2.Snapshot()) {
		t.Fatal("snapshot part way through a Tx is not the state after its first batch")
	}
}

func TestSnapshotAtOutsideTxDropsBatchesAtOrAboveOffset(t *testing.T) {
	s := New(Options{})
	s.Update(hdr(1, 0, 0, 2), 0, 1) // 0-1
	s.Update(hdr(2, 0, 0, 1), 2, 1) // 2
	s.Update(hdr(1, 0, 2, 2), 3, 1) // 3-4
	h := hdr(3, 0, 0, 1)
	h.Attributes = attrTransactional
	s.Update(h, 5, 1) // 5
	got := s.SnapshotAt(3)
	s.TruncateTo(3)
	if !bytes.Equal(got, s.Snapshot()) {
		t.Fatal("SnapshotAt(3) differs from the state truncated to 3")
	}
}
