package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/smalldisk"
	"github.com/strata-io/strata/storage/vfs"
)

// A recovery on a full disk must not crash. The log is written with few
// index entries, the disk filled up, and the log reopened uncleanly with a
// dense index interval, so the rebuild needs index pages the disk cannot
// give. Storing into those pages through the mapping was SIGBUS (the
// process died in index.(*TimeIndex).append); now the rebuild completes
// with the entries that fit, reads work, appends are refused with
// ErrLogDirFull without latching, and resume once space is freed.
func TestRecoverOnFullDiskDoesNotFault(t *testing.T) {
	disk := smalldisk.Mount(t, 8)
	dir := filepath.Join(disk, "t-0")
	cfg := DefaultConfig()
	cfg.SegmentIndexBytes = 4 << 20 // sparse, far beyond what the disk can back
	cfg.IndexIntervalBytes = 1 << 20
	cfg.FileDeleteDelayMs = 0
	opts := LogOptions{Dir: dir, Topic: "t", Partition: 0, FS: vfs.Default, Config: cfg, CleanShutdown: true}
	l, err := OpenLog(opts)
	if err != nil {
		t.Fatal(err)
	}
	var want int
	for i := 0; i < 400; i++ { // 400 batches of ~1 KiB
		if _, err := l.Append(makeBatch(t, 1, 1000, baseTs+int64(i)), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
		want++
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(disk, "filler")
	smalldisk.Fill(t, filler)

	opts.Config.IndexIntervalBytes = 0 // an entry per batch: ~8 pages of offset entries, ~12 of time entries
	opts.CleanShutdown, opts.RecoveryPoint = false, 0
	l, err = OpenLog(opts)
	if err != nil {
		t.Fatalf("OpenLog on a full disk: %v", err)
	}
	defer l.Close()
	if got := len(readBatches(t, l, "full disk")); got != want {
		t.Fatalf("read %d batches after recovery on a full disk, want %d", got, want)
	}
	_, err = l.Append(makeBatch(t, 1, 64<<10, baseTs+1000), AppendOptions{AssignOffsets: true})
	if !errors.Is(err, ErrLogDirFull) || l.Failed() {
		t.Fatalf("append on a full disk: %v (failed %v), want ErrLogDirFull without latching", err, l.Failed())
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(makeBatch(t, 1, 1000, baseTs+1001), AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	if got := len(readBatches(t, l, "after")); got != want+1 {
		t.Fatalf("read %d batches, want %d", got, want+1)
	}
}
