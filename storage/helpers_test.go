package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// newEnv returns an environment on an in-memory file system (fsync is
// free there) with a dense index, opened.
func newEnv(tb testing.TB, mods ...func(*Config)) *testEnv {
	tb.Helper()
	return newEnvFS(tb, vfs.NewMem(), "/data/t-0", mods...)
}

// newOSEnv is newEnv on the operating system's file system (real mmap,
// real fsync) in a temp dir.
func newOSEnv(tb testing.TB, mods ...func(*Config)) *testEnv {
	tb.Helper()
	return newEnvFS(tb, vfs.Default, filepath.Join(tb.TempDir(), "t-0"), mods...)
}

func newEnvFS(tb testing.TB, fs vfs.FS, dir string, mods ...func(*Config)) *testEnv {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 256
	cfg.SegmentIndexBytes = 64 << 10
	cfg.FileDeleteDelayMs = 0
	for _, m := range mods {
		m(&cfg)
	}
	e := &testEnv{tb: tb, fs: fs, dir: dir, cfg: cfg, clock: newFakeClock()}
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

// checkSegmentsContiguous checks each segment starts where the previous
// ended and the log end is the last segment's end.
func checkSegmentsContiguous(tb testing.TB, l *Log) {
	tb.Helper()
	segs := l.Segments()
	for i := 1; i < len(segs); i++ {
		if segs[i].BaseOffset != segs[i-1].NextOffset {
			tb.Fatalf("segment %d starts at %d, previous ends at %d", i, segs[i].BaseOffset, segs[i-1].NextOffset)
		}
	}
	if got := segs[len(segs)-1].NextOffset; got != l.LogEndOffset() {
		tb.Fatalf("last segment ends at %d, LEO %d", got, l.LogEndOffset())
	}
}

// scanBatches brute-forces every batch header of every segment file.
func scanBatches(tb testing.TB, l *Log) []batch.Header {
	tb.Helper()
	var out []batch.Header
	for _, s := range l.segments() {
		for pos, lim := int64(0), s.size.Load(); pos < lim; {
			h, err := readHeader(s.log, pos, lim)
			if err != nil {
				tb.Fatalf("segment %d at %d: %v", s.base, pos, err)
			}
			out = append(out, h)
			pos += int64(h.Size())
		}
	}
	return out
}

// checkIndexAgainstScan checks, for every offset of the log, that Read
// finds the batch a brute-force scan says holds it (or follows it), and
// that every index entry points at a batch start holding its offset.
func checkIndexAgainstScan(tb testing.TB, l *Log) {
	tb.Helper()
	hdrs := scanBatches(tb, l)
	segs, release := pinSegments(tb, l)
	defer release()
	for _, s := range segs {
		if err := s.oi.SanityCheck(); err != nil {
			tb.Fatalf("segment %d: %v", s.base, err)
		}
		for off := s.base; off < s.next.Load(); off++ {
			eo, p := s.oi.Lookup(off)
			if eo > off {
				tb.Fatalf("lookup(%d) gave entry %d above it", off, eo)
			}
			if p > 0 {
				h, err := readHeader(s.log, int64(p), s.size.Load())
				if err != nil || h.BaseOffset != eo {
					tb.Fatalf("entry (%d,%d) does not point at its batch: %+v %v", eo, p, h, err)
				}
			}
		}
	}
	// Readers never get hollow batches (read.go): an offset in one
	// resolves to the next batch, as an offset in a gap does.
	served := hdrs[:0:0]
	for _, h := range hdrs {
		if !hollow(h) {
			served = append(served, h)
		}
	}
	hdrs = served
	i := 0
	for off := l.LocalLogStartOffset(); off < l.LogEndOffset(); off++ {
		for i < len(hdrs) && hdrs[i].LastOffset() < off {
			i++
		}
		v, err := l.Read(off, 1, l.LogEndOffset())
		if err != nil {
			tb.Fatalf("Read(%d): %v", off, err)
		}
		v.Release()
		if i == len(hdrs) {
			if v.Size != 0 {
				tb.Fatalf("Read(%d) = [%d,%d), scan says nothing to read past the last hollow batch", off, v.FirstOffset, v.NextOffset)
			}
			continue
		}
		if v.FirstOffset != hdrs[i].BaseOffset || v.NextOffset != hdrs[i].LastOffset()+1 {
			tb.Fatalf("Read(%d) = [%d,%d), scan says [%d,%d)", off, v.FirstOffset, v.NextOffset, hdrs[i].BaseOffset, hdrs[i].LastOffset()+1)
		}
	}
}

// failFS fails writes to .log files while failWrites is set.
type failFS struct {
	vfs.FS
	failWrites atomic.Bool
}

type failFile struct {
	vfs.File
	fs *failFS
}

func (f *failFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &failFile{File: file, fs: f}, nil
}

func (f *failFS) Create(n string) (vfs.File, error)        { return f.wrap(f.FS.Create(n)) }
func (f *failFS) OpenReadWrite(n string) (vfs.File, error) { return f.wrap(f.FS.OpenReadWrite(n)) }

func (f *failFile) WriteAt(b []byte, off int64) (int, error) {
	if f.fs.failWrites.Load() && strings.HasSuffix(f.Name(), LogFileSuffix) {
		n := len(b) / 2
		f.File.WriteAt(b[:n], off)
		return n, syscall.EIO
	}
	return f.File.WriteAt(b, off)
}

// splitForScript splits off the first batch of b and describes it as
// "[base,last]".
func splitForScript(b []byte) (string, []byte, error) {
	first, rest, err := batch.Split(b)
	if err != nil {
		return "", nil, err
	}
	h, err := batch.ParseHeader(first)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("[%d,%d]", h.BaseOffset, h.LastOffset()), rest, nil
}

// pinSegments returns the log's segments with their files pinned open
// (acquire: the file cache may have closed a sealed one) until release,
// for checks that look at a segment's files directly. A pin must not
// outlive the check: a Close leaves a pinned segment's files open and its
// indexes untrimmed until the last reference goes (crash_test.go's clean
// reopen after a close would find them so).
func pinSegments(tb testing.TB, l *Log) (segs []*segment, release func()) {
	tb.Helper()
	segs = l.segments()
	for i, s := range segs {
		if err := s.acquire(); err != nil {
			for _, p := range segs[:i] {
				p.release()
			}
			tb.Fatalf("segment %d: %v", s.base, err)
		}
	}
	return segs, func() {
		for _, s := range segs {
			s.release()
		}
	}
}
