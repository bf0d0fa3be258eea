package storage

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/checkpoint"
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
	// The rescanned sealed segment was sealed (fsynced) again, the active
	// one was not fsynced: the recovery point is the active segment's base
	// until a flush.
	act := l.Segments()[l.NumSegments()-1].BaseOffset
	if l.RecoveryPoint() != act || l.LogEndOffset() != 60 {
		t.Fatalf("rp %d leo %d, want rp %d (the active segment's base) and leo 60", l.RecoveryPoint(), l.LogEndOffset(), act)
	}
	if err := l.Flush(); err != nil || l.RecoveryPoint() != 60 {
		t.Fatalf("rp %d after a flush (%v), want 60", l.RecoveryPoint(), err)
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

// TestRecoveryRescanReadsTheLogInLargeReads: the slow path reads the log
// sequentially in large windows, not once or twice per batch (2,000
// single-record batches: 4,000 preads before, a handful now), and still
// finds a torn tail.
func TestRecoveryRescanReadsTheLogInLargeReads(t *testing.T) {
	e := newEnv(t)
	e.appendBatches(2000, 1, 10)
	want, _ := readAll(t, e.log)
	act := e.log.Segments()[e.log.NumSegments()-1]
	e.log.Close()
	appendBytes(t, e.fs, act.LogPath, makeBatch(t, 3, 50, baseTs)[:70])
	cfs := &readCountFS{FS: e.fs}
	e.fs = cfs
	l := e.open(false, 0, 0)
	if n := cfs.logReads.Load(); n > 10 {
		t.Fatalf("recovery of 2,000 batches (%d bytes) made %d reads of the log", len(want), n)
	}
	if r := l.Recovery(); r.TruncatedBytes != 70 || r.DroppedFromOffset != 2000 || r.SegmentsScanned != 1 {
		t.Fatalf("report %+v, want 70 bytes dropped from 2000", r)
	}
	got, _ := readAll(t, l)
	if !bytes.Equal(got, want) {
		t.Fatal("recovered log differs")
	}
	checkIndexAgainstScan(t, l)
}

// TestRecoveryRescanWindowBoundaries: batches straddling the read window's
// end, and batches larger than the window, are read whole and validated.
func TestRecoveryRescanWindowBoundaries(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxMessageBytes = 4 << 20; c.SegmentBytes = 64 << 20 })
	for _, size := range []int{100, 300 << 10, 1<<20 + 17, 5, 700 << 10, 2 << 20, 33} {
		if _, err := e.log.Append(makeBatch(t, 1, size, baseTs), AppendOptions{LeaderEpoch: 1, AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := readAll(t, e.log)
	e.log.Close()
	l := e.open(false, 0, 0)
	if r := l.Recovery(); r.TruncatedBytes != 0 || l.LogEndOffset() != 7 {
		t.Fatalf("report %+v, log end %d, want nothing cut and 7", r, l.LogEndOffset())
	}
	got, _ := readAll(t, l)
	if !bytes.Equal(got, want) {
		t.Fatal("recovered log differs")
	}
	checkIndexAgainstScan(t, l)
}

// TestManagerCheckpointsRecoveryPointAtRoll: a roll moves the recovery
// point past the sealed segment and the checkpoint file follows soon,
// without waiting for the checkpoint interval; a crash then rescans only
// the active segment.
func TestManagerCheckpointsRecoveryPointAtRoll(t *testing.T) {
	fs := vfs.NewMem()
	o := managerOptions(fs)
	o.CheckpointInterval = time.Hour
	m := openManager(t, o)
	defer m.Close()
	m.Start()
	l, _ := m.GetOrCreate("t", 0, m.opts.Default)
	for range 3 {
		l.Append(makeBatch(t, 2, 10, baseTs), AppendOptions{AssignOffsets: true})
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	l.Append(makeBatch(t, 2, 10, baseTs), AppendOptions{AssignOffsets: true})
	tp := checkpoint.TopicPartition{Topic: "t", Partition: 0}
	if err := testutil.Within(10*time.Second, func() error {
		rps, err := checkpoint.ReadOffsets(fs, "/data/"+RecoveryPointCheckpointFile)
		if err == nil && rps[tp] == 6 {
			return nil
		}
		return fmt.Errorf("recovery point checkpoint %v (%v) after rolls at 6, want 6", rps, err)
	}); err != nil {
		t.Fatal(err)
	}
	m2 := openManager(t, managerOptions(fs.CrashClone(100, nil)))
	defer m2.Close()
	l2, _ := m2.Get("t", 0)
	if r := l2.Recovery(); !r.Recovered || r.SegmentsScanned != 1 || l2.LogEndOffset() != 8 {
		t.Fatalf("after a crash: %+v, log end %d; want only the active segment rescanned, end 8", r, l2.LogEndOffset())
	}
}

// TestManagerWarnsOfUncleanRecovery: a start without the clean-shutdown
// marker logs one warning for the directory, and a log whose tail was cut
// says what it lost.
func TestManagerWarnsOfUncleanRecovery(t *testing.T) {
	fs := vfs.NewMem()
	m := openManager(t, managerOptions(fs))
	l, _ := m.GetOrCreate("t", 0, m.opts.Default)
	l.Append(makeBatch(t, 2, 10, baseTs), AppendOptions{AssignOffsets: true})
	act := l.Segments()[l.NumSegments()-1]
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("/data/" + CleanShutdownFile); err != nil {
		t.Fatal(err)
	}
	appendBytes(t, fs, act.LogPath, makeBatch(t, 3, 50, baseTs)[:40])
	var out testutil.SyncBuffer
	o := managerOptions(fs)
	o.Logger = slog.New(slog.NewTextHandler(&out, nil))
	m2 := openManager(t, o)
	defer m2.Close()
	got := out.String()
	for _, want := range []string{
		`level=WARN msg="storage: unclean shutdown, logs recovered"`, "logs=1", "logs_truncated=1", "truncated_bytes=40",
		`level=WARN msg="storage: unclean recovery truncated the log"`, "from_offset=2", "bytes=40",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

// indexReadFS counts the bytes read through ReadAt from index files.
type indexReadFS struct {
	vfs.FS
	n *atomic.Int64
}

type indexReadFile struct {
	vfs.File
	n *atomic.Int64
}

func (f indexReadFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	f.n.Add(int64(n))
	return n, err
}

func (c indexReadFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name)
	if err != nil || !(strings.HasSuffix(name, IndexFileSuffix) || strings.HasSuffix(name, TimeIndexFileSuffix)) {
		return f, err
	}
	return indexReadFile{File: f, n: c.n}, nil
}

// TestRecoveryDoesNotReadPreallocatedIndexTails: after a crash the active
// segment's indexes keep their preallocated size (segment.index.bytes);
// the rescan counts their entries only where a log of its size can have
// put any, instead of reading the zeros after them (10 MiB per index by
// default: most of a 2,000-partition recovery's time).
func TestRecoveryDoesNotReadPreallocatedIndexTails(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentIndexBytes = 1 << 20 })
	e.appendBatches(50, 1, 10)
	want, _ := readAll(t, e.log)
	mem := e.fs.(*vfs.MemFS)
	crashed := mem.CrashClone(100, nil) // a kill -9: everything written is kept, nothing trimmed
	e.log.Close()
	var n atomic.Int64
	e.fs = indexReadFS{FS: crashed, n: &n}
	l := e.open(false, 0, 0)
	if got := n.Load(); got > 8<<10 {
		t.Fatalf("recovery read %d bytes of index files for a log of %d bytes", got, len(want))
	}
	got, _ := readAll(t, l)
	if !bytes.Equal(got, want) {
		t.Fatal("recovered log differs")
	}
	checkIndexAgainstScan(t, l)
}
