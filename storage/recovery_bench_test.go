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
//
// kill9=true leaves the files as a killed process does: the writing
// Manager is never closed, so the active segments' index files keep their
// preallocated size and nothing was fsynced (the page cache is dirty).
// kill9=false closes it first (index files trimmed, data flushed) and
// then removes the marker and the checkpoint. Run kill9=true with
// -benchtime 1x: each iteration keeps its Manager open.
func BenchmarkRecoverAfterCrash(b *testing.B) {
	for _, c := range []struct {
		parts, batches int
		kill9          bool
	}{{200, 200, false}, {200, 200, true}, {2000, 200, false}, {2000, 200, true}} {
		b.Run(fmt.Sprintf("partitions=%d/batches=%d/kill9=%v", c.parts, c.batches, c.kill9), func(b *testing.B) {
			if testing.Short() && c.parts > 200 {
				b.Skip("builds 2,000 partitions")
			}
			benchRecoverAfterCrash(b, c.parts, c.batches, c.kill9)
		})
	}
}

func benchRecoverAfterCrash(b *testing.B, parts, batches int, kill9 bool) {
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
	if kill9 {
		b.Cleanup(func() { m.Close() })
	} else if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bytes)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		// A crash: no marker, and no checkpoint since the data arrived.
		for _, f := range []string{CleanShutdownFile, RecoveryPointCheckpointFile} {
			if err := vfs.Default.Remove(filepath.Join(dir, f)); err != nil && !isNotExist(err) {
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
		if kill9 {
			b.Cleanup(func() { m.Close() })
		} else if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
