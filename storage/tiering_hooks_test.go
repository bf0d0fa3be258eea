package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
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
