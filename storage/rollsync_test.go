package storage

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// syncGate blocks the fsyncs of .log files while it is shut: a disk whose
// write-back is slow, for the roll that must not wait for it. Its inject
// is an errfs injector (the package's fault layer) that faults nothing.
type syncGate struct {
	mu      sync.Mutex
	shut    bool
	open    chan struct{} // closed when the gate opens
	blocked chan string   // a .log Sync waiting at the gate
}

func newSyncGate() *syncGate {
	return &syncGate{open: make(chan struct{}), blocked: make(chan string, 64)}
}

func (g *syncGate) shutGate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut, g.open = true, make(chan struct{})
}

func (g *syncGate) openGate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		g.shut = false
		close(g.open)
	}
}

func (g *syncGate) inject(c errfs.Call) *errfs.Fault {
	if c.Op != errfs.OpSync || !strings.HasSuffix(c.Path, LogFileSuffix) {
		return nil
	}
	g.mu.Lock()
	shut, open := g.shut, g.open
	g.mu.Unlock()
	if shut {
		g.blocked <- c.Path
		<-open
	}
	return nil
}

// openSyncerLog opens a crash-config log over fs whose rolls' fsyncs run
// on the syncer goroutine, as in production (the package's tests defer
// them otherwise: main_test.go).
func openSyncerLog(t *testing.T, fs vfs.FS) *Log {
	t.Helper()
	l, err := OpenLog(crashOptions(fs, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	l.deferSync = false
	return l
}

// A roll returns, and appends go on into the new segment, while the old
// segment's fsync is stuck; the recovery point and the snapshot at the
// roll wait for it, and so does a flush. Once the disk answers, the
// recovery point moves to the old segment's end.
func TestRollDoesNotWaitForItsFsyncs(t *testing.T) {
	g := newSyncGate()
	l := openSyncerLog(t, errfs.Wrap(newCrashFS(t), errfs.InjectorFunc(g.inject)))
	defer l.Close()
	defer g.openGate() // before the Close, which waits for the syncer, even when the test fails
	w := newCrashWorkload(7)
	appendOne := func() {
		t.Helper()
		b := w.nextBatch()
		w.attempted = append(w.attempted, b)
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: crashEpoch, AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		appendOne()
	}
	end := l.LogEndOffset()
	g.shutGate()
	done := make(chan error, 1)
	go func() { done <- l.Roll() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testWait):
		t.Fatal("Roll waited for the old segment's fsync")
	}
	select {
	case name := <-g.blocked:
		if !strings.Contains(name, SegmentFileName(0, LogFileSuffix)) {
			t.Fatalf("the syncer's first fsync is of %s, want the rolled segment's", name)
		}
	case <-time.After(testWait):
		t.Fatal("the syncer never fsynced the rolled segment")
	}
	for range 5 {
		appendOne() // into the new segment, the old one's fsync still stuck
	}
	if n := l.NumSegments(); n != 2 {
		t.Fatalf("%d segments after one roll, want 2", n)
	}
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before the rolled segment is durable, want 0", rp)
	}
	if offs := l.snapshotOffsets(); len(offs) != 0 {
		t.Fatalf("snapshots %v before the rolled segment is durable, want none", offs)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	select {
	case err := <-flushed:
		t.Fatalf("Flush returned (%v) before the rolled segment was durable", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.openGate()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo {
		t.Fatalf("recovery point %d after Flush, want the log end %d", rp, leo)
	}
	if offs := l.snapshotOffsets(); len(offs) != 1 || offs[0] != end {
		t.Fatalf("snapshots %v, want the roll's at %d", offs, end)
	}
	// Without a flush, the syncer alone moves the recovery point.
	appendOne()
	end = l.LogEndOffset()
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Within(testWait, func() bool { return l.RecoveryPoint() == end }); err != nil {
		t.Fatalf("recovery point %d, want %d once the syncer ran", l.RecoveryPoint(), end)
	}
}

// A power loss at any moment while the syncer works behind the appends
// (several rolls' fsyncs pending at once, each slowed) leaves a prefix of
// the appended batches that holds everything below the recovery point of
// that moment: the deferred-sync sweeps (TestCrashSweepRecoversAPrefixAtEverySync)
// with the syncer's own timing.
func TestRollSyncInBackgroundCrashKeepsAPrefix(t *testing.T) {
	steps, points := 300, 40
	if testing.Short() {
		steps, points = 150, 15
	}
	mem := newCrashFS(t)
	// Every fsync takes a moment, so rolls outrun the syncer.
	mem.SetSyncHook(func(vfs.SyncEvent) { time.Sleep(200 * time.Microsecond) })
	defer mem.SetSyncHook(nil)
	l := openSyncerLog(t, mem)
	w := newCrashWorkload(11)
	type point struct {
		fs        *vfs.MemFS
		rp        int64
		attempted int
	}
	var ps []point
	every := max(steps/points, 1)
	for i := range steps {
		// Rolls three times as often as the shared workload does.
		var err error
		if w.rng.IntN(10) == 0 {
			err = l.Roll()
		} else {
			err = w.step(l)
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if i%every == 0 {
			// The recovery point first: it only moves after what it
			// covers is durable, so the clone holds at least that.
			rp := l.RecoveryPoint()
			ps = append(ps, point{fs: mem.Clone(), rp: rp, attempted: len(w.attempted)})
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mem.SetSyncHook(nil)
	rng := rand.New(rand.NewPCG(11, 3))
	var lost int
	for i, p := range ps {
		cand := w.attempted[:p.attempted]
		for _, pct := range []int{0, 1 + rng.IntN(99)} {
			crash, model := p.fs.CrashClone, "prefix"
			if i%2 == 1 {
				crash, model = p.fs.CrashCloneReordered, "pages"
			}
			label := fmt.Sprintf("point %d keep=%d%% %s rp=%d", i, pct, model, p.rp)
			r := checkRecovered(t, crash(pct, rng), p.rp, cand, flushedBatches(cand, p.rp), label)
			if r.batches < len(cand) {
				lost++
			}
		}
	}
	if lost == 0 {
		t.Fatal("no crash lost anything: the test does not reach unsynced data")
	}
	t.Logf("%d crash points, %d batches appended, %d crashes lost unflushed batches", len(ps), len(w.attempted), lost)
}

// Appends, rolls, reads, flushes and a truncation race the syncer under
// -race; the log reopens cleanly with exactly what was appended.
func TestRollSyncRacesAppendsReadsAndTruncate(t *testing.T) {
	mem := newCrashFS(t)
	l := openSyncerLog(t, mem)
	w := newCrashWorkload(13)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if v, err := l.Read(l.LogStartOffset(), 4096, l.LogEndOffset()); err == nil {
					v.Release()
				}
			}
		}()
	}
	for i := range 400 {
		if i == 200 {
			// Back to a batch boundary some way down: what a follower does.
			cut := len(w.attempted) * 2 / 3
			off := batchBase(t, w.attempted[cut])
			if err := l.Truncate(off); err != nil {
				t.Fatal(err)
			}
			w.attempted, w.acked, w.next = w.attempted[:cut], cut, off
			continue
		}
		if err := w.step(l); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	close(stop)
	readers.Wait()
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := OpenLog(crashOptions(mem, leo, true))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if rep := l2.Recovery(); rep.Recovered || rep.RebuiltIndexes != 0 {
		t.Fatalf("clean reopen repaired something: %+v", rep)
	}
	got := readBatches(t, l2, "reopen")
	if len(got) != len(w.attempted) {
		t.Fatalf("reopened log holds %d batches, %d were appended", len(got), len(w.attempted))
	}
	for i := range got {
		if string(got[i]) != string(w.attempted[i]) {
			t.Fatalf("batch %d differs from the one appended", i)
		}
	}
}

// testWait bounds a wait for the syncer goroutine.
const testWait = 10 * time.Second

// batchBase is a stored batch's base offset.
func batchBase(t *testing.T, b []byte) int64 {
	t.Helper()
	h, err := batch.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h.BaseOffset
}
