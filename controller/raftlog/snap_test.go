package raftlog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// fill saves entries (from, to] at term, one per Save, with commit = to.
func fill(t *testing.T, s *Storage, from, to, term uint64) {
	t.Helper()
	for i := from + 1; i <= to; i++ {
		mustSave(t, s, hardState(term, 1, i), []*pb.Entry{ent(i, term, fmt.Sprintf("e%d", i))}, nil)
	}
}

func listDir(t *testing.T, fs vfs.FS, suffix string) []string {
	t.Helper()
	names, err := fs.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			out = append(out, n)
		}
	}
	return out
}

func corruptFile(t *testing.T, fs vfs.FS, name string, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(joinDir(testDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func checkRange(t *testing.T, s *Storage, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("log [%d, %d], want [%d, %d]", f, l, first, last)
	}
	if last < first {
		return
	}
	ents, err := s.Entries(first, last+1, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	for k, e := range ents {
		if want := fmt.Sprintf("e%d", first+uint64(k)); string(e.GetData()) != want {
			t.Fatalf("entry %d = %q, want %q", first+uint64(k), e.GetData(), want)
		}
	}
}

func TestCompactDeletesWholeSegmentsBelowOldestKeptSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	o := Options{SegmentBytes: 200, KeepSnapshots: 2}
	s := openMem(t, fs, o)
	fill(t, s, 0, 100, 1)
	segs := len(listDir(t, fs, walSuffix))
	if _, err := s.CreateSnapshot(40, nil, []byte("s40")); err != nil {
		t.Fatal(err)
	}
	// One snapshot kept of two wanted: nothing is covered twice yet.
	if err := s.Compact(40); err != nil {
		t.Fatal(err)
	}
	if n := len(listDir(t, fs, walSuffix)); n != segs {
		t.Fatalf("%d segments after compacting with one snapshot, want all %d", n, segs)
	}
	if _, err := s.CreateSnapshot(80, nil, []byte("s80")); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(80); err != nil {
		t.Fatal(err)
	}
	after := listDir(t, fs, walSuffix)
	if len(after) >= segs {
		t.Fatalf("%d segments after compaction, had %d", len(after), segs)
	}
	// Every entry after the oldest kept snapshot (40) is still on disk.
	if first, _ := parseWALName(after[0]); first > 41 {
		t.Fatalf("oldest segment %s starts after 41", after[0])
	}
	if st := s.Stats(); st.Segments != len(after) || st.SnapshotIndex != 80 || st.FirstIndex != 81 {
		t.Fatalf("stats %+v", st)
	}
	// A third snapshot prunes the first file.
	if _, err := s.CreateSnapshot(90, nil, []byte("s90")); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, fs, snapSuffix); !slices.Equal(got, []string{snapName(1, 80), snapName(1, 90)}) {
		t.Fatalf("snapshots %v", got)
	}
	s.Close()
	s = openMem(t, fs, o)
	checkRange(t, s, 91, 100)
	s.Close()
}

func TestOpenFallsBackFromCorruptNewestSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	o := Options{SegmentBytes: 200, KeepSnapshots: 2}
	s := openMem(t, fs, o)
	fill(t, s, 0, 60, 1)
	for _, i := range []uint64{20, 40} {
		if _, err := s.CreateSnapshot(i, nil, []byte(fmt.Sprintf("s%d", i))); err != nil {
			t.Fatal(err)
		}
		if err := s.Compact(i); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	corruptFile(t, fs, snapName(1, 40), 12)
	s = openMem(t, fs, o)
	defer s.Close()
	rep := s.Recovery()
	if !slices.Equal(rep.CorruptSnapshots, []string{snapName(1, 40)}) || rep.SnapshotIndex != 20 {
		t.Fatalf("report %+v", rep)
	}
	snap, _ := s.Snapshot()
	if string(snap.GetData()) != "s20" {
		t.Fatalf("snapshot data %q", snap.GetData())
	}
	checkRange(t, s, 21, 60)
	if got := listDir(t, fs, corruptSuffix); len(got) != 1 {
		t.Fatalf("corrupt files %v", got)
	}
}

func TestOpenCorruptOnlySnapshotWithCompactedWALIsErrCorrupt(t *testing.T) {
	fs := vfs.NewMem()
	o := Options{SegmentBytes: 200, KeepSnapshots: 1}
	s := openMem(t, fs, o)
	fill(t, s, 0, 60, 1)
	if _, err := s.CreateSnapshot(50, nil, []byte("s50")); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(50); err != nil {
		t.Fatal(err)
	}
	s.Close()
	corruptFile(t, fs, snapName(1, 50), 20)
	if _, err := Open(Options{FS: fs, Dir: testDir, Logger: quiet}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
}

func TestOpenCorruptOnlySnapshotWithFullWALRecovers(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Options{KeepSnapshots: 1})
	fill(t, s, 0, 30, 1)
	if _, err := s.CreateSnapshot(25, nil, []byte("s25")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	corruptFile(t, fs, snapName(1, 25), 5)
	s = openMem(t, fs, Options{KeepSnapshots: 1})
	defer s.Close()
	checkRange(t, s, 1, 30)
}

func TestOpenMidLogDamageInSealedSegmentIsErrCorrupt(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Options{SegmentBytes: 200})
	fill(t, s, 0, 40, 1)
	s.Close()
	segs := listDir(t, fs, walSuffix)
	corruptFile(t, fs, segs[1], 30)
	if _, err := Open(Options{FS: fs, Dir: testDir, Logger: quiet}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
}

func TestOpenRemovesTempSnapshotLeftovers(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Options{})
	fill(t, s, 0, 5, 1)
	s.Close()
	f, err := fs.Create(joinDir(testDir, snapName(1, 5)+tmpSuffix))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half a snapshot"))
	f.Close()
	s = openMem(t, fs, Options{})
	defer s.Close()
	if rep := s.Recovery(); len(rep.RemovedTemp) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if got := listDir(t, fs, tmpSuffix); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
	checkRange(t, s, 1, 5)
}

// TestLeaderSnapshotWithLostWALBatch crashes a follower between writing a
// leader's snapshot file and the WAL batch that installs it: the follower
// held a stale branch (term 1) past the snapshot (term 2). Reopening must
// start the log at the snapshot, drop the stale branch, and raise the hard
// state to the snapshot's term and index.
func TestLeaderSnapshotWithLostWALBatch(t *testing.T) {
	mem := vfs.NewMem()
	var failWAL bool
	inj := errfs.InjectorFunc(func(c errfs.Call) *errfs.Fault {
		if failWAL && c.Op == errfs.OpWriteAt && strings.HasSuffix(c.Path, walSuffix) {
			return &errfs.Fault{Err: syscall.EIO}
		}
		return nil
	})
	s := openMem(t, errfs.Wrap(mem, inj), Options{})
	fill(t, s, 0, 10, 1)
	mustSave(t, s, hardState(1, 1, 5), nil, nil)
	failWAL = true
	err := s.Save(hardState(2, 0, 8), []*pb.Entry{ent(9, 2, "e9")}, leaderSnap(8, 2, "leader"))
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Save = %v, want ErrFailed", err)
	}
	s.Close()
	s = openMem(t, mem.CrashClone(0, nil), Options{})
	defer s.Close()
	checkRange(t, s, 9, 8)
	if rep := s.Recovery(); rep.DroppedEntries != 2 || rep.SnapshotIndex != 8 {
		t.Fatalf("report %+v, want 2 stale entries (9, 10) dropped", rep)
	}
	hs, cs, _ := s.InitialState()
	if !proto.Equal(hs, hardState(2, 0, 8)) {
		t.Fatalf("hard state %v", hs)
	}
	if !slices.Equal(cs.GetVoters(), []uint64{1, 2, 3}) {
		t.Fatalf("conf state %v", cs)
	}
}

func TestSnapshotFileRoundTripAndDamage(t *testing.T) {
	snap := leaderSnap(7, 3, "payload")
	b, err := encodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSnapshot(b)
	if err != nil || !proto.Equal(got, snap) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	for i := range b {
		c := slices.Clone(b)
		c[i] ^= 1
		if _, err := decodeSnapshot(c); err == nil {
			t.Fatalf("flip at %d not detected", i)
		}
	}
	for n := range len(b) {
		if _, err := decodeSnapshot(b[:n]); err == nil {
			t.Fatalf("cut at %d not detected", n)
		}
	}
}

func TestWritesAfterCloseReturnErrClosed(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Options{})
	fill(t, s, 0, 3, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(nil, []*pb.Entry{ent(4, 1, "")}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Save after Close = %v", err)
	}
	if _, err := s.CreateSnapshot(3, nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("CreateSnapshot after Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	checkRange(t, s, 1, 3) // reads still served from memory
}

func TestStatsCountSavesSyncsAndSnapshots(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Options{SegmentBytes: 150})
	defer s.Close()
	fill(t, s, 0, 10, 1)
	if _, err := s.CreateSnapshot(6, nil, []byte("six")); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	// Every Save fsyncs its segment; each roll also fsyncs the directory.
	if st.Saves != 10 || st.Syncs != 10+uint64(st.Segments) {
		t.Fatalf("saves %d syncs %d segments %d", st.Saves, st.Syncs, st.Segments)
	}
	if st.FirstIndex != 1 || st.LastIndex != 10 || st.Entries != 10 || st.EntryBytes == 0 {
		t.Fatalf("log stats %+v", st)
	}
	if st.SnapshotIndex != 6 || st.SnapshotTerm != 1 || st.SnapshotBytes == 0 || st.SnapshotTime.IsZero() {
		t.Fatalf("snapshot stats %+v", st)
	}
	var wal int64
	for _, n := range listDir(t, s.fs, walSuffix) {
		fi, err := s.fs.Stat(joinDir(testDir, n))
		if err != nil {
			t.Fatal(err)
		}
		wal += fi.Size()
	}
	if st.WALBytes != wal || st.LastSaveDuration <= 0 {
		t.Fatalf("WAL bytes %d, files hold %d; last save %v", st.WALBytes, wal, st.LastSaveDuration)
	}
}
