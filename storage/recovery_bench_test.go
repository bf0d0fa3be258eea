package storage

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-io/strata/storage/vfs"
)

// BenchmarkRecoverAfterCrash measures OpenManager after a kill -9: no
// clean-shutdown marker and no recovery-point checkpoint (the data arrived
// after the last one), so every partition's active segment is rescanned.
// The case is 2,000 partitions of 200 single-record batches each
// (400k batches, about 45 MB), which took 24-29 s to reopen; the target is
// at most 3 s. The page cache is warm, as it is after a process crash.
//
//	go test -run '^$' -bench 'RecoverAfterCrash' -benchtime 3x ./storage
func BenchmarkRecoverAfterCrash(b *testing.B) {
	for _, c := range []struct{ parts, batches int }{{200, 200}, {2000, 200}} {
		b.Run(fmt.Sprintf("partitions=%d/batches=%d", c.parts, c.batches), func(b *testing.B) {
			if testing.Short() && c.parts > 200 {
				b.Skip("builds 2,000 partitions")
			}
			benchRecoverAfterCrash(b, c.parts, c.batches)
		})
	}
}

func benchRecoverAfterCrash(b *testing.B, parts, batches int) {
	dir := b.TempDir()
	cfg := DefaultConfig()
	opts := ManagerOptions{Dir: dir, FS: vfs.Default, Default: cfg, DisableCleaner: true}
	m, err := OpenManager(opts)
	if err != nil {
		b.Fatal(err)
	}
	bt := makeBatch(b, 1, 40, time.Now().UnixMilli())
	buf := make([]byte, len(bt))
	var bytes int64
	for p := range parts {
		l, err := m.GetOrCreate("bench", int32(p), cfg)
		if err != nil {
			b.Fatal(err)
		}
		for range batches {
			copy(buf, bt)
			if _, err := l.Append(buf, AppendOptions{LeaderEpoch: 1, AssignOffsets: true}); err != nil {
				b.Fatal(err)
			}
		}
		bytes += l.Size()
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bytes)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		// A crash: no marker, and no checkpoint since the data arrived.
		for _, f := range []string{CleanShutdownFile, RecoveryPointCheckpointFile} {
			if err := vfs.Default.Remove(filepath.Join(dir, f)); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		m, err := OpenManager(opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		logs := m.Logs()
		if len(logs) != parts || logs[0].LogEndOffset() != int64(batches) || !logs[0].Recovery().Recovered {
			b.Fatalf("reopened %d logs, first at %d (recovered %v), want %d at %d", len(logs), logs[0].LogEndOffset(), logs[0].Recovery().Recovered, parts, batches)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
