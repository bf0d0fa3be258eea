package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/storage/vfs"
)

func managerOptions(fs vfs.FS) ManagerOptions {
	cfg := DefaultConfig()
	cfg.SegmentIndexBytes = 64 << 10
	cfg.FileDeleteDelayMs = 0
	return ManagerOptions{Dir: "/data", FS: fs, Default: cfg, RecoveryThreads: 4}
}

func openManager(t *testing.T, o ManagerOptions) *Manager {
	t.Helper()
	m, err := OpenManager(o)
	if err != nil {
		t.Fatalf("OpenManager: %v", err)
	}
	return m
}

func TestParseLogDirName(t *testing.T) {
	for _, c := range []struct {
		in    string
		topic string
		part  int32
		ok    bool
	}{
		{"orders-0", "orders", 0, true},
		{"my-topic.v2-17", "my-topic.v2", 17, true},
		{"__consumer_offsets-49", "__consumer_offsets", 49, true},
		{"orders", "", 0, false},
		{"orders-", "", 0, false},
		{"-3", "", 0, false},
		{"orders--1", "orders-", 1, true}, // Kafka allows a topic ending in '-'
		{"orders-1-", "", 0, false},
		{"orders-x", "", 0, false},
	} {
		topic, part, ok := ParseLogDirName(c.in)
		if ok != c.ok || topic != c.topic || part != c.part {
			t.Errorf("ParseLogDirName(%q) = %q %d %v", c.in, topic, part, ok)
		}
		if ok && LogDirName(topic, part) != c.in {
			t.Errorf("LogDirName round trip of %q", c.in)
		}
	}
	if got := SegmentFileName(42, LogFileSuffix); got != "00000000000000000042.log" {
		t.Errorf("SegmentFileName = %q", got)
	}
}

func TestManagerLoadsManyPartitionsCleanAndUnclean(t *testing.T) {
	fs := vfs.NewMem()
	m := openManager(t, managerOptions(fs))
	want := map[string]int64{}
	for i := 0; i < 24; i++ {
		topic := fmt.Sprintf("topic-%d.x", i%4)
		l, err := m.GetOrCreate(topic, int32(i), m.opts.Default)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j <= i%5; j++ {
			if _, err := l.Append(makeBatch(t, 3, 20, baseTs), AppendOptions{AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
		}
		want[LogDirName(topic, int32(i))] = l.LogEndOffset()
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat("/data/" + CleanShutdownFile); err != nil {
		t.Fatal("no clean-shutdown marker after Close")
	}

	check := func(m *Manager, recovered bool) {
		t.Helper()
		if len(m.Logs()) != len(want) {
			t.Fatalf("loaded %d logs, want %d", len(m.Logs()), len(want))
		}
		for _, l := range m.Logs() {
			if l.LogEndOffset() != want[LogDirName(l.Topic(), l.Partition())] {
				t.Fatalf("%s-%d: leo %d", l.Topic(), l.Partition(), l.LogEndOffset())
			}
			if l.Recovery().Recovered != recovered {
				t.Fatalf("%s-%d: recovered=%v, want %v", l.Topic(), l.Partition(), l.Recovery().Recovered, recovered)
			}
		}
	}
	m = openManager(t, managerOptions(fs))
	check(m, false)
	if _, err := fs.Stat("/data/" + CleanShutdownFile); err == nil {
		t.Fatal("marker still present after load")
	}
	// Crash: no Close, so no marker; the checkpoints written at the last
	// Close say everything is flushed, so recovery scans only the tails.
	crashed := fs.CrashClone(100, nil)
	m2 := openManager(t, managerOptions(crashed))
	check(m2, true)
	m2.Close()
	m.Close()
}

func TestManagerCheckpointsRecoveryPointsAndLogStart(t *testing.T) {
	fs := vfs.NewMem()
	m := openManager(t, managerOptions(fs))
	defer m.Close()
	l, _ := m.GetOrCreate("t", 0, m.opts.Default)
	for i := 0; i < 4; i++ {
		l.Append(makeBatch(t, 2, 10, baseTs), AppendOptions{AssignOffsets: true})
		l.Roll()
	}
	if err := l.Flush(); err != nil { // the rolls' fsyncs (rollsync.go)
		t.Fatal(err)
	}
	if err := l.SetLogStartOffset(3); err != nil {
		t.Fatal(err)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rps, err := checkpoint.ReadOffsets(fs, "/data/"+RecoveryPointCheckpointFile)
	if err != nil || rps[checkpoint.TopicPartition{Topic: "t", Partition: 0}] != 8 {
		t.Fatalf("recovery points %v %v", rps, err)
	}
	lsos, err := checkpoint.ReadOffsets(fs, "/data/"+LogStartOffsetCheckpointFile)
	if err != nil || lsos[checkpoint.TopicPartition{Topic: "t", Partition: 0}] != 3 {
		t.Fatalf("log start offsets %v %v", lsos, err)
	}
	// A crash keeps the checkpointed start offset.
	m2 := openManager(t, managerOptions(fs.CrashClone(0, nil)))
	defer m2.Close()
	l2, ok := m2.Get("t", 0)
	if !ok || l2.LogStartOffset() != 3 || l2.LogEndOffset() != 8 {
		t.Fatalf("after crash: %v start %d end %d", ok, l2.LogStartOffset(), l2.LogEndOffset())
	}
}

func TestManagerDeleteRemovesTheLogDirectory(t *testing.T) {
	fs := vfs.NewMem()
	m := openManager(t, managerOptions(fs))
	l, _ := m.GetOrCreate("gone", 3, m.opts.Default)
	l.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true})
	if err := m.Delete("gone", 3); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get("gone", 3); ok {
		t.Fatal("deleted log still listed")
	}
	if _, err := l.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append to a deleted log: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List("/data")
	for _, n := range names {
		if n != CleanShutdownFile && n != RecoveryPointCheckpointFile && n != LogStartOffsetCheckpointFile && n != ReplicationOffsetCheckpointFile && n != LockFile {
			t.Fatalf("left behind: %s", n)
		}
	}
	// A -delete dir left by a crash is removed at the next start.
	fs.MkdirAll("/data/x-1.abc"+DeleteDirSuffix, 0o755)
	m = openManager(t, managerOptions(fs))
	m.Close()
	if _, err := fs.Stat("/data/x-1.abc" + DeleteDirSuffix); err == nil {
		t.Fatal("-delete dir survives a restart")
	}
}

func TestManagerLoopsEnforceRetentionAndFlush(t *testing.T) {
	fs := vfs.NewMem()
	o := managerOptions(fs)
	o.RetentionCheckInterval = 5 * time.Millisecond
	o.FlushCheckInterval = 5 * time.Millisecond
	o.CheckpointInterval = 5 * time.Millisecond
	o.Default.RetentionBytes = 1
	o.Default.FlushMs = 1
	m := openManager(t, o)
	defer m.Close()
	l, _ := m.GetOrCreate("t", 0, o.Default)
	for i := 0; i < 3; i++ {
		l.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true})
		l.Roll()
	}
	l.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true})
	m.Start()
	if err := testutil.Within(5*time.Second, func() bool { return l.LogStartOffset() == 3 && l.RecoveryPoint() == 4 }); err != nil {
		t.Fatalf("loops did not run: start %d rp %d", l.LogStartOffset(), l.RecoveryPoint())
	}
	if err := testutil.Within(5*time.Second, func() bool {
		lsos, _ := checkpoint.ReadOffsets(fs, "/data/"+LogStartOffsetCheckpointFile)
		return lsos[checkpoint.TopicPartition{Topic: "t", Partition: 0}] == 3
	}); err != nil {
		t.Fatal("checkpoint loop did not run")
	}
}

func TestManagerReportsLogFailureAndSkipsCleanMarker(t *testing.T) {
	ffs := &failFS{FS: vfs.NewMem()}
	m := openManager(t, managerOptions(ffs))
	l, _ := m.GetOrCreate("t", 0, m.opts.Default)
	ffs.failWrites.Store(true)
	if _, err := l.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append: %v", err)
	}
	select {
	case err := <-m.Failed():
		if err == nil {
			t.Fatal("nil failure")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no failure reported")
	}
	if err := m.Close(); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("Close after failure: %v", err)
	}
	if _, err := ffs.Stat(filepath.Join("/data", CleanShutdownFile)); err == nil {
		t.Fatal("clean-shutdown marker written despite a failed log")
	}
}

func TestManagerUpdateConfigReachesLogs(t *testing.T) {
	fs := vfs.NewMem()
	m := openManager(t, managerOptions(fs))
	defer m.Close()
	l0, _ := m.GetOrCreate("t", 0, m.opts.Default)
	l1, _ := m.GetOrCreate("t", 1, m.opts.Default)
	other, _ := m.GetOrCreate("u", 0, m.opts.Default)
	cfg := m.opts.Default
	cfg.SegmentBytes = 200
	m.UpdateConfig("t", cfg)
	for _, l := range []*Log{l0, l1} {
		for i := 0; i < 3; i++ {
			l.Append(makeBatch(t, 1, 100, baseTs), AppendOptions{AssignOffsets: true})
		}
		if l.NumSegments() != 3 {
			t.Fatalf("%s-%d: %d segments after UpdateConfig", l.Topic(), l.Partition(), l.NumSegments())
		}
	}
	for i := 0; i < 3; i++ {
		other.Append(makeBatch(t, 1, 100, baseTs), AppendOptions{AssignOffsets: true})
	}
	if other.NumSegments() != 1 || other.Config().SegmentBytes != m.opts.Default.SegmentBytes {
		t.Fatal("UpdateConfig leaked to another topic")
	}
}

// TestManagerMarkStrayKeepsTheDataAside: a log marked stray is unloaded,
// its directory renamed <dir>.<uuid>-stray with every file in it, and a
// restart neither loads nor removes it.
func TestManagerMarkStrayKeepsTheDataAside(t *testing.T) {
	fs := vfs.NewMem()
	m := openManager(t, managerOptions(fs))
	l, _ := m.GetOrCreate("lost", 2, m.opts.Default)
	if _, err := l.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatal(err)
	}
	to, err := m.MarkStray("lost", 2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(to), "lost-2.") || !strings.HasSuffix(to, StrayDirSuffix) {
		t.Fatalf("stray dir %q", to)
	}
	if _, ok := m.Get("lost", 2); ok {
		t.Fatal("stray log still listed")
	}
	m.Close()
	m = openManager(t, managerOptions(fs))
	defer m.Close()
	if len(m.Logs()) != 0 {
		t.Fatalf("stray dir loaded as a log: %d logs", len(m.Logs()))
	}
	names, err := fs.List(to)
	if err != nil || !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, LogFileSuffix) }) {
		t.Fatalf("stray dir after restart: %v %v", names, err)
	}
	if p, err := m.MarkStray("nosuch", 0); p != "" || err != nil {
		t.Fatalf("MarkStray of a missing log: %q %v", p, err)
	}
}

// TestManagerVanishedReportsCheckpointedLogsGoneFromDisk: a log the
// recovery-point checkpoint lists whose directory was removed while the
// manager was closed is reported once with its recovery point; a log
// still on disk is not.
func TestManagerVanishedReportsCheckpointedLogsGoneFromDisk(t *testing.T) {
	fs := vfs.NewMem()
	m := openManager(t, managerOptions(fs))
	for _, p := range []int32{0, 1} {
		l, _ := m.GetOrCreate("v", p, m.opts.Default)
		for range 3 {
			if _, err := l.Append(makeBatch(t, 2, 10, baseTs), AppendOptions{AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.RemoveAll("/data/v-1"); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, managerOptions(fs))
	defer m.Close()
	if rp, ok := m.Vanished("v", 1); !ok || rp != 6 {
		t.Fatalf("Vanished(v-1) = %d, %v; want 6, true", rp, ok)
	}
	if _, ok := m.Vanished("v", 1); ok {
		t.Fatal("Vanished answered twice")
	}
	if _, ok := m.Vanished("v", 0); ok {
		t.Fatal("a log still on disk reported vanished")
	}
}

// The high watermark the broker sets is written to
// replication-offset-checkpoint by Checkpoint (and at close), read back at
// open, and capped at the log end offset when a crash lost the tail.
func TestManagerCheckpointsHighWatermarks(t *testing.T) {
	fs := vfs.NewMem()
	m := openManager(t, managerOptions(fs))
	defer m.Close()
	l, _ := m.GetOrCreate("t", 0, m.opts.Default)
	for i := 0; i < 3; i++ {
		l.Append(makeBatch(t, 2, 10, baseTs), AppendOptions{AssignOffsets: true})
	}
	l.SetHighWatermark(4)
	if err := m.CheckpointHighWatermarks(); err != nil {
		t.Fatal(err)
	}
	tp := checkpoint.TopicPartition{Topic: "t", Partition: 0}
	hws, err := checkpoint.ReadOffsets(fs, "/data/"+ReplicationOffsetCheckpointFile)
	if err != nil || hws[tp] != 4 {
		t.Fatalf("high watermarks %v %v", hws, err)
	}
	m2 := openManager(t, managerOptions(fs.CrashClone(100, nil)))
	l2, _ := m2.Get("t", 0)
	if got := l2.HighWatermark(); got != 4 {
		t.Fatalf("reopened high watermark %d, want 4", got)
	}
	l2.SetHighWatermark(6)
	if err := m2.Close(); err != nil { // close writes it too
		t.Fatal(err)
	}
	fs2 := m2.opts.FS
	if hws, err := checkpoint.ReadOffsets(fs2, "/data/"+ReplicationOffsetCheckpointFile); err != nil || hws[tp] != 6 {
		t.Fatalf("high watermarks after close %v %v", hws, err)
	}
	// A checkpoint above what survived a crash is capped at the log end.
	if err := checkpoint.WriteOffsets(fs2, "/data/"+ReplicationOffsetCheckpointFile, map[checkpoint.TopicPartition]int64{tp: 50}); err != nil {
		t.Fatal(err)
	}
	m3 := openManager(t, managerOptions(fs2))
	defer m3.Close()
	l3, _ := m3.Get("t", 0)
	if got := l3.HighWatermark(); got != l3.LogEndOffset() || got != 6 {
		t.Fatalf("high watermark %d over log end %d, want it capped", got, l3.LogEndOffset())
	}
}
