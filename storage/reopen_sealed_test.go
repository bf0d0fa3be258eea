package storage

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// readCountFS counts the bytes read, and the ReadAt calls, from .log files.
type readCountFS struct {
	vfs.FS
	logBytes atomic.Int64
	logReads atomic.Int64
}

type readCountFile struct {
	vfs.File
	fs *readCountFS
}

func (f *readCountFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &readCountFile{File: file, fs: f}, nil
}

func (f *readCountFS) Create(n string) (vfs.File, error)        { return f.wrap(f.FS.Create(n)) }
func (f *readCountFS) OpenReadWrite(n string) (vfs.File, error) { return f.wrap(f.FS.OpenReadWrite(n)) }

func (f *readCountFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	if strings.HasSuffix(f.Name(), LogFileSuffix) {
		f.fs.logBytes.Add(int64(n))
		f.fs.logReads.Add(1)
	}
	return n, err
}

// timestampView is everything a log answers from its max timestamps.
type timestampView struct {
	segs     []SegmentInfo
	segMax   [][2]int64 // per segment: max timestamp, offset that reached it
	maxOff   int64
	maxTs    int64
	lookups  [][3]int64 // query, offset, timestamp (offset -1: none)
	breaches []int      // segments retention.ms would delete at each probe
}

func viewTimestamps(t *testing.T, l *Log, queries []int64) timestampView {
	t.Helper()
	var v timestampView
	v.segs = l.Segments()
	for _, s := range l.segments() {
		ts, off := s.maxTimestamp()
		v.segMax = append(v.segMax, [2]int64{ts, off})
	}
	v.maxOff, v.maxTs = l.MaxTimestampOffset()
	for _, q := range queries {
		off, ts, ok, err := l.OffsetForTimestamp(q)
		if err != nil {
			t.Fatalf("OffsetForTimestamp(%d): %v", q, err)
		}
		if !ok {
			off, ts = -1, -1
		}
		v.lookups = append(v.lookups, [3]int64{q, off, ts})
		// Retention by time: with retention.ms 0, every sealed segment
		// whose max timestamp is below q goes.
		l.mu.Lock()
		v.breaches = append(v.breaches, l.countBreachingLocked(q, 0, -1, l.LogEndOffset()))
		l.mu.Unlock()
	}
	return v
}

func sameTimestampView(t *testing.T, before, after timestampView) {
	t.Helper()
	if len(before.segs) != len(after.segs) {
		t.Fatalf("segments: %d before close, %d after reopen", len(before.segs), len(after.segs))
	}
	for i := range before.segs {
		b, a := before.segs[i], after.segs[i]
		if b.BaseOffset != a.BaseOffset || b.NextOffset != a.NextOffset || b.Size != a.Size || b.MaxTimestamp != a.MaxTimestamp {
			t.Errorf("segment %d: %+v before, %+v after", i, b, a)
		}
		if before.segMax[i] != after.segMax[i] {
			t.Errorf("segment %d: max timestamp@offset %v before, %v after", i, before.segMax[i], after.segMax[i])
		}
	}
	if before.maxOff != after.maxOff || before.maxTs != after.maxTs {
		t.Errorf("MaxTimestampOffset: %d@%d before, %d@%d after", before.maxTs, before.maxOff, after.maxTs, after.maxOff)
	}
	for i := range before.lookups {
		if before.lookups[i] != after.lookups[i] {
			t.Errorf("OffsetForTimestamp %v before, %v after", before.lookups[i], after.lookups[i])
		}
		if before.breaches[i] != after.breaches[i] {
			t.Errorf("retention at %d: %d segments before, %d after", before.lookups[i][0], before.breaches[i], after.breaches[i])
		}
	}
}

// TestLogCleanReopenOfSealedSegmentsReadsOnlyTheirTails: sealed segments
// whose batches all carry one timestamp (the time index's only entry sits
// at each segment's start) reopen cleanly with the same max timestamps,
// timestamp lookups and retention decisions, reading only a window after
// each segment's last offset-index entry, not the whole segment.
func TestLogCleanReopenOfSealedSegmentsReadsOnlyTheirTails(t *testing.T) {
	cfs := &readCountFS{FS: vfs.NewMem()}
	e := newEnvFS(t, cfs, "/data/t-0", func(c *Config) {
		c.SegmentBytes = 1 << 20
		c.IndexIntervalBytes = 4096
	})
	// Segment k: every batch stamped baseTs+1000*k, except that segment 2
	// reaches its max in the middle and then drops back, so the offset that
	// first reached the max is neither the segment's first nor its last.
	const perSeg = 800 // ~1.1 KiB batches: about 0.9 MiB, under segment.bytes
	var queries []int64
	for k := range int64(5) {
		ts := baseTs + 1000*k
		queries = append(queries, ts-1, ts, ts+1, ts+500)
		for i := range perSeg {
			bts := ts
			if k == 2 && i >= perSeg/2 {
				bts = ts - 10
			}
			if k == 2 && i == perSeg/2-1 {
				bts = ts + 500
			}
			if _, err := e.log.Append(makeBatch(t, 1, 1024, bts), AppendOptions{LeaderEpoch: 1, AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	// A few batches in the active segment.
	for range 10 {
		if _, err := e.log.Append(makeBatch(t, 1, 1024, baseTs+4000), AppendOptions{LeaderEpoch: 1, AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.log.NumSegments(); n != 6 {
		t.Fatalf("%d segments, want 6 (five sealed, one active)", n)
	}
	before := viewTimestamps(t, e.log, queries)
	if before.maxTs != baseTs+4000 {
		t.Fatalf("max timestamp %d before close", before.maxTs)
	}
	if got := before.segMax[2]; got[0] != baseTs+2000+500 || got[1] == before.segs[2].BaseOffset {
		t.Fatalf("segment 2 max %v does not sit in its middle", got)
	}

	rp, lso := e.log.RecoveryPoint(), e.log.LogStartOffset()
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	cfs.logBytes.Store(0)
	e.open(true, rp, lso)
	read := cfs.logBytes.Load()
	after := viewTimestamps(t, e.log, queries)
	sameTimestampView(t, before, after)

	// Per segment: at most one scan window (64 KiB) from the last index
	// entry, plus the active segment's first header (segment.ms).
	var total int64
	for _, s := range before.segs {
		total += s.Size
	}
	t.Logf("clean reopen read %d of %d log bytes", read, total)
	if limit := int64(len(before.segs)) * (scanWindowLarge + 4096); read > limit {
		t.Fatalf("clean reopen read %d of %d log bytes, want at most %d (a window per segment)", read, total, limit)
	}
	if e.log.Recovery().Recovered || e.log.Recovery().RebuiltIndexes != 0 {
		t.Fatalf("clean reopen took the slow path: %+v", e.log.Recovery())
	}
	// And once more: a second clean reopen sees the same.
	sameTimestampView(t, before, viewTimestamps(t, e.reopen(), queries))
}

// TestLogSealWritesFinalTimeEntryWhenIndexFull: one Append of many batches
// with rising timestamps into a tiny time index fills it mid-call (the
// later batches get no entry); the roll's final entry takes the reserved
// slot, so after a clean reopen the sealed segment's max timestamp, read
// from that entry without a scan, is still the last batch's.
func TestLogSealWritesFinalTimeEntryWhenIndexFull(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.SegmentIndexBytes = 48 // time index: 4 slots, 3 for regular appends
		c.IndexIntervalBytes = 0
	})
	var records []byte
	for i := range int64(10) {
		records = append(records, makeBatch(t, 1, 10, baseTs+100*i)...)
	}
	if _, err := e.log.Append(records, AppendOptions{LeaderEpoch: 1, AssignOffsets: true}); err != nil {
		t.Fatal(err)
	}
	if !e.log.active().ti.IsFull() {
		t.Fatal("time index not full after the multi-batch append")
	}
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	seg := e.log.segments()[0]
	if ts, off, _ := seg.ti.LastEntry(); ts != baseTs+900 || off != 9 {
		t.Fatalf("final time entry %d@%d, want %d@9", ts, off, baseTs+900)
	}
	queries := []int64{baseTs - 1, baseTs + 450, baseTs + 800, baseTs + 900, baseTs + 901}
	before := viewTimestamps(t, e.log, queries)
	after := viewTimestamps(t, e.reopen(), queries)
	sameTimestampView(t, before, after)
	if after.maxTs != baseTs+900 || after.maxOff != 9 {
		t.Fatalf("MaxTimestampOffset after reopen %d@%d", after.maxTs, after.maxOff)
	}
	if got := after.lookups[2]; got[1] != 8 || got[2] != baseTs+800 {
		t.Fatalf("OffsetForTimestamp(%d) after reopen = %v, want offset 8", baseTs+800, got)
	}
}

// TestLogReopenHalfSealedSegmentScansFromFullTimeIndex: a crash during a
// roll after the old segment's indexes were trimmed but before its final
// entry (and the next segment) reached the disk leaves that segment last,
// without its final entry and with a full time index. Reopened, it is the
// active segment again and must not trust its time index's last entry:
// its max timestamp is found by scanning from that entry.
func TestLogReopenHalfSealedSegmentScansFromFullTimeIndex(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := "unclean"
		if clean {
			name = "clean"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) {
				c.SegmentIndexBytes = 48 // time index: 4 slots, 3 for regular appends
				c.IndexIntervalBytes = 0
			})
			// Offset-index entries go to batches 1-6 (full after six),
			// time-index entries to 1-3; batch 4 holds the max, between the
			// two indexes' last entries, where only a scan from the time
			// index's last entry finds it.
			var records []byte
			for i := range int64(10) {
				ts := baseTs + 100*i
				if i == 4 {
					ts = baseTs + 5000
				}
				records = append(records, makeBatch(t, 1, 10, ts)...)
			}
			if _, err := e.log.Append(records, AppendOptions{LeaderEpoch: 1, AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
			if err := e.log.Roll(); err != nil {
				t.Fatal(err)
			}
			rp := e.log.RecoveryPoint()
			if err := e.log.Close(); err != nil {
				t.Fatal(err)
			}
			// Undo what the crash lost: the successor and the final entry.
			for _, suf := range []string{LogFileSuffix, IndexFileSuffix, TimeIndexFileSuffix} {
				if err := e.fs.Remove(e.dir + "/" + SegmentFileName(10, suf)); err != nil {
					t.Fatal(err)
				}
			}
			f, err := e.fs.OpenReadWrite(e.dir + "/" + SegmentFileName(0, TimeIndexFileSuffix))
			if err != nil {
				t.Fatal(err)
			}
			st, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(st.Size() - 12); err != nil {
				t.Fatal(err)
			}
			f.Close()

			l := e.open(clean, rp, 0)
			if ts, off, _ := l.active().ti.LastEntry(); ts == baseTs+5000 {
				t.Fatalf("time index still holds the final entry %d@%d", ts, off)
			}
			if off, ts := l.MaxTimestampOffset(); ts != baseTs+5000 || off != 4 {
				t.Fatalf("MaxTimestampOffset after reopen = %d@%d, want %d@4", ts, off, baseTs+5000)
			}
			if off, ts, ok, err := l.OffsetForTimestamp(baseTs + 1000); err != nil || !ok || off != 4 || ts != baseTs+5000 {
				t.Fatalf("OffsetForTimestamp = %d,%d,%v,%v; want 4", off, ts, ok, err)
			}
			// The next roll seals it with a final entry again.
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if ts, off, _ := l.segments()[0].ti.LastEntry(); ts != baseTs+5000 || off != 4 {
				t.Fatalf("final entry after the new roll %d@%d", ts, off)
			}
		})
	}
}
