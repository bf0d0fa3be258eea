package raftlog

import (
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// FuzzReplaySegment feeds arbitrary bytes to the WAL reader as a segment.
// Invariants:
//   - it never panics and never loops forever;
//   - the offset where valid frames end is within the input;
//   - the log it rebuilds is contiguous (entry i+1 follows entry i);
//   - findFrame after the damage point never panics and reports an offset
//     inside the input.
func FuzzReplaySegment(f *testing.F) {
	fs := vfs.NewMem()
	s := openMem(f, fs, Options{})
	fill2 := func(from, to uint64) {
		for i := from + 1; i <= to; i++ {
			mustSave(f, s, hardState(1, 1, i-1), []*pbEntry{ent(i, 1, "x")}, nil)
		}
	}
	fill2(0, 5)
	mustSave(f, s, hardState(2, 1, 5), []*pbEntry{ent(4, 2, "y")}, leaderSnap(3, 2, "z"))
	s.Close()
	name := listNames(f, fs)[0]
	b, err := readFile(fs, joinDir(testDir, name))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte{})
	f.Add(appendFrame(nil, recHeader, headerPayload(1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r replayer
		end, err := r.segment(walName(1), b)
		if err != nil {
			return
		}
		if end < 0 || end > len(b) {
			t.Fatalf("end %d outside [0, %d]", end, len(b))
		}
		if r.ml != nil {
			for k := 2; k < len(r.ml.ents); k++ {
				if r.ml.ents[k].GetIndex() != r.ml.ents[k-1].GetIndex()+1 {
					t.Fatalf("log not contiguous at %d", k)
				}
			}
		}
		if end < len(b) {
			if at, ok := findFrame(b, end+1); ok && (at <= end || at >= len(b)) {
				t.Fatalf("findFrame = %d", at)
			}
		}
	})
}

// FuzzDecodeSnapshot: arbitrary bytes never panic the snapshot decoder,
// and whatever it accepts has metadata.
func FuzzDecodeSnapshot(f *testing.F) {
	b, err := encodeSnapshot(leaderSnap(9, 2, "data"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:10])
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := decodeSnapshot(b)
		if err == nil && snap.GetMetadata() == nil {
			t.Fatal("accepted a snapshot without metadata")
		}
	})
}
