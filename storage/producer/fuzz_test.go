package producer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRestore feeds arbitrary bytes to [State.Restore]. Invariants:
//
//   - Restore never panics, and never allocates beyond what the input's
//     length justifies (the entry count is bounded by the bytes present);
//   - a rejected input returns an error wrapping [ErrCorruptSnapshot] and
//     leaves the State exactly as it was;
//   - an accepted input is canonical: Snapshot of the restored State
//     returns the input byte for byte;
//   - a restored State is usable: Check, Update, TruncateTo and
//     RemoveExpired on it do not panic, and a snapshot taken after them
//     restores again.
//
// The seed corpus is testdata/fuzz/FuzzRestore plus the golden snapshot
// and the snapshots added below; `go test` runs them all.
func FuzzRestore(f *testing.F) {
	addSeeds(f)
	f.Fuzz(checkRestore)
}

func addSeeds(f *testing.F) {
	f.Add(New(Options{}).Snapshot())
	f.Add(sampleState().Snapshot())
	if golden, err := os.ReadFile(filepath.Join("testdata", "snapshot", "v1.bin")); err == nil {
		f.Add(golden)
	}
	one := New(Options{})
	one.Update(hdr(1, 0, 2147483647, 2), 0, 1) // wrapped sequence
	f.Add(one.Snapshot())
	f.Add([]byte("SPS1"))
}

// FuzzRestoreResealed is [FuzzRestore] with the CRC recomputed over the
// fuzzed bytes first, so that the fuzzer reaches the structural checks
// behind the checksum instead of spending itself on CRC mismatches. Same
// invariants.
func FuzzRestoreResealed(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= snapHeaderSize {
			data = reseal(bytes.Clone(data))
		}
		checkRestore(t, data)
	})
}

// checkRestore checks FuzzRestore's invariants for one input.
func checkRestore(t *testing.T, data []byte) {
	s := sampleState()
	before := s.Snapshot()
	err := s.Restore(data)
	if err != nil {
		if !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
		}
		if !bytes.Equal(s.Snapshot(), before) {
			t.Fatal("rejected snapshot changed the state")
		}
		return
	}
	if got := s.Snapshot(); !bytes.Equal(got, data) {
		t.Fatalf("accepted snapshot is not canonical:\n in  %x\n out %x", data, got)
	}
	for _, id := range s.sortedIDs() {
		pr, _ := s.Entry(id)
		h := hdr(id, pr.Epoch, 0, 1)
		if n := len(pr.Batches); n > 0 {
			h.BaseSequence = incSeq(pr.Batches[n-1].LastSeq, 1)
		}
		if _, err := s.Check(h); err != nil {
			t.Fatalf("producer %d: next batch refused: %v", id, err)
		}
		var next int64
		if n := len(pr.Batches); n > 0 {
			next = pr.Batches[n-1].LastOffset + 1
		}
		if next >= 0 { // a LastOffset of MaxInt64 leaves no room
			s.Update(h, next, pr.LastTimestamp)
		}
	}
	s.TruncateTo(1 << 40)
	s.RemoveExpired(0)
	if err := New(Options{}).Restore(s.Snapshot()); err != nil {
		t.Fatalf("snapshot after use does not restore: %v", err)
	}
}
