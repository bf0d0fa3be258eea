package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/vfs"
)

// baseTs is the CreateTime of the first record of test batches unless a
// test says otherwise.
const baseTs = int64(1_700_000_000_000)

// makeBatch builds a valid uncompressed v2 batch of n records whose values
// are valueSize bytes, record i stamped ts+i, base offset 0 and no epoch,
// as a producer sends it.
func makeBatch(tb testing.TB, n, valueSize int, ts int64) []byte {
	tb.Helper()
	var raw []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{
			OffsetDelta:      int32(i),
			TimestampDelta64: int64(i),
			Key:              fmt.Appendf(nil, "k%d", i),
			Value:            bytes.Repeat([]byte{byte('a' + i%26)}, valueSize),
		}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1)
		raw = r.AppendTo(raw)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts + int64(n-1),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(n),
		Records:              raw,
	}
	rb.Length = int32(len(raw) + batch.HeaderSize - 12)
	b := rb.AppendTo(nil)
	rb.CRC = int32(batch.Checksum(b))
	return rb.AppendTo(b[:0])
}

// withBase returns a copy of b with its base offset set (follower appends).
func withBase(b []byte, base int64) []byte {
	c := bytes.Clone(b)
	batch.SetBaseOffset(c, base)
	return c
}

// fakeClock is a settable clock for segment.ms, retention and
// LogAppendTime tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.UnixMilli(baseTs)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testEnv is one log directory on one file system, reopened at will.
type testEnv struct {
	tb    testing.TB
	fs    vfs.FS
	dir   string
	cfg   Config
	clock *fakeClock
	log   *Log
	snap  func(int64) ([]byte, error)
}

// newEnv returns an environment on the OS file system in a temp dir with
// small segments and a dense index, opened.
func newEnv(tb testing.TB, mods ...func(*Config)) *testEnv {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 256
	cfg.FileDeleteDelayMs = 0
	for _, m := range mods {
		m(&cfg)
	}
	e := &testEnv{tb: tb, fs: vfs.Default, dir: filepath.Join(tb.TempDir(), "t-0"), cfg: cfg, clock: newFakeClock()}
	e.open(true, 0, 0)
	tb.Cleanup(func() {
		if e.log != nil {
			e.log.Close()
		}
	})
	return e
}

func (e *testEnv) options(clean bool, rp, lso int64) LogOptions {
	return LogOptions{
		Dir: e.dir, Topic: "t", Partition: 0, FS: e.fs, Config: e.cfg, Now: e.clock.Now,
		RecoveryPoint: rp, LogStartOffset: lso, CleanShutdown: clean, ProducerSnapshot: e.snap,
	}
}

func (e *testEnv) open(clean bool, rp, lso int64) *Log {
	e.tb.Helper()
	l, err := OpenLog(e.options(clean, rp, lso))
	if err != nil {
		e.tb.Fatalf("OpenLog: %v", err)
	}
	e.log = l
	return l
}

// reopen closes the log cleanly and opens it again on the fast path.
func (e *testEnv) reopen() *Log {
	e.tb.Helper()
	rp, lso := e.log.RecoveryPoint(), e.log.LogStartOffset()
	if err := e.log.Close(); err != nil {
		e.tb.Fatalf("Close: %v", err)
	}
	return e.open(true, rp, lso)
}

// append appends batches of n records each as a leader and returns the
// assigned first offsets.
func (e *testEnv) appendBatches(count, n, valueSize int) []int64 {
	e.tb.Helper()
	var firsts []int64
	for i := 0; i < count; i++ {
		info, err := e.log.Append(makeBatch(e.tb, n, valueSize, e.clock.Now().UnixMilli()), AppendOptions{LeaderEpoch: 1, AssignOffsets: true})
		if err != nil {
			e.tb.Fatalf("Append: %v", err)
		}
		firsts = append(firsts, info.FirstOffset)
	}
	return firsts
}

// readAll reads the whole log from its local start through Read and
// returns the concatenated bytes and the batch headers.
func readAll(tb testing.TB, l *Log) ([]byte, []batch.Header) {
	tb.Helper()
	var all []byte
	var hdrs []batch.Header
	off := l.LocalLogStartOffset()
	for off < l.LogEndOffset() {
		v, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			tb.Fatalf("Read(%d): %v", off, err)
		}
		b, err := v.Bytes()
		v.Release()
		if err != nil {
			tb.Fatal(err)
		}
		if v.Size == 0 {
			tb.Fatalf("Read(%d) below end %d returned nothing", off, l.LogEndOffset())
		}
		all = append(all, b...)
		for rest := b; len(rest) > 0; {
			first, r, err := batch.Split(rest)
			if err != nil {
				tb.Fatalf("split: %v", err)
			}
			h, err := batch.ParseHeader(first)
			if err != nil {
				tb.Fatal(err)
			}
			hdrs = append(hdrs, h)
			rest = r
		}
		off = v.NextOffset
	}
	return all, hdrs
}
