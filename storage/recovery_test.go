package storage

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// appendBytes writes raw bytes at the end of a file behind the log's back
// (a torn write, garbage).
func appendBytes(tb testing.TB, fs vfs.FS, path string, b []byte) {
	tb.Helper()
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		tb.Fatal(err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt(b, st.Size()); err != nil {
		tb.Fatal(err)
	}
	f.Close()
}

func TestRecoveryCleanReopenSkipsScan(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 2000 })
	e.appendBatches(30, 2, 100)
	want, _ := readAll(t, e.log)
	leo := e.log.LogEndOffset()
	l := e.reopen()
	if r := l.Recovery(); r.Recovered || r.SegmentsScanned != 0 || r.RebuiltIndexes != 0 {
		t.Fatalf("clean reopen rescanned: %+v", r)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("LEO %d, want %d", l.LogEndOffset(), leo)
	}
	got, _ := readAll(t, l)
	if !bytes.Equal(got, want) {
		t.Fatal("data differs after clean reopen")
	}
	checkIndexAgainstScan(t, l)
	// Appends continue densely after the reopen.
	e.appendBatches(1, 1, 10)
	if l.LogEndOffset() != leo+1 {
		t.Fatalf("LEO %d after append", l.LogEndOffset())
	}
}

func TestRecoveryUncleanReopenRescansFromRecoveryPoint(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 2000 })
	e.appendBatches(30, 2, 100)
	segs := e.log.Segments()
	rp := segs[len(segs)-2].BaseOffset
	e.log.Close()
	l := e.open(false, rp, 0)
	r := l.Recovery()
	if !r.Recovered || r.SegmentsScanned != 2 || r.TruncatedBytes != 0 || r.DroppedFromOffset != -1 {
		t.Fatalf("report %+v, want 2 segments scanned, nothing dropped", r)
	}
	if l.RecoveryPoint() != l.LogEndOffset() || l.LogEndOffset() != 60 {
		t.Fatalf("rp %d leo %d", l.RecoveryPoint(), l.LogEndOffset())
	}
	checkIndexAgainstScan(t, l)
}

func TestRecoveryTruncatesTornTailAndReportsIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail func(tb testing.TB) []byte
	}{
		{"partial-batch", func(tb testing.TB) []byte { b := makeBatch(tb, 3, 50, baseTs); return b[:len(b)-7] }},
		{"partial-header", func(tb testing.TB) []byte { return makeBatch(tb, 3, 50, baseTs)[:30] }},
		{"bad-crc", func(tb testing.TB) []byte {
			b := withBase(makeBatch(tb, 3, 50, baseTs), 20)
			b[len(b)-1] ^= 1
			return b
		}},
		{"zeros", func(tb testing.TB) []byte { return make([]byte, 4096) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.appendBatches(10, 2, 50)
			want, _ := readAll(t, e.log)
			act := e.log.Segments()[e.log.NumSegments()-1]
			rp := e.log.RecoveryPoint()
			e.log.Close()
			tail := tc.tail(t)
			appendBytes(t, e.fs, act.LogPath, tail)
			l := e.open(false, rp, 0)
			r := l.Recovery()
			if r.TruncatedBytes != int64(len(tail)) || r.DroppedFromOffset != 20 {
				t.Fatalf("report %+v, want %d bytes dropped from 20", r, len(tail))
			}
			got, _ := readAll(t, l)
			if !bytes.Equal(got, want) || l.LogEndOffset() != 20 {
				t.Fatalf("recovered log differs (leo %d)", l.LogEndOffset())
			}
			e.appendBatches(1, 1, 10)
			checkIndexAgainstScan(t, l)
		})
	}
}

func TestRecoveryDropsSegmentsAfterACorruptOne(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 1000 })
	e.appendBatches(12, 1, 200)
	segs := e.log.Segments()
	if len(segs) < 4 {
		t.Fatalf("want >= 4 segments, have %d", len(segs))
	}
	e.log.Close()
	// Damage the last batch of the second segment.
	victim := segs[1]
	f, _ := e.fs.OpenReadWrite(victim.LogPath)
	b := []byte{0}
	f.ReadAt(b, victim.Size-5)
	b[0] ^= 0xff
	f.WriteAt(b, victim.Size-5)
	f.Close()
	l := e.open(false, segs[1].BaseOffset, 0)
	r := l.Recovery()
	if r.DroppedSegments != len(segs)-2 || r.DroppedFromOffset != segs[1].NextOffset-1 {
		t.Fatalf("report %+v (segments %d)", r, len(segs))
	}
	if l.LogEndOffset() != segs[1].NextOffset-1 || l.NumSegments() != 2 {
		t.Fatalf("leo %d segments %d", l.LogEndOffset(), l.NumSegments())
	}
	checkIndexAgainstScan(t, l)
}

func TestRecoveryRefusesDamageBelowRecoveryPoint(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 1000 })
	e.appendBatches(12, 1, 200)
	segs := e.log.Segments()
	rp := e.log.LogEndOffset()
	e.log.Close()
	f, _ := e.fs.OpenReadWrite(segs[len(segs)-1].LogPath)
	f.WriteAt([]byte{0xff, 0xff}, 40)
	f.Close()
	_, err := OpenLog(e.options(false, rp, 0))
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("damage in flushed data: %v, want ErrCorruption", err)
	}
	e.log = nil
}

func TestRecoveryRebuildsMissingAndCorruptIndexes(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 3000; c.IndexIntervalBytes = 100 })
	e.appendBatches(40, 2, 100)
	segs := e.log.Segments()
	e.log.Close()
	// Segment 0: index gone. Segment 1: time index gone. Segment 2: offset
	// index entries out of order. Segment 3: a torn (non-multiple) index.
	e.fs.Remove(segs[0].IndexPath)
	e.fs.Remove(segs[1].TimeIndexPath)
	f, _ := e.fs.OpenReadWrite(segs[2].IndexPath)
	f.WriteAt([]byte{0xff, 0xff, 0xff, 0x00}, 8)
	f.Close()
	appendBytes(t, e.fs, segs[3].IndexPath, []byte{1, 2, 3})
	l := e.open(true, 0, 0)
	if r := l.Recovery(); r.RebuiltIndexes != 4 || r.TruncatedBytes != 0 {
		t.Fatalf("report %+v, want 4 rebuilt", r)
	}
	checkIndexAgainstScan(t, l)
	if _, err := e.fs.Stat(segs[0].IndexPath); err != nil {
		t.Fatalf("index not rewritten: %v", err)
	}
	e.reopen()
	if r := e.log.Recovery(); r.RebuiltIndexes != 0 {
		t.Fatalf("rebuilt indexes not durable: %+v", r)
	}
}

func TestRecoveryRemovesLeftovers(t *testing.T) {
	e := newEnv(t)
	e.appendBatches(3, 1, 10)
	e.log.Close()
	for _, n := range []string{
		SegmentFileName(0, LogFileSuffix+DeletedFileSuffix),
		SegmentFileName(5, SnapshotFileSuffix+TmpFileSuffix),
		SegmentFileName(7, LogFileSuffix+CleanedFileSuffix),
		SegmentFileName(7, LogFileSuffix+SwapFileSuffix),
		SegmentFileName(99, IndexFileSuffix), // orphan: no .log
	} {
		f, err := e.fs.Create(filepath.Join(e.dir, n))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	l := e.open(true, 0, 0)
	if r := l.Recovery(); r.RemovedLeftovers != 5 {
		t.Fatalf("report %+v", r)
	}
	names, _ := e.fs.List(e.dir)
	for _, n := range names {
		if _, suf, ok := parseSegmentFileName(n); ok && suf != LogFileSuffix && suf != IndexFileSuffix && suf != TimeIndexFileSuffix {
			t.Fatalf("leftover %s survives", n)
		}
	}
	if l.LogEndOffset() != 3 {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
}

func TestRecoveryOnOSFileSystemReopensBothWays(t *testing.T) {
	e := newOSEnv(t, func(c *Config) { c.SegmentBytes = 4000 })
	e.appendBatches(40, 2, 100)
	want, _ := readAll(t, e.log)
	e.reopen()
	got, _ := readAll(t, e.log)
	if !bytes.Equal(got, want) {
		t.Fatal("clean reopen differs")
	}
	e.log.Close()
	l := e.open(false, 0, 0)
	got, _ = readAll(t, l)
	if !bytes.Equal(got, want) || l.Recovery().TruncatedBytes != 0 {
		t.Fatalf("unclean reopen differs: %+v", l.Recovery())
	}
	checkIndexAgainstScan(t, l)
	if v, err := l.Read(l.LogEndOffset(), 100, math.MaxInt64); err != nil || v.Size != 0 {
		t.Fatalf("read at end: %+v %v", v, err)
	}
}
