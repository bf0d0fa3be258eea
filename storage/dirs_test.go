package storage

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, cond, "%s", what)
}

func TestManagerLockRefusesASecondManager(t *testing.T) {
	fs := vfs.NewMem()
	m := openManager(t, managerOptions(fs))
	o := managerOptions(fs)
	o.Dirs = []string{"/other"}
	if _, err := OpenManager(o); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("second OpenManager on a locked dir: %v, want ErrLocked", err)
	}
	// The refused manager released what it had taken (/other).
	o2 := managerOptions(fs)
	o2.Dir = "/other"
	m2 := openManager(t, o2)
	m2.Close()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, managerOptions(fs))
	m.Close()
}

// A full data directory refuses appends (not latching anything, not
// reporting a failure), keeps reads going, and resumes appends by itself
// once a free-space check finds MinFreeBytes again.
func TestManagerFullDirRefusesAppendsAndResumes(t *testing.T) {
	mem := vfs.NewMem()
	enospc := errfs.On(errfs.OpWrite, errfs.OpWriteAt).Glob("*.log").Err(syscall.ENOSPC)
	enospc.Disable()
	efs := errfs.Wrap(mem, enospc)
	o := managerOptions(efs)
	o.MinFreeBytes, o.FreeCheckInterval = 1<<20, 2*time.Millisecond
	m := openManager(t, o)
	defer m.Close()
	m.Start()
	l, err := m.GetOrCreate("t", 0, o.Default)
	if err != nil {
		t.Fatal(err)
	}
	appendOne := func() error {
		_, err := l.Append(makeBatch(t, 1, 100, baseTs), AppendOptions{AssignOffsets: true})
		return err
	}
	if err := appendOne(); err != nil {
		t.Fatal(err)
	}

	// The disk fills: the write fails with ENOSPC.
	efs.SetFreeSpace(0)
	enospc.Enable()
	if err := appendOne(); !errors.Is(err, ErrLogDirFull) {
		t.Fatalf("append on a full disk: %v, want ErrLogDirFull", err)
	}
	enospc.Disable()
	// Below MinFreeBytes, appends are refused before any write.
	if err := appendOne(); !errors.Is(err, ErrLogDirFull) {
		t.Fatalf("append below min free: %v, want ErrLogDirFull", err)
	}
	waitFor(t, "a free-space check", func() bool { return m.Dirs()[0].FreeBytes == 0 })
	if st := m.Dirs()[0]; !st.Full || st.Failed {
		t.Fatalf("dir state %+v, want full, not failed, 0 free", st)
	}
	if l.Failed() {
		t.Fatal("a full disk latched the log")
	}
	if got := len(readBatches(t, l, "full")); got != 1 {
		t.Fatalf("read %d batches on a full disk, want 1", got)
	}
	select {
	case err := <-m.Failed():
		t.Fatalf("a full disk was reported as a failure: %v", err)
	default:
	}

	// Space is back (below the threshold is not enough).
	efs.SetFreeSpace(1 << 19)
	waitFor(t, "a free-space check", func() bool { return m.Dirs()[0].FreeBytes == 1<<19 })
	if err := appendOne(); !errors.Is(err, ErrLogDirFull) {
		t.Fatalf("append with free space below min free: %v", err)
	}
	efs.SetFreeSpace(1 << 30)
	waitFor(t, "appends to resume", func() bool { return appendOne() == nil })
	if got := len(readBatches(t, l, "resumed")); got != 2 {
		t.Fatalf("read %d batches, want 2", got)
	}
}

// JBOD: new logs go to the directory with the fewest, a reopen finds
// every log in every directory, and a failed directory takes only its own
// logs offline.
func TestManagerSpreadsLogsOverDirsAndIsolatesAFailedDir(t *testing.T) {
	mem := vfs.NewMem()
	eio := errfs.On(errfs.OpWrite, errfs.OpWriteAt).Glob("/b/*/*.log").Err(syscall.EIO)
	eio.Disable()
	efs := errfs.Wrap(mem, eio)
	o := managerOptions(efs)
	o.Dir, o.Dirs = "/a", []string{"/b"}
	m := openManager(t, o)
	for p := range int32(4) {
		if _, err := m.GetOrCreate("t", p, o.Default); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Dirs(); st[0].Logs != 2 || st[1].Logs != 2 {
		t.Fatalf("logs per dir %d, %d; want 2, 2", st[0].Logs, st[1].Logs)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openManager(t, o)
	defer m.Close()
	if n := len(m.Logs()); n != 4 {
		t.Fatalf("reopen found %d logs, want 4", n)
	}
	eio.Enable()
	var inA, inB []*Log
	for _, l := range m.Logs() {
		if m.DirOf(l) == filepath.Clean("/a") {
			inA = append(inA, l)
		} else {
			inB = append(inB, l)
		}
	}
	if _, err := inB[0].Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append to the failing dir: %v", err)
	}
	waitFor(t, "the failed dir's other log to latch", inB[1].Failed)
	for _, l := range inA {
		if _, err := l.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatalf("append to the healthy dir: %v", err)
		}
	}
	if st := m.Dirs(); st[0].Failed || !st[1].Failed {
		t.Fatalf("dir states %+v, want only /b failed", st)
	}
	select {
	case err := <-m.Failed():
		t.Fatalf("Failed fired with a healthy dir left: %v", err)
	default:
	}
	// A new log goes to the healthy dir.
	l, err := m.GetOrCreate("u", 0, o.Default)
	if err != nil || m.DirOf(l) != "/a" {
		t.Fatalf("new log in %v (%v), want /a", l, err)
	}
}

// A tiered log whose disk filled while the object store was down: once
// uploads catch up (the uploaded offset moves), the free-space checks run
// local retention at once, without waiting for
// log.retention.check.interval, so the uploaded segments go and the disk
// drains.
func TestManagerFullDirDrainsUploadedSegments(t *testing.T) {
	efs := errfs.Wrap(vfs.NewMem(), errfs.On())
	o := managerOptions(efs)
	o.MinFreeBytes, o.FreeCheckInterval = 1<<20, 2*time.Millisecond
	o.RetentionCheckInterval = time.Hour
	o.Default.RemoteStorageEnable = true
	o.Default.LocalRetentionBytes = 0
	o.Default.RetentionMs = -1 // only local retention, limited by the uploads
	m := openManager(t, o)
	defer m.Close()
	m.Start()
	l, err := m.GetOrCreate("t", 0, o.Default)
	if err != nil {
		t.Fatal(err)
	}
	l.SetRemoteUploadedOffset(0) // an uploader runs and has uploaded nothing (the store is down)
	for range 3 {
		if _, err := l.Append(makeBatch(t, 1, 100, baseTs), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	efs.SetFreeSpace(0)
	waitFor(t, "the dir to be full", func() bool { return m.Dirs()[0].Full })
	if n := l.NumSegments(); n != 4 {
		t.Fatalf("%d segments before the uploads, want 4 (nothing uploaded, nothing deleted)", n)
	}
	l.SetRemoteUploadedOffset(l.LogEndOffset()) // the store is back, the backlog uploaded
	waitFor(t, "uploaded segments to go", func() bool { return l.NumSegments() == 1 })
}

// Freeing space must work on a full disk: retention and DeleteRecords
// (which rewrite the leader-epoch cache, a small file that needs a block)
// neither fail nor latch the log when every write and create hits ENOSPC.
func TestDeletesWorkOnAFullDisk(t *testing.T) {
	full := errfs.On(errfs.OpCreate, errfs.OpWrite, errfs.OpWriteAt).Err(syscall.ENOSPC)
	full.Disable()
	e := rolledEnvFS(t, errfs.Wrap(vfs.NewMem(), full), 4, func(c *Config) { c.RetentionBytes = -1 })
	full.Enable()
	if err := e.log.SetLogStartOffset(3); err != nil || e.log.Failed() {
		t.Fatalf("DeleteRecords on a full disk: %v (failed %v)", err, e.log.Failed())
	}
	e.log.SetConfig(func() Config { c := e.log.Config(); c.RetentionBytes = 1; return c }())
	if n, err := e.log.EnforceRetention(e.clock.Now()); err != nil || n == 0 || e.log.Failed() {
		t.Fatalf("retention on a full disk: deleted %d, %v (failed %v)", n, err, e.log.Failed())
	}
	if _, err := e.log.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrLogDirFull) {
		t.Fatalf("append on a full disk: %v, want ErrLogDirFull", err)
	}
	full.Disable()
	if _, err := e.log.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatalf("append with space back: %v", err)
	}
}
