package raftlog

import (
	"fmt"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/strata-io/strata/storage/vfs"
)

// BenchmarkSave measures durable Saves on the real disk: one Save of n
// 200-byte entries (plus a hard state) per iteration, each a single write
// and one fsync. (MemFS is no use here: its Sync copies the whole file, so
// it would measure MemFS.)
func BenchmarkSave(b *testing.B) {
	for _, fsName := range []string{"os"} {
		for _, n := range []int{1, 64} {
			b.Run(fmt.Sprintf("fs=%s/entries=%d", fsName, n), func(b *testing.B) {
				s, err := Open(Options{FS: vfs.Default, Dir: b.TempDir(), Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				payload := make([]byte, 200)
				idx := uint64(0)
				ents := make([]*pb.Entry, n)
				b.SetBytes(int64(n * len(payload)))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					for k := range ents {
						idx++
						ents[k] = ent(idx, 1, "")
						ents[k].Data = payload
					}
					if err := s.Save(hardState(1, 1, idx-uint64(n)), ents, nil); err != nil {
						b.Fatal(err)
					}
					if idx > 1<<16 {
						// Keep memory flat on long runs, as the controller does.
						if err := s.Compact(idx - 1024); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "entries/s")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "saves/s")
			})
		}
	}
}
