package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/batch"
)

func TestLogAppendReadRoundTripIsByteExact(t *testing.T) {
	e := newOSEnv(t)
	var want []byte
	for i := 0; i < 50; i++ {
		b := makeBatch(t, 1+i%5, 100, baseTs+int64(i))
		info, err := e.log.Append(b, AppendOptions{LeaderEpoch: 3, AssignOffsets: true})
		if err != nil {
			t.Fatal(err)
		}
		if info.FirstOffset != int64(len(want)) && i == 0 {
			t.Fatalf("first offset %d", info.FirstOffset)
		}
		want = append(want, b...) // b was patched in place: this is what the log holds
	}
	got, hdrs := readAll(t, e.log)
	if !bytes.Equal(got, want) {
		t.Fatalf("read bytes differ from appended bytes (%d vs %d)", len(got), len(want))
	}
	next := int64(0)
	for _, h := range hdrs {
		if h.BaseOffset != next {
			t.Fatalf("batch at %d, want dense offset %d", h.BaseOffset, next)
		}
		if h.PartitionLeaderEpoch != 3 {
			t.Fatalf("epoch %d, want 3", h.PartitionLeaderEpoch)
		}
		next = h.LastOffset() + 1
	}
	if e.log.LogEndOffset() != next {
		t.Fatalf("LEO %d, want %d", e.log.LogEndOffset(), next)
	}
	e.reopen()
	got2, _ := readAll(t, e.log)
	if !bytes.Equal(got2, want) {
		t.Fatal("bytes differ after reopen")
	}
}

func TestLogAppendAssignsDenseOffsetsAcrossBatchesOfOneSet(t *testing.T) {
	e := newEnv(t)
	set := append(makeBatch(t, 3, 10, baseTs), makeBatch(t, 4, 10, baseTs+5)...)
	set = append(set, makeBatch(t, 1, 10, baseTs+9)...)
	info, err := e.log.Append(set, AppendOptions{LeaderEpoch: 0, AssignOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 7 || info.Batches != 3 || info.Bytes != len(set) {
		t.Fatalf("info %+v", info)
	}
	if info.MaxTimestamp != baseTs+9 || info.LogAppendTime != -1 {
		t.Fatalf("timestamps in info %+v", info)
	}
	_, hdrs := readAll(t, e.log)
	want := []int64{0, 3, 7}
	for i, h := range hdrs {
		if h.BaseOffset != want[i] {
			t.Fatalf("batch %d at %d, want %d", i, h.BaseOffset, want[i])
		}
	}
	info, err = e.log.Append(makeBatch(t, 2, 10, baseTs), AppendOptions{AssignOffsets: true})
	if err != nil || info.FirstOffset != 8 || info.LastOffset != 9 {
		t.Fatalf("second append %+v %v", info, err)
	}
}

func TestLogAppendLogAppendTimeRewritesTimestampsAndCRC(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TimestampType = logAppendTime })
	e.clock.Advance(time.Hour)
	b := makeBatch(t, 5, 10, 12345)
	info, err := e.log.Append(b, AppendOptions{AssignOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now().UnixMilli()
	if info.LogAppendTime != now || info.MaxTimestamp != now {
		t.Fatalf("info %+v, want LogAppendTime %d", info, now)
	}
	got, hdrs := readAll(t, e.log)
	if hdrs[0].TimestampType() != logAppendTime || hdrs[0].MaxTimestamp != now {
		t.Fatalf("header %+v", hdrs[0])
	}
	if _, err := batch.Validate(got, batch.Limits{SkipTimestampCheck: true}); err != nil {
		t.Fatalf("stored batch invalid after rewrite: %v", err)
	}
	off, ts, ok, err := e.log.OffsetForTimestamp(now)
	if err != nil || !ok || off != 0 || ts != now {
		t.Fatalf("OffsetForTimestamp = %d %d %v %v", off, ts, ok, err)
	}
}

func TestLogAppendRejectsInvalidBatchesAndLeavesLogUnchanged(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxMessageBytes = 2000 })
	e.appendBatches(3, 2, 10)
	size, leo := e.log.Size(), e.log.LogEndOffset()
	good := makeBatch(t, 2, 10, baseTs)
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff
	badMagic := bytes.Clone(good)
	badMagic[16] = 1
	badCount := makeBatch(t, 2, 10, baseTs)
	binary.BigEndian.PutUint32(badCount[57:], 3)
	binary.BigEndian.PutUint32(badCount[17:], batch.Checksum(badCount))
	cases := []struct {
		name string
		set  []byte
		want error
	}{
		{"crc", badCRC, kerr.CorruptMessage},
		{"magic", badMagic, kerr.UnsupportedForMessageFormat},
		{"torn", good[:len(good)-3], kerr.CorruptMessage},
		{"count", badCount, kerr.InvalidRecord},
		{"too-large", makeBatch(t, 1, 3000, baseTs), kerr.MessageTooLarge},
		{"second-of-two-bad", append(bytes.Clone(good), badCRC...), kerr.CorruptMessage},
		{"trailing-garbage", append(bytes.Clone(good), 1, 2, 3), kerr.CorruptMessage},
		{"empty", nil, kerr.InvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.log.Append(c.set, AppendOptions{AssignOffsets: true})
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if e.log.Size() != size || e.log.LogEndOffset() != leo {
				t.Fatalf("log changed: size %d→%d leo %d→%d", size, e.log.Size(), leo, e.log.LogEndOffset())
			}
		})
	}
	if _, err := e.log.Append(good, AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatalf("valid append after rejections: %v", err)
	}
}

func TestLogFollowerAppendKeepsOffsetsAndRejectsOverlap(t *testing.T) {
	e := newEnv(t)
	b := withBase(makeBatch(t, 3, 10, baseTs), 0)
	batch.SetPartitionLeaderEpoch(b, 4)
	if _, err := e.log.Append(b, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.Append(withBase(makeBatch(t, 3, 10, baseTs), 2), AppendOptions{}); !errors.Is(err, ErrInvalidOffset) {
		t.Fatalf("overlapping follower append: %v", err)
	}
	b2 := withBase(makeBatch(t, 3, 10, baseTs), 10)
	batch.SetPartitionLeaderEpoch(b2, 6)
	info, err := e.log.Append(b2, AppendOptions{})
	if err != nil || info.FirstOffset != 10 || info.LastOffset != 12 {
		t.Fatalf("gap append %+v %v", info, err)
	}
	if got := e.log.LeaderEpochs().Entries(); len(got) != 2 || got[0].Epoch != 4 || got[1].Epoch != 6 || got[1].StartOffset != 10 {
		t.Fatalf("epochs %+v", got)
	}
}

func TestLogRollsOnSegmentBytes(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 1000 })
	e.appendBatches(10, 1, 300) // ~370 bytes each: two per segment
	if n := e.log.NumSegments(); n != 5 {
		t.Fatalf("segments %d, want 5", n)
	}
	for _, s := range e.log.Segments() {
		if s.Size > 1000 {
			t.Fatalf("segment %d holds %d bytes", s.BaseOffset, s.Size)
		}
	}
	checkSegmentsContiguous(t, e.log)
}

// IOStats counts the rolls and the time they held the append lock; an
// explicit Roll of an empty active segment is no roll.
func TestLogIOStatsCountsRolls(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 1000 })
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	if st := e.log.IOStats(); st.Rolls != 0 || st.RollSeconds != 0 {
		t.Fatalf("an empty log's roll counted: %+v", st)
	}
	e.appendBatches(10, 1, 300) // five segments: four rolls
	st := e.log.IOStats()
	if st.Rolls != 4 || st.RollSeconds <= 0 {
		t.Fatalf("after four rolls: %+v", st)
	}
}

func TestLogRollsOnSegmentMs(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentMs = 60_000 })
	e.appendBatches(3, 1, 10)
	e.clock.Advance(59 * time.Second)
	e.appendBatches(1, 1, 10)
	if n := e.log.NumSegments(); n != 1 {
		t.Fatalf("rolled early: %d segments", n)
	}
	e.clock.Advance(2 * time.Second)
	e.appendBatches(1, 1, 10)
	segs := e.log.Segments()
	if len(segs) != 2 || segs[1].BaseOffset != 4 {
		t.Fatalf("segments %+v", segs)
	}
}

func TestLogRollsOnFullIndex(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentIndexBytes = 48; c.IndexIntervalBytes = 0 })
	e.appendBatches(20, 1, 10)
	if n := e.log.NumSegments(); n < 3 {
		t.Fatalf("index of 4 time entries never filled: %d segments", n)
	}
	checkSegmentsContiguous(t, e.log)
	checkIndexAgainstScan(t, e.log)
}

func TestLogRollsWhenRelativeOffsetOverflows(t *testing.T) {
	e := newEnv(t)
	if _, err := e.log.Append(withBase(makeBatch(t, 2, 10, baseTs), 0), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	far := int64(math.MaxInt32) + 10
	if _, err := e.log.Append(withBase(makeBatch(t, 2, 10, baseTs), far), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	segs := e.log.Segments()
	if len(segs) != 2 || segs[1].BaseOffset != far {
		t.Fatalf("segments %+v", segs)
	}
	v, err := e.log.Read(far+1, 1000, far+2)
	if err != nil || v.FirstOffset != far {
		t.Fatalf("read %+v %v", v, err)
	}
	v.Release()
	if v, err := e.log.Read(5, 1000, math.MaxInt64); err != nil || v.FirstOffset != far {
		t.Fatalf("offset in gap: %+v %v", v, err)
	} else {
		v.Release()
	}
}

// A follower's batch past a gap (a compacted leader's) that rolls the log
// goes into a segment at the log end, the gap inside it: segments tile the
// offsets, which recovery relies on (rollsync.go).
func TestLogRollPastAGapStartsAtTheLogEnd(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 1000 })
	for i := range 3 { // ~680 bytes each: each rolls
		if _, err := e.log.Append(withBase(makeBatch(t, 2, 300, baseTs), int64(2*i)), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.log.Append(withBase(makeBatch(t, 2, 300, baseTs), 100), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	segs := e.log.Segments()
	if last := segs[len(segs)-1]; last.BaseOffset != 6 || last.NextOffset != 102 {
		t.Fatalf("segments %+v: want the last at the log end before the gap (6), holding the batch at 100", segs)
	}
	checkSegmentsContiguous(t, e.log)
	v, err := e.log.Read(50, 1000, math.MaxInt64)
	if err != nil || v.FirstOffset != 100 {
		t.Fatalf("offset in the gap: %+v %v", v, err)
	}
	v.Release()
}

func TestLogFlushMessagesAdvancesRecoveryPoint(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.FlushMessages = 5 })
	e.appendBatches(2, 2, 10)
	if rp := e.log.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before flush.messages", rp)
	}
	e.appendBatches(1, 2, 10)
	if rp := e.log.RecoveryPoint(); rp != 6 {
		t.Fatalf("recovery point %d, want 6", rp)
	}
	e.appendBatches(1, 1, 10)
	if err := e.log.Flush(); err != nil || e.log.RecoveryPoint() != 7 {
		t.Fatalf("Flush: %v rp %d", err, e.log.RecoveryPoint())
	}
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
}

func TestLogRollWritesProducerSnapshotsAndKeepsLatest(t *testing.T) {
	e := newEnv(t)
	e.log.Close()
	e.snap = func(off int64) ([]byte, error) { return fmt.Appendf(nil, "state@%d", off), nil }
	e.open(true, 0, 0)
	for i := 0; i < 4; i++ {
		e.appendBatches(1, 2, 10)
		if err := e.log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	// A roll's snapshot and fsyncs come after it (rollsync.go).
	if err := e.log.Flush(); err != nil {
		t.Fatal(err)
	}
	off, data, ok, err := e.log.LatestProducerSnapshot()
	if err != nil || !ok || off != 8 || string(data) != "state@8" {
		t.Fatalf("latest snapshot %d %q %v %v", off, data, ok, err)
	}
	if got := e.log.snapshotOffsets(); len(got) != keepSnapshots {
		t.Fatalf("snapshots kept %v", got)
	}
	if err := e.log.Truncate(7); err != nil {
		t.Fatal(err)
	}
	if off, _, ok, _ := e.log.LatestProducerSnapshot(); !ok || off != 6 {
		t.Fatalf("snapshot above truncation point survives: %d %v", off, ok)
	}
}

// TestLogCloseWritesProducerSnapshotAtLogEnd: a clean close writes the
// producer snapshot at the log end (as Kafka does at shutdown), so the next
// open restores it and replays nothing; an unclean reopen after more
// appends replays only what follows it.
func TestLogCloseWritesProducerSnapshotAtLogEnd(t *testing.T) {
	e := newEnv(t)
	e.log.Close()
	e.snap = func(off int64) ([]byte, error) { return fmt.Appendf(nil, "state@%d", off), nil }
	e.open(true, 0, 0)
	e.appendBatches(3, 2, 10)
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	e.appendBatches(2, 2, 10) // log end 10, the roll's snapshot at 6
	e.reopen()
	off, data, ok, err := e.log.LatestProducerSnapshot()
	if err != nil || !ok || off != 10 || string(data) != "state@10" {
		t.Fatalf("latest snapshot after a clean close: %d %q %v %v, want 10 \"state@10\"", off, data, ok, err)
	}
	// Closing again with nothing appended writes nothing new.
	e.reopen()
	if got := e.log.snapshotOffsets(); len(got) != keepSnapshots || got[len(got)-1] != 10 {
		t.Fatalf("snapshots after a second clean close: %v", got)
	}
}

func TestLogWriteFailureLatches(t *testing.T) {
	e := newEnv(t)
	ffs := &failFS{FS: e.fs}
	e.log.Close()
	e.fs = ffs
	e.open(true, 0, 0)
	var failures []error
	e.log.onFailure = func(err error) { failures = append(failures, err) }
	e.appendBatches(2, 1, 10)
	size := e.log.Size()
	ffs.failWrites.Store(true)
	if _, err := e.log.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append with failing write: %v", err)
	}
	ffs.failWrites.Store(false)
	if _, err := e.log.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after failure must stay failed: %v", err)
	}
	if !errors.Is(e.log.Roll(), ErrLogFailed) || !errors.Is(e.log.Flush(), ErrLogFailed) {
		t.Fatal("roll/flush after failure must fail")
	}
	if len(failures) != 1 {
		t.Fatalf("OnFailure called %d times", len(failures))
	}
	if e.log.Size() != size || e.log.LogEndOffset() != 2 {
		t.Fatalf("failed append visible: size %d leo %d", e.log.Size(), e.log.LogEndOffset())
	}
	e.log.Close()
	l := e.open(false, 0, 0)
	if l.LogEndOffset() != 2 {
		t.Fatalf("reopened LEO %d", l.LogEndOffset())
	}
}

func TestLogConcurrentAppendReadRollRetention(t *testing.T) {
	t.Run("fs=mem", func(t *testing.T) {
		testConcurrent(t, newEnv(t, func(c *Config) { c.SegmentBytes = 4096; c.RetentionBytes = 16 << 10; c.FileDeleteDelayMs = 1 }), 600)
	})
	t.Run("fs=os", func(t *testing.T) {
		testConcurrent(t, newOSEnv(t, func(c *Config) { c.SegmentBytes = 16 << 10; c.RetentionBytes = 48 << 10; c.FileDeleteDelayMs = 1 }), 400)
	})
}

func testConcurrent(t *testing.T, e *testEnv, total int) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 8)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				off := e.log.LocalLogStartOffset()
				v, err := e.log.Read(off, 2048, e.log.LogEndOffset())
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // retention moved the start meanwhile
				}
				if err != nil {
					errc <- err
					return
				}
				b, err := v.Bytes()
				v.Release()
				if err != nil {
					errc <- err
					return
				}
				for rest := b; len(rest) > 0; {
					first, r, err := batch.Split(rest)
					if err != nil {
						errc <- err
						return
					}
					if _, err := batch.Validate(first, batch.Limits{SkipTimestampCheck: true}); err != nil {
						errc <- fmt.Errorf("reader saw an invalid batch: %w", err)
						return
					}
					rest = r
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := e.log.EnforceRetention(e.clock.Now()); err != nil {
				errc <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for i := 0; i < total; i++ {
		if _, err := e.log.Append(makeBatch(t, 2, 100, baseTs), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if e.log.LogEndOffset() != int64(2*total) {
		t.Fatalf("LEO %d", e.log.LogEndOffset())
	}
	// The retention goroutine may not have caught the last rolls.
	if _, err := e.log.EnforceRetention(e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if e.log.LogStartOffset() == 0 || e.log.Size() > e.cfg.RetentionBytes+e.cfg.SegmentBytes {
		t.Fatalf("retention did not keep up: start %d size %d", e.log.LogStartOffset(), e.log.Size())
	}
	checkSegmentsContiguous(t, e.log)
}

// TestLogConcurrentReadersDuringTruncation runs a follower that appends and
// truncates while readers read: a reader may see data that a truncation
// then removes (as in Kafka), but never an error other than out of range
// and never a partial batch.
func TestLogConcurrentReadersDuringTruncation(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 2048 })
	done := make(chan struct{})
	errc := make(chan error, 4)
	var truncations atomic.Int64 // bumped before and after each Truncate
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				gen := truncations.Load()
				leo := e.log.LogEndOffset()
				v, err := e.log.Read(int64(i)%(leo+1), 4096, math.MaxInt64)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue
				}
				if err != nil {
					errc <- err
					return
				}
				if v.Size > 0 {
					b, err := v.Bytes()
					if err == nil {
						for rest := b; len(rest) > 0; {
							if _, rest, err = batch.Split(rest); err != nil {
								break
							}
						}
					}
					// A view cut by a truncation that raced the read may end
					// short (an error, never a partial batch returned as
					// whole); any other short view is a bug.
					if err != nil && gen%2 == 0 && truncations.Load() == gen {
						errc <- fmt.Errorf("partial view [%d,%d): %w", v.FirstOffset, v.NextOffset, err)
						v.Release()
						return
					}
				}
				v.Release()
			}
		}()
	}
	for round := 0; round < 60; round++ {
		leo := e.log.LogEndOffset()
		for i := 0; i < 5; i++ {
			if _, err := e.log.Append(withBase(makeBatch(t, 2, 100, baseTs), leo+int64(2*i)), AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		truncations.Add(1) // odd while a truncation runs
		if err := e.log.Truncate(leo + 4); err != nil {
			t.Fatal(err)
		}
		truncations.Add(1)
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if e.log.LogEndOffset() != 60*4 {
		t.Fatalf("LEO %d", e.log.LogEndOffset())
	}
	checkIndexAgainstScan(t, e.log)
}

func TestLogFollowerAppendSkipsLeaderOnlyLimits(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxMessageBytes = 500; c.TimestampAfterMaxMs = 1000 })
	future := e.clock.Now().Add(time.Hour).UnixMilli()
	big := makeBatch(t, 1, 800, baseTs)
	if _, err := e.log.Append(bytes.Clone(big), AppendOptions{AssignOffsets: true}); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("leader append of a too-large batch: %v", err)
	}
	if _, err := e.log.Append(makeBatch(t, 1, 10, future), AppendOptions{AssignOffsets: true}); !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("leader append from the future: %v", err)
	}
	if _, err := e.log.Append(withBase(big, 0), AppendOptions{}); err != nil {
		t.Fatalf("follower copy of a batch the leader accepted: %v", err)
	}
	if _, err := e.log.Append(withBase(makeBatch(t, 1, 10, future), 1), AppendOptions{}); err != nil {
		t.Fatalf("follower copy with the leader's timestamps: %v", err)
	}
	bad := withBase(makeBatch(t, 1, 10, baseTs), 2)
	bad[len(bad)-1] ^= 1
	if _, err := e.log.Append(bad, AppendOptions{}); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("follower append of a corrupt batch: %v", err)
	}
}

func TestLogSegmentMsCountsFromFirstBatchAfterReopen(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentMs = 60_000 })
	e.appendBatches(1, 1, 10) // stamped at the clock's time
	e.reopen()
	e.clock.Advance(30 * time.Second)
	e.appendBatches(1, 1, 10)
	if e.log.NumSegments() != 1 {
		t.Fatal("rolled before segment.ms")
	}
	e.reopen()
	e.clock.Advance(31 * time.Second)
	e.appendBatches(1, 1, 10)
	if e.log.NumSegments() != 2 {
		t.Fatal("a reopen restarted the segment.ms clock")
	}
}

// A remote-storage log keeps the producer snapshots its uploads still
// need: those above the remote-uploaded offset stay however many there
// are; once uploaded, only the latest few remain.
func TestRemoteLogKeepsSnapshotsUntilUploaded(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.RemoteStorageEnable = true })
	e.log.Close()
	e.snap = func(off int64) ([]byte, error) { return fmt.Appendf(nil, "state@%d", off), nil }
	e.open(true, 0, 0)
	e.log.SetRemoteUploadedOffset(0)
	for i := 0; i < 5; i++ {
		e.appendBatches(1, 2, 10)
		if err := e.log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	// A roll's snapshot and fsyncs come after it (rollsync.go).
	if err := e.log.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := e.log.snapshotOffsets(); len(got) != 5 {
		t.Fatalf("snapshots before upload %v, want all 5 (2, 4, ..., 10)", got)
	}
	e.log.SetRemoteUploadedOffset(10)
	e.appendBatches(1, 2, 10)
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := e.log.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := e.log.snapshotOffsets(); !slices.Equal(got, []int64{10, 12}) {
		t.Fatalf("snapshots after upload %v, want the latest %d: [10 12]", got, keepSnapshots)
	}
}
