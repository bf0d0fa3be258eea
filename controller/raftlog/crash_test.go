package raftlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// savePoint is where the WAL ended when a Save returned.
type savePoint struct {
	seg  string // the segment it was written to
	size int64  // that segment's size after it
	m    *model // the state it acknowledged
}

// saveWorkload runs n random saves (no snapshots) on a fresh MemFS and
// returns the file system and where each save ended; points[0] is the
// empty log.
func saveWorkload(t *testing.T, seed uint64, n int, segBytes int64) (*vfs.MemFS, []savePoint) {
	t.Helper()
	fs := vfs.NewMem()
	s := openMem(t, fs, Options{SegmentBytes: segBytes})
	d := &driver{rng: rand.New(rand.NewPCG(seed, 7)), noSnaps: true}
	m := newModel()
	points := []savePoint{{m: m.clone()}}
	for range n {
		o := d.next(m)
		if err := o.apply(s); err != nil {
			t.Fatal(err)
		}
		m.record(o)
		sg := s.segs[len(s.segs)-1]
		points = append(points, savePoint{seg: sg.name, size: sg.size, m: m.clone()})
	}
	s.Close()
	return fs, points
}

// cutAndOpen truncates seg in a copy of fs to size and opens the copy.
func cutAndOpen(t *testing.T, fs *vfs.MemFS, seg string, size int64) (*Storage, error) {
	t.Helper()
	c := fs.Clone()
	f, err := c.OpenReadWrite(joinDir(testDir, seg))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return Open(Options{FS: c, Dir: testDir, Logger: quiet})
}

// survivors is the last save point complete in a WAL whose last segment
// seg was cut to size.
func survivors(points []savePoint, seg string, size int64) *model {
	k := 0
	for i := 1; i < len(points); i++ {
		if points[i].seg < seg || points[i].seg == seg && points[i].size <= size {
			k = i
		}
	}
	return points[k].m
}

// TestWALRecoverCutAtEveryByteOfLastSave cuts the WAL at every byte offset
// of the last Save's frame and at random points of the last segment:
// reopening must give exactly the log of every Save that completed before
// the cut.
func TestWALRecoverCutAtEveryByteOfLastSave(t *testing.T) {
	for _, segBytes := range []int64{64 << 20, 1500} {
		t.Run(fmt.Sprintf("segment=%d", segBytes), func(t *testing.T) {
			fs, points := saveWorkload(t, uint64(segBytes), 30, segBytes)
			last := points[len(points)-1]
			prevEnd := int64(0)
			if p := points[len(points)-2]; p.seg == last.seg {
				prevEnd = p.size
			}
			rng := rand.New(rand.NewPCG(1, 2))
			cuts := []int64{}
			for c := prevEnd; c <= last.size; c++ {
				cuts = append(cuts, c)
			}
			for range 100 {
				cuts = append(cuts, rng.Int64N(last.size+1))
			}
			removed := 0
			headerLen := int64(len(appendFrame(nil, recHeader, headerPayload(1))))
			for _, c := range cuts {
				s, err := cutAndOpen(t, fs, last.seg, c)
				if err != nil {
					t.Fatalf("cut %s at %d: %v", last.seg, c, err)
				}
				want := survivors(points, last.seg, c)
				if err := want.check(s); err != nil {
					t.Fatalf("cut %s at %d of %d: %v", last.seg, c, last.size, err)
				}
				rep := s.Recovery()
				if c < last.size && rep.TruncatedBytes == 0 && len(rep.RemovedSegments) == 0 && c > 0 && c != headerLen {
					// Only a cut exactly at a frame boundary has nothing to report.
					if survivors(points, last.seg, c) == survivors(points, last.seg, c-1) {
						t.Fatalf("cut at %d inside a frame not reported: %+v", c, rep)
					}
				}
				removed += len(rep.RemovedSegments)
				// The repaired log takes new writes and recovers them.
				mustSave(t, s, nil, []*pb.Entry{ent(want.last()+1, 99, "after")}, nil)
				s.Close()
			}
			if segBytes < 1<<20 && removed == 0 {
				t.Errorf("no cut removed a segment with a torn header")
			}
		})
	}
}

// TestWALRecoverCorruptTail flips bytes of the last two Saves' frames. A
// flip in the last frame is a torn write: the log of every earlier Save
// comes back. A flip in an earlier frame, with a whole frame after it, is
// damage to acknowledged data: Open must refuse with ErrCorrupt.
func TestWALRecoverCorruptTail(t *testing.T) {
	fs, points := saveWorkload(t, 3, 40, 64<<20)
	n := len(points) - 1
	seg := points[n].seg
	lastStart, prevStart := points[n-1].size, points[n-2].size
	rng := rand.New(rand.NewPCG(3, 4))
	flip := func(pos int64) (*Storage, error) {
		c := fs.Clone()
		f, err := c.OpenReadWrite(joinDir(testDir, seg))
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		f.ReadAt(b, pos)
		b[0] ^= byte(1 + rng.IntN(255))
		f.WriteAt(b, pos)
		f.Close()
		return Open(Options{FS: c, Dir: testDir, Logger: quiet})
	}
	for pos := lastStart; pos < points[n].size; pos++ {
		s, err := flip(pos)
		if err != nil {
			t.Fatalf("flip at %d (last frame): %v", pos, err)
		}
		if err := points[n-1].m.check(s); err != nil {
			t.Fatalf("flip at %d (last frame): %v", pos, err)
		}
		if s.Recovery().TruncatedAt != lastStart {
			t.Fatalf("flip at %d: report %+v", pos, s.Recovery())
		}
	}
	for range 60 {
		pos := prevStart + rng.Int64N(lastStart-prevStart)
		if _, err := flip(pos); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d (acknowledged frame followed by a whole one): %v, want ErrCorrupt", pos, err)
		}
	}
}

// crashPoint is a crash image taken as a sync was issued.
type crashPoint struct {
	fs    *vfs.MemFS
	acked int // operations that had returned
	pct   int
}

// TestCrashCloneAtEverySync runs saves, snapshots, leader snapshots and
// compaction on a MemFS, takes a crash image at every fsync (keeping none,
// half or all of the unsynced bytes) and checks that each image reopens to
// the state after the last acknowledged operation or the one in flight.
func TestCrashCloneAtEverySync(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			fs := vfs.NewMem()
			rng := rand.New(rand.NewPCG(seed, 11))
			crng := rand.New(rand.NewPCG(seed, 12))
			var acked atomic.Int64
			var crashes []crashPoint
			fs.SetSyncHook(func(ev vfs.SyncEvent) {
				pct := []int{0, 50, 100}[ev.N%3]
				crashes = append(crashes, crashPoint{fs.CrashClone(pct, crng), int(acked.Load()), pct})
			})
			o := Options{SegmentBytes: 1200, KeepSnapshots: 2}
			s := openMem(t, fs, o)
			d := &driver{rng: rng}
			m := newModel()
			models := []*model{m.clone()}
			partials := map[int]*model{}
			for range 150 {
				op := d.next(m)
				inflight := partialModel(m, op)
				if err := op.apply(s); err != nil {
					t.Fatalf("%v: %v", op, err)
				}
				_ = inflight
				partials[len(models)] = partialModel(m, op)
				m.record(op)
				models = append(models, m.clone())
				acked.Add(1)
			}
			fs.SetSyncHook(nil)
			s.Close()
			if len(crashes) < 150 {
				t.Fatalf("only %d syncs", len(crashes))
			}
			for i, c := range crashes {
				s, err := Open(Options{FS: c.fs, Dir: testDir, Logger: quiet})
				if err != nil {
					t.Fatalf("crash %d (after %d ops, keep %d%%): %v", i, c.acked, c.pct, err)
				}
				if err := matchOne(s, models[c.acked], at(models, c.acked+1), partials[c.acked+1]); err != nil {
					t.Fatalf("crash %d (after %d ops, keep %d%%): %v", i, c.acked, c.pct, err)
				}
				s.Close()
			}
		})
	}
}

// TestWriteErrorSweep fails the Nth write, sync, create, rename or
// truncate for every N: the failing call reports an error, later writes
// are refused with ErrFailed, and after a crash the log holds every
// acknowledged operation (and at most the failed one besides).
func TestWriteErrorSweep(t *testing.T) {
	for n := 1; ; n++ {
		mem := vfs.NewMem()
		var count atomic.Int64
		var armed atomic.Bool
		inj := errfs.InjectorFunc(func(c errfs.Call) *errfs.Fault {
			switch c.Op {
			case errfs.OpWrite, errfs.OpWriteAt, errfs.OpSync, errfs.OpSyncDir, errfs.OpCreate, errfs.OpRename, errfs.OpTruncate:
			default:
				return nil
			}
			if armed.Load() && count.Add(1) == int64(n) {
				return &errfs.Fault{Err: syscall.EIO}
			}
			return nil
		})
		s := openMem(t, errfs.Wrap(mem, inj), Options{SegmentBytes: 1000})
		armed.Store(true)
		d := &driver{rng: rand.New(rand.NewPCG(uint64(n), 5))}
		m := newModel()
		models := []*model{m.clone()}
		var partial *model
		failed := false
		for range 60 {
			op := d.next(m)
			partial = partialModel(m, op)
			if err := op.apply(s); err != nil {
				if !errors.Is(err, ErrFailed) {
					t.Fatalf("n=%d: %v failed with %v, want ErrFailed", n, op, err)
				}
				if err := d.next(m).apply(s); !errors.Is(err, ErrFailed) {
					t.Fatalf("n=%d: write after a failure: %v, want ErrFailed", n, err)
				}
				m.record(op) // in case the failed op landed anyway
				models = append(models, m.clone())
				failed = true
				break
			}
			m.record(op)
			models = append(models, m.clone())
		}
		s.Close()
		if !failed {
			if n == 1 {
				t.Fatal("no fault fired")
			}
			if n < 50 {
				t.Fatalf("the workload made only %d faultable calls", n-1)
			}
			t.Logf("swept %d faultable calls", n-1)
			return // n is past the last write of the workload
		}
		acked := len(models) - 2
		for _, pct := range []int{0, 100} {
			s, err := Open(Options{FS: mem.CrashClone(pct, rand.New(rand.NewPCG(1, 1))), Dir: testDir, Logger: quiet})
			if err != nil {
				t.Fatalf("n=%d reopen: %v", n, err)
			}
			if err := matchOne(s, models[acked], models[acked+1], partial); err != nil {
				t.Fatalf("n=%d keep %d%%: %v", n, pct, err)
			}
			for _, name := range listNames(t, s.fs) {
				if strings.HasSuffix(name, tmpSuffix) {
					t.Fatalf("n=%d keep %d%%: %s left after reopening", n, pct, name)
				}
			}
			s.Close()
		}
	}
}

// partialModel is the state after only the snapshot part of op, when op
// is a Save installing a leader's snapshot: a crash between the snapshot
// file and the WAL batch leaves exactly that. nil for other operations.
func partialModel(m *model, o op) *model {
	if o.kind != "save" || o.snap == nil {
		return nil
	}
	p := m.clone()
	p.save(nil, nil, o.snap)
	return p
}

func at(ms []*model, i int) *model {
	if i < len(ms) {
		return ms[i]
	}
	return nil
}

// matchOne returns nil if s matches one of the candidate states.
func matchOne(s *Storage, candidates ...*model) error {
	var errs []error
	for _, m := range candidates {
		if m == nil {
			continue
		}
		err := m.check(s)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
