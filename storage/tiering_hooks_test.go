package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/checkpoint"
)

func readSegmentFile(t *testing.T, f SegmentFile) []byte {
	t.Helper()
	if f.R == nil {
		return nil
	}
	b, err := io.ReadAll(io.NewSectionReader(f.R, 0, f.Size))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// OpenSealedSegment gives a sealed segment's files as they are on disk and
// the producer snapshot at its end; they stay readable after retention
// deletes the segment, until Release, and only then are unlinked. The
// active segment and unknown bases are ErrNoSuchSegment.
func TestOpenSealedSegmentOutlivesRetention(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.FileDeleteDelayMs = 0 })
	e.log.Close()
	e.snap = func(off int64) ([]byte, error) { return fmt.Appendf(nil, "state@%d", off), nil }
	e.open(true, 0, 0)
	for range 3 {
		e.appendBatches(2, 2, 10)
		if err := e.log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	// A roll's snapshot and fsyncs come after it (rollsync.go).
	if err := e.log.Flush(); err != nil {
		t.Fatal(err)
	}
	infos := e.log.Segments()
	first, second := infos[1], infos[2] // snapshots are kept at the last two rolls' offsets
	want := map[string][]byte{}
	for _, p := range []string{first.LogPath, first.IndexPath, first.TimeIndexPath, second.SnapshotPath} {
		f, err := e.fs.Open(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want[p] = b
	}

	s, err := e.log.OpenSealedSegment(first.BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	if s.Info.BaseOffset != first.BaseOffset || s.Info.NextOffset != first.NextOffset || !s.Info.Sealed {
		t.Fatalf("info %+v, want %+v", s.Info, first)
	}
	if err := e.log.SetLogStartOffset(second.BaseOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.OpenSealedSegment(first.BaseOffset); !errors.Is(err, ErrNoSuchSegment) {
		t.Fatalf("open of a deleted segment: %v, want ErrNoSuchSegment", err)
	}
	for p, f := range map[string]SegmentFile{first.LogPath: s.Log, first.IndexPath: s.Index, first.TimeIndexPath: s.TimeIndex, second.SnapshotPath: s.Snapshot} {
		if got := readSegmentFile(t, f); !bytes.Equal(got, want[p]) {
			t.Fatalf("%s after retention: %d bytes, want the %d on disk before", p, len(got), len(want[p]))
		}
	}
	if _, err := e.fs.Stat(first.LogPath + DeletedFileSuffix); err != nil {
		t.Fatalf("the open segment's .log.deleted: %v, want it kept until Release", err)
	}
	s.Release()
	s.Release() // idempotent
	if err := testutil.Within(5*time.Second, func() bool {
		_, err := e.fs.Stat(first.LogPath + DeletedFileSuffix)
		return err != nil
	}); err != nil {
		t.Fatal(".log.deleted still there after Release")
	}

	active := e.log.Segments()[len(e.log.Segments())-1]
	for _, base := range []int64{active.BaseOffset, 12345} {
		if _, err := e.log.OpenSealedSegment(base); !errors.Is(err, ErrNoSuchSegment) {
			t.Fatalf("open of base %d: %v, want ErrNoSuchSegment", base, err)
		}
	}
	// The last sealed segment's snapshot is the active segment's base's.
	last := e.log.Segments()[len(e.log.Segments())-2]
	s, err = e.log.OpenSealedSegment(last.BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if got := string(readSegmentFile(t, s.Snapshot)); got != fmt.Sprintf("state@%d", last.NextOffset) {
		t.Fatalf("snapshot %q", got)
	}
}

// RestartFromTier (a follower rebuilt from the remote tier) leaves an
// empty log at next with log start logStart below it, the leader-epoch
// history below next and the producer snapshot at next, all of it still
// there after a reopen; appends continue at next with their own epoch.
func TestRestartFromTierInstallsEpochsAndSnapshot(t *testing.T) {
	e := rolledEnv(t, 3)
	e.cfg.RemoteStorageEnable = true
	e.log.SetConfig(e.cfg)
	epochs := []checkpoint.EpochEntry{{Epoch: 2, StartOffset: 40}, {Epoch: 4, StartOffset: 90}, {Epoch: 7, StartOffset: 130}}
	snap := []byte("producer state at 120")
	if err := e.log.RestartFromTier(40, 120, epochs, snap); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		l := e.log
		if l.LogStartOffset() != 40 || l.LocalLogStartOffset() != 120 || l.LogEndOffset() != 120 || l.Size() != 0 {
			t.Fatalf("%s: start %d local %d end %d size %d, want 40 120 120 0", when, l.LogStartOffset(), l.LocalLogStartOffset(), l.LogEndOffset(), l.Size())
		}
		got := l.LeaderEpochs().Entries()
		if want := epochs[:2]; !slices.Equal(got[:min(2, len(got))], want) || len(got) < 2 {
			t.Fatalf("%s: epochs %v, want %v first (the entry at 130 is above the restart)", when, got, want)
		}
		off, data, ok, err := l.LatestProducerSnapshot()
		if err != nil || !ok || off != 120 || !bytes.Equal(data, snap) {
			t.Fatalf("%s: snapshot at %d %q ok %v err %v", when, off, data, ok, err)
		}
	}
	check("after the restart")
	info, err := e.log.Append(makeBatch(t, 2, 10, baseTs), AppendOptions{LeaderEpoch: 8, AssignOffsets: true})
	if err != nil || info.FirstOffset != 120 {
		t.Fatalf("append after the restart: %+v %v", info, err)
	}
	if got := e.log.LeaderEpochs().Entries(); len(got) != 3 || got[2] != (checkpoint.EpochEntry{Epoch: 8, StartOffset: 120}) {
		t.Fatalf("epochs after an append %v", got)
	}
	e.reopen()
	if got := e.log.LeaderEpochs().Entries(); len(got) != 3 || got[0] != epochs[0] || got[1] != epochs[1] {
		t.Fatalf("epochs after reopen %v", got)
	}
	if e.log.LogStartOffset() != 40 || e.log.LocalLogStartOffset() != 120 || e.log.LogEndOffset() != 122 {
		t.Fatalf("after reopen start %d local %d end %d", e.log.LogStartOffset(), e.log.LocalLogStartOffset(), e.log.LogEndOffset())
	}

	// Bad arguments change nothing.
	if err := e.log.RestartFromTier(130, 120, nil, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("log start above next: %v", err)
	}
	if err := e.log.RestartFromTier(0, 200, []checkpoint.EpochEntry{{Epoch: 5, StartOffset: 10}, {Epoch: 3, StartOffset: 20}}, nil); !errors.Is(err, checkpoint.ErrInvalidEpoch) {
		t.Fatalf("decreasing epochs: %v", err)
	}
	if e.log.LogEndOffset() != 122 {
		t.Fatalf("a refused restart changed the log: end %d", e.log.LogEndOffset())
	}
}

// SnapshotProducers writes the hook's producer snapshot at the log end
// now; without a hook it writes nothing.
func TestSnapshotProducersWritesAtTheLogEnd(t *testing.T) {
	e := newEnv(t)
	e.appendBatches(3, 1, 10)
	if err := e.log.SnapshotProducers(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := e.log.LatestProducerSnapshot(); ok {
		t.Fatal("a log without a snapshot hook wrote a snapshot")
	}
	e.log.Close()
	e.snap = func(off int64) ([]byte, error) { return fmt.Appendf(nil, "state at %d", off), nil }
	e.open(true, 0, 0)
	e.appendBatches(2, 1, 10)
	if err := e.log.SnapshotProducers(); err != nil {
		t.Fatal(err)
	}
	off, data, ok, err := e.log.LatestProducerSnapshot()
	if err != nil || !ok || off != 5 || string(data) != "state at 5" {
		t.Fatalf("snapshot at %d %q ok %v err %v, want at 5", off, data, ok, err)
	}
}
