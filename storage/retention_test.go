package storage

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// rolledEnv builds a log of segs sealed segments of two 1-record batches
// each, the i-th stamped baseTs + i hours, plus an active segment.
func rolledEnv(t *testing.T, segs int, mods ...func(*Config)) *testEnv {
	t.Helper()
	return rolledEnvFS(t, vfs.NewMem(), segs, mods...)
}

func rolledEnvFS(t *testing.T, fs vfs.FS, segs int, mods ...func(*Config)) *testEnv {
	t.Helper()
	e := newEnvFS(t, fs, "/data/t-0", mods...)
	for i := 0; i < segs; i++ {
		for j := 0; j < 2; j++ {
			b := makeBatch(t, 1, 100, baseTs+int64(i)*3600_000)
			if _, err := e.log.Append(b, AppendOptions{AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	e.appendBatches(1, 1, 100)
	return e
}

func TestRetentionByTimeDeletesExpiredSealedSegments(t *testing.T) {
	e := rolledEnv(t, 5, func(c *Config) { c.RetentionMs = 90 * 60_000 }) // 1.5 h
	now := time.UnixMilli(baseTs + 4*3600_000)                            // segment i is (4-i) h old
	n, err := e.log.EnforceRetention(now)
	if err != nil || n != 3 {
		t.Fatalf("deleted %d, %v; want 3", n, err)
	}
	if e.log.LogStartOffset() != 6 || e.log.LocalLogStartOffset() != 6 {
		t.Fatalf("log start %d/%d, want 6", e.log.LogStartOffset(), e.log.LocalLogStartOffset())
	}
	if _, err := e.log.Read(5, 100, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	// Far in the future everything sealed goes, never the active segment.
	n, _ = e.log.EnforceRetention(now.Add(100 * time.Hour))
	if n != 2 || e.log.NumSegments() != 1 || e.log.LogStartOffset() != 10 {
		t.Fatalf("deleted %d, %d segments left, start %d", n, e.log.NumSegments(), e.log.LogStartOffset())
	}
	names, _ := e.fs.List(e.dir)
	for _, nm := range names {
		if b, suf, ok := parseSegmentFileName(nm); ok && b < 10 && suf != SnapshotFileSuffix {
			t.Fatalf("file %s of a deleted segment remains", nm)
		}
	}
}

func TestRetentionByBytesKeepsAtLeastRetentionBytes(t *testing.T) {
	e := rolledEnv(t, 6, func(c *Config) { c.RetentionMs = -1 })
	segSize := e.log.Segments()[0].Size
	cfg := e.log.Config()
	cfg.RetentionBytes = 3*segSize + 1
	e.log.SetConfig(cfg)
	n, err := e.log.EnforceRetention(e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if e.log.Size() < cfg.RetentionBytes || e.log.Size()-e.log.Segments()[0].Size >= cfg.RetentionBytes {
		t.Fatalf("size %d after deleting %d segments, retention.bytes %d", e.log.Size(), n, cfg.RetentionBytes)
	}
	if e.log.LogStartOffset() != e.log.Segments()[0].BaseOffset {
		t.Fatal("log start offset does not follow retention")
	}
	e.reopen()
	if e.log.LogStartOffset() != e.log.Segments()[0].BaseOffset || e.log.NumSegments() != 4 {
		t.Fatalf("after reopen: start %d segments %d", e.log.LogStartOffset(), e.log.NumSegments())
	}
}

func TestRetentionSetLogStartOffsetDeletesRecords(t *testing.T) {
	e := rolledEnv(t, 4)
	if err := e.log.SetLogStartOffset(5); err != nil {
		t.Fatal(err)
	}
	if e.log.LogStartOffset() != 5 || e.log.Segments()[0].BaseOffset != 4 {
		t.Fatalf("start %d, first segment %d", e.log.LogStartOffset(), e.log.Segments()[0].BaseOffset)
	}
	if _, err := e.log.Read(4, 100, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below DeleteRecords offset: %v", err)
	}
	if err := e.log.SetLogStartOffset(3); err != nil || e.log.LogStartOffset() != 5 {
		t.Fatal("log start offset moved back")
	}
	if err := e.log.SetLogStartOffset(100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past the end: %v", err)
	}
	// Up to the end: the active segment rolls, the log is empty but keeps
	// its offsets.
	leo := e.log.LogEndOffset()
	if err := e.log.SetLogStartOffset(leo); err != nil {
		t.Fatal(err)
	}
	if e.log.NumSegments() != 1 || e.log.Size() != 0 || e.log.LogEndOffset() != leo {
		t.Fatalf("segments %d size %d leo %d", e.log.NumSegments(), e.log.Size(), e.log.LogEndOffset())
	}
	e.reopen()
	if e.log.LogStartOffset() != leo || e.log.LogEndOffset() != leo {
		t.Fatalf("after reopen start %d leo %d", e.log.LogStartOffset(), e.log.LogEndOffset())
	}
}

func TestRetentionLocalWaitsForRemoteUpload(t *testing.T) {
	e := rolledEnv(t, 5, func(c *Config) {
		c.RemoteStorageEnable = true
		c.RetentionMs = -1
		c.LocalRetentionMs = 0 // delete locally as soon as uploaded
	})
	now := time.UnixMilli(baseTs + 10*3600_000)
	if n, _ := e.log.EnforceRetention(now); n != 0 {
		t.Fatalf("deleted %d before any upload", n)
	}
	e.log.SetRemoteUploadedOffset(5) // segments [0,2) [2,4) uploaded, [4,6) not wholly
	n, err := e.log.EnforceRetention(now)
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v; want 2", n, err)
	}
	if e.log.LocalLogStartOffset() != 4 || e.log.LogStartOffset() != 0 {
		t.Fatalf("local start %d start %d: want 4 and 0", e.log.LocalLogStartOffset(), e.log.LogStartOffset())
	}
	// retention.ms then moves the log start offset.
	cfg := e.log.Config()
	cfg.RetentionMs = 7 * 3600_000 // segments 0..2 expired by total retention
	e.log.SetConfig(cfg)
	if _, err := e.log.EnforceRetention(now); err != nil {
		t.Fatal(err)
	}
	if e.log.LogStartOffset() != 6 || e.log.LocalLogStartOffset() != 6 {
		t.Fatalf("start %d local %d, want 6", e.log.LogStartOffset(), e.log.LocalLogStartOffset())
	}
	e.reopen()
	if e.log.LogStartOffset() != 6 {
		t.Fatalf("start %d after reopen", e.log.LogStartOffset())
	}
}

func TestRetentionDeleteLocalSegmentsBelowKeepsLogStart(t *testing.T) {
	e := rolledEnv(t, 4, func(c *Config) { c.RemoteStorageEnable = true })
	n, err := e.log.DeleteLocalSegmentsBelow(5)
	if err != nil || n != 2 {
		t.Fatalf("deleted %d %v", n, err)
	}
	if e.log.LogStartOffset() != 0 || e.log.LocalLogStartOffset() != 4 {
		t.Fatalf("start %d local %d", e.log.LogStartOffset(), e.log.LocalLogStartOffset())
	}
	if n, _ := e.log.DeleteLocalSegmentsBelow(math.MaxInt64); n != 2 || e.log.NumSegments() != 1 {
		t.Fatalf("the active segment must stay: deleted %d, %d left", n, e.log.NumSegments())
	}
	e.reopen()
	if e.log.LogStartOffset() != 0 || e.log.LocalLogStartOffset() != 8 {
		t.Fatalf("after reopen start %d local %d", e.log.LogStartOffset(), e.log.LocalLogStartOffset())
	}
}

// PendingDeletions() == 0 must mean the files are gone: the unlinks are
// slowed down (the last one most) so a count that drops before them is seen.
func TestRetentionDelayedDeletionRemovesFilesLater(t *testing.T) {
	slow := errfs.On(errfs.OpRemove).Glob("*.timeindex.deleted").Delay(50 * time.Millisecond)
	e := rolledEnvFS(t, errfs.Wrap(vfs.NewMem(), slow), 3, func(c *Config) { c.FileDeleteDelayMs = 20; c.RetentionBytes = 1 })
	if n, _ := e.log.EnforceRetention(e.clock.Now()); n != 3 {
		t.Fatalf("deleted %d", n)
	}
	names, _ := e.fs.List(e.dir)
	if !contains(names, SegmentFileName(0, LogFileSuffix)+DeletedFileSuffix) || e.log.PendingDeletions() != 3 {
		t.Fatalf("want .deleted files pending: %v", names)
	}
	if err := testutil.Within(5*time.Second, func() bool { return e.log.PendingDeletions() == 0 }); err != nil {
		t.Fatal("delayed deletion never ran")
	}
	names, _ = e.fs.List(e.dir)
	for _, n := range names {
		if len(n) > 8 && n[len(n)-8:] == DeletedFileSuffix {
			t.Fatalf("%s not removed", n)
		}
	}
}

func TestTruncateToMiddleOfSealedSegment(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 1500; c.IndexIntervalBytes = 0 })
	for i := 0; i < 20; i++ {
		if _, err := e.log.Append(makeBatch(t, 2, 100, baseTs+int64(i)), AppendOptions{LeaderEpoch: int32(i / 5), AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	segs := e.log.Segments()
	target := segs[1].BaseOffset + 4 // a batch boundary inside segment 1
	if err := e.log.Truncate(target); err != nil {
		t.Fatal(err)
	}
	if e.log.LogEndOffset() != target || e.log.NumSegments() != 2 {
		t.Fatalf("leo %d segments %d", e.log.LogEndOffset(), e.log.NumSegments())
	}
	for _, ep := range e.log.LeaderEpochs().Entries() {
		if ep.StartOffset >= target {
			t.Fatalf("epoch entry %+v survives truncation to %d", ep, target)
		}
	}
	checkIndexAgainstScan(t, e.log)
	if off, _ := e.log.MaxTimestampOffset(); off >= target {
		t.Fatalf("max timestamp offset %d above truncation", off)
	}
	// The truncated segment takes appends again.
	info, err := e.log.Append(makeBatch(t, 3, 100, baseTs), AppendOptions{LeaderEpoch: 9, AssignOffsets: true})
	if err != nil || info.FirstOffset != target {
		t.Fatalf("append after truncate: %+v %v", info, err)
	}
	checkIndexAgainstScan(t, e.log)
	e.reopen()
	checkIndexAgainstScan(t, e.log)
	e.log.Close()
	e.open(false, 0, 0)
	checkIndexAgainstScan(t, e.log)
	if e.log.LogEndOffset() != target+3 {
		t.Fatalf("leo %d after reopen", e.log.LogEndOffset())
	}
	// Mid-batch: the whole batch holding the offset goes.
	if err := e.log.Truncate(target + 1); err != nil || e.log.LogEndOffset() != target {
		t.Fatalf("mid-batch truncate: leo %d %v", e.log.LogEndOffset(), err)
	}
}

// TestTruncateAtLEODropsEpochEntriesAtLEO: a replica elected leader
// writes (its epoch, LEO) into the leader-epoch cache before any append
// (KIP-279); if it loses leadership before appending, that entry sits at
// the LEO with no record under it. Truncating to the LEO changes no
// segment but must drop the entry, as Kafka's UnifiedLog.truncateTo does
// ("always truncate epoch cache"): a follower that kept it sent it as
// LastFetchedEpoch forever, the leader answered DivergingEpoch at the
// same offset, and the follower never caught up (seen in a rolling
// restart of three nodes under franz-go's group ETL test).
func TestTruncateAtLEODropsEpochEntriesAtLEO(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 4; i++ {
		if _, err := e.log.Append(makeBatch(t, 2, 100, baseTs+int64(i)), AppendOptions{LeaderEpoch: 0, AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	leo := e.log.LogEndOffset()
	if err := e.log.LeaderEpochs().Assign(1, leo); err != nil {
		t.Fatal(err)
	}
	if err := e.log.Truncate(leo); err != nil {
		t.Fatal(err)
	}
	if got := e.log.LogEndOffset(); got != leo {
		t.Fatalf("leo %d after truncating to the leo %d", got, leo)
	}
	if ep, start, ok := e.log.LeaderEpochs().Latest(); !ok || ep != 0 || start != 0 {
		t.Fatalf("latest epoch entry (%d, %d, %v) after truncating to the leo, want (0, 0): the empty epoch 1 at the leo must go", ep, start, ok)
	}
	// Above the LEO too, and the entries below stay.
	if err := e.log.LeaderEpochs().Assign(2, leo); err != nil {
		t.Fatal(err)
	}
	if err := e.log.Truncate(leo + 5); err != nil {
		t.Fatal(err)
	}
	if es := e.log.LeaderEpochs().Entries(); len(es) != 1 || es[0].Epoch != 0 {
		t.Fatalf("epoch entries %+v after truncating above the leo, want epoch 0 alone", es)
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	e := rolledEnv(t, 3)
	if err := e.log.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if e.log.LogStartOffset() != 100 || e.log.LogEndOffset() != 100 || e.log.NumSegments() != 1 || e.log.Size() != 0 {
		t.Fatalf("start %d end %d segs %d", e.log.LogStartOffset(), e.log.LogEndOffset(), e.log.NumSegments())
	}
	if len(e.log.LeaderEpochs().Entries()) != 0 {
		t.Fatal("epochs survive a full truncation")
	}
	info, err := e.log.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true})
	if err != nil || info.FirstOffset != 100 {
		t.Fatalf("%+v %v", info, err)
	}
	e.reopen()
	if e.log.LogStartOffset() != 100 || e.log.LogEndOffset() != 101 {
		t.Fatalf("after reopen start %d end %d", e.log.LogStartOffset(), e.log.LogEndOffset())
	}
	// Truncating below the log start also restarts the log there.
	if err := e.log.Truncate(50); err != nil || e.log.LogEndOffset() != 50 || e.log.LogStartOffset() != 50 {
		t.Fatalf("truncate below start: %v end %d", err, e.log.LogEndOffset())
	}
}

func TestSegmentsDescribeSealedFilesForTiering(t *testing.T) {
	e := newEnv(t)
	e.log.Close()
	e.snap = func(off int64) ([]byte, error) { return []byte{byte(off)}, nil }
	e.open(true, 0, 0)
	e.appendBatches(2, 2, 10)
	e.log.Roll()
	e.appendBatches(1, 1, 10)
	segs := e.log.Segments()
	if len(segs) != 2 || !segs[0].Sealed || segs[1].Sealed {
		t.Fatalf("segments %+v", segs)
	}
	s := segs[0]
	if s.BaseOffset != 0 || s.NextOffset != 4 || s.MaxTimestamp != baseTs+1 || s.SnapshotPath != "" {
		t.Fatalf("sealed segment %+v", s)
	}
	if segs[1].SnapshotPath == "" || segs[1].BaseOffset != 4 {
		t.Fatalf("the roll's snapshot is not listed with segment 4: %+v", segs[1])
	}
	for _, p := range []string{s.LogPath, s.IndexPath, s.TimeIndexPath} {
		st, err := e.fs.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if p == s.LogPath && st.Size() != s.Size {
			t.Fatalf("log size %d, info says %d", st.Size(), s.Size)
		}
	}
}

func TestLogDeleteRemovesDirectory(t *testing.T) {
	e := newEnv(t)
	e.appendBatches(3, 1, 10)
	if err := e.log.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Stat(e.dir); err == nil {
		t.Fatal("directory survives Delete")
	}
	if _, err := e.log.Append(makeBatch(t, 1, 1, baseTs), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Delete: %v", err)
	}
	if _, err := e.log.Read(0, 10, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Delete: %v", err)
	}
	e.log = nil
}

func TestRetentionByTimeUsesFileAgeWithoutTimestamps(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.RetentionMs = 60_000 })
	// A sealed segment whose only batch carries no timestamp (-1).
	if _, err := e.log.Append(makeBatch(t, 1, 10, -1), AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatal(err)
	}
	e.log.Roll()
	e.appendBatches(1, 1, 10)
	if ts := e.log.Segments()[0].MaxTimestamp; ts != -1 {
		t.Fatalf("max timestamp %d, want -1", ts)
	}
	if n, _ := e.log.EnforceRetention(time.Now()); n != 0 {
		t.Fatalf("a just-written segment without timestamps was deleted (%d)", n)
	}
	if n, _ := e.log.EnforceRetention(time.Now().Add(time.Hour)); n != 1 {
		t.Fatalf("an hour-old file past retention.ms: deleted %d, want 1", n)
	}
}
