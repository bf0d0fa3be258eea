package storage

// Crash and fault sweeps: the log against a file system that loses power
// (vfs.MemFS.CrashClone) or fails operations (errfs).
//
// Every reopened log must satisfy the same invariants, checked by
// checkRecovered:
//
//   - it holds a prefix of the batches handed to Append, each byte for byte
//     as the log stored it (so every batch is valid);
//   - every batch below the recovery point the log reported before the
//     crash is there (flushed means durable), and every acknowledged batch
//     after a restart without power loss;
//   - offsets are dense, the log end offset follows the last batch;
//   - the offset and time indexes agree with a brute-force scan of the
//     segments; Read, OffsetForTimestamp and MaxTimestampOffset answer as
//     the scan says;
//   - the RecoveryReport accounts for exactly the bytes recovery cut;
//   - no leftover (.tmp, .deleted, .cleaned, .swap) survives recovery;
//   - the recovered log takes appends and reopens cleanly with them.
//
// The helpers live here rather than in helpers_test.go because this file
// and testdata/crash/ are owned separately from the rest of storage/.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

const (
	crashDataDir = "/data"
	crashDir     = "/data/t-0"
	crashEpoch   = int32(4)
	crashBaseTs  = int64(1_700_000_000_000)
)

// crashConfig makes a short workload roll often (3 KiB segments, and
// indexes of 30 offset / 20 time entries that fill up) and index densely.
func crashConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 3 << 10
	cfg.SegmentIndexBytes = 240
	cfg.IndexIntervalBytes = 200
	cfg.FileDeleteDelayMs = 0
	cfg.RetentionBytes = 6 << 10 // only workloads with retention call EnforceRetention
	return cfg
}

// newCrashFS returns a MemFS whose data directory already exists durably,
// as the operator left it. OpenLog creates the partition directory.
func newCrashFS(t testing.TB) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	if err := m.MkdirAll(crashDataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/"} {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// crashSnapshot is the producer-state snapshot function of crash logs: it
// makes rolls write <base>.snapshot through tmp+fsync+rename.
func crashSnapshot(next int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(next)), nil
}

func crashOptions(fs vfs.FS, rp int64, clean bool) LogOptions {
	return crashOptionsLSO(fs, rp, 0, clean)
}

// crashOptionsLSO also passes a checkpointed log start offset.
func crashOptionsLSO(fs vfs.FS, rp, lso int64, clean bool) LogOptions {
	return LogOptions{
		Dir: crashDir, Topic: "t", Partition: 0, FS: fs, Config: crashConfig(),
		Now:           func() time.Time { return time.UnixMilli(crashBaseTs) },
		RecoveryPoint: rp, LogStartOffset: lso, CleanShutdown: clean, ProducerSnapshot: crashSnapshot,
	}
}

// crashWorkload drives a log with a seeded mix of appends (one or two
// batches each), flushes and rolls. Every batch is built with the offset
// and leader epoch the log will stamp on it and recorded in attempted
// before Append is called, so attempted is exactly what the log may hold.
type crashWorkload struct {
	retention bool // also run retention.bytes and DeleteRecords
	rng       *rand.Rand
	attempted [][]byte
	acked     int   // attempted[:acked] were acknowledged
	next      int64 // offset of the next batch
	ts        int64 // timestamp of the next record
}

func newCrashWorkload(seed uint64) *crashWorkload {
	return &crashWorkload{rng: rand.New(rand.NewPCG(seed, 0xc7a5)), ts: crashBaseTs - 1_000_000}
}

// makeCrashBatch builds a valid uncompressed v2 batch of n records at
// base with record timestamps ts, ts+1, ... and random keys and values.
func makeCrashBatch(rng *rand.Rand, base int64, n int, ts int64) []byte {
	var raw []byte
	for i := range n {
		val := make([]byte, rng.IntN(160))
		for j := range val {
			val[j] = byte(rng.Uint32())
		}
		r := kmsg.Record{
			OffsetDelta:      int32(i),
			TimestampDelta64: int64(i),
			Key:              fmt.Appendf(nil, "key-%d", base+int64(i)),
			Value:            val,
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          base,
		PartitionLeaderEpoch: crashEpoch,
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

// nextBatch builds the next batch of the workload. Timestamps strictly
// increase across records, so "first record at or after ts" has one
// brute-force answer.
func (w *crashWorkload) nextBatch() []byte {
	n := 1 + w.rng.IntN(4)
	b := makeCrashBatch(w.rng, w.next, n, w.ts)
	w.next += int64(n)
	w.ts += int64(n) + int64(w.rng.IntN(3))
	return b
}

// step performs one random operation and returns its error.
func (w *crashWorkload) step(l *Log) error {
	switch r := w.rng.IntN(100); {
	case r < 7:
		return l.Flush()
	case r < 10:
		return l.Roll()
	case r < 13 && w.retention:
		_, err := l.EnforceRetention(time.UnixMilli(crashBaseTs))
		return err
	case r < 15 && w.retention:
		lso, leo := l.LogStartOffset(), l.LogEndOffset()
		return l.SetLogStartOffset(lso + w.rng.Int64N(leo-lso+1))
	default:
		var rec []byte
		first := w.next
		for range 1 + w.rng.IntN(4)/3 {
			b := w.nextBatch()
			w.attempted = append(w.attempted, b)
			rec = append(rec, b...)
		}
		info, err := l.Append(rec, AppendOptions{LeaderEpoch: crashEpoch, AssignOffsets: true})
		if err != nil {
			return err
		}
		if info.FirstOffset != first || info.LastOffset != w.next-1 {
			return fmt.Errorf("append acknowledged [%d, %d], want [%d, %d]", info.FirstOffset, info.LastOffset, first, w.next-1)
		}
		w.acked = len(w.attempted)
		return nil
	}
}

// flushedBatches counts the leading batches of cand wholly below rp.
func flushedBatches(cand [][]byte, rp int64) int {
	n := 0
	for _, b := range cand {
		h, _ := batch.ParseHeader(b)
		if h.LastOffset() >= rp {
			break
		}
		n++
	}
	return n
}

// logFileBytes sums the sizes of the .log files in dir.
func logFileBytes(fs vfs.FS, dir string) int64 {
	names, _ := fs.List(dir)
	var n int64
	for _, name := range names {
		if _, suf, ok := parseSegmentFileName(name); ok && suf == LogFileSuffix {
			if st, err := fs.Stat(filepath.Join(dir, name)); err == nil {
				n += st.Size()
			}
		}
	}
	return n
}

// readBatches reads the whole local log through Read and splits it.
func readBatches(t testing.TB, l *Log, label string) [][]byte {
	t.Helper()
	var out [][]byte
	leo := l.LogEndOffset()
	for off := l.LocalLogStartOffset(); off < leo; {
		v, err := l.Read(off, 4<<10, leo)
		if err != nil {
			t.Fatalf("%s: Read(%d): %v", label, off, err)
		}
		b, err := v.Bytes()
		v.Release()
		if err != nil {
			t.Fatalf("%s: Read(%d) bytes: %v", label, off, err)
		}
		if v.Size == 0 || v.NextOffset <= off {
			t.Fatalf("%s: Read(%d) below the end %d made no progress", label, off, leo)
		}
		for rest := b; len(rest) > 0; {
			first, r, err := batch.Split(rest)
			if err != nil {
				t.Fatalf("%s: Read(%d) returned a partial batch: %v", label, off, err)
			}
			out = append(out, first)
			rest = r
		}
		off = v.NextOffset
	}
	return out
}

// recovered is what checkRecovered found.
type recovered struct {
	first   int // index in cand of the first batch the log holds
	batches int // how many batches of cand survived, from first
	leo     int64
}

// checkRecovered opens the log in fs without the clean-shutdown marker and
// checks every invariant of this file. cand is what may be there, in
// order; the first mustHave batches must be. rp is the recovery point
// handed to OpenLog (what a checkpoint would say).
func checkRecovered(t testing.TB, fs vfs.FS, rp int64, cand [][]byte, mustHave int, label string) recovered {
	t.Helper()
	return checkRecoveredRange(t, fs, rp, 0, cand, 0, mustHave, label)
}

// checkRecoveredRange is checkRecovered for logs whose start moves
// (retention, DeleteRecords): the log must hold a contiguous run
// cand[a:b] with a <= mustFrom and b >= mustTo. lso is the log start
// offset handed to OpenLog.
func checkRecoveredRange(t testing.TB, fs vfs.FS, rp, lso int64, cand [][]byte, mustFrom, mustTo int, label string) recovered {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s: panic: %v\n%s", label, p, debug.Stack())
		}
	}()
	dump := func() string {
		if m, ok := fs.(*vfs.MemFS); ok {
			return "\n" + m.Dump()
		}
		return ""
	}
	before := logFileBytes(fs, crashDir)
	l, err := OpenLog(crashOptionsLSO(fs, rp, lso, false))
	if err != nil {
		t.Fatalf("%s: OpenLog after crash: %v%s", label, err, dump())
	}
	got := readBatches(t, l, label)
	a := 0
	if len(got) > 0 {
		h0, _ := batch.ParseHeader(got[0])
		for a < len(cand) && !bytes.Equal(cand[a][:8], got[0][:8]) {
			a++
		}
		if a == len(cand) {
			l.Close()
			t.Fatalf("%s: the log starts with a batch at %d that was never appended", label, h0.BaseOffset)
		}
	}
	if a > mustFrom && len(got) > 0 {
		l.Close()
		t.Fatalf("%s: the log starts at batch %d, but batches from %d on were never deleted", label, a, mustFrom)
	}
	if a+len(got) > len(cand) {
		l.Close()
		t.Fatalf("%s: log holds %d batches from %d, only %d were appended", label, len(got), a, len(cand))
	}
	for j := range got {
		if !bytes.Equal(got[j], cand[a+j]) {
			l.Close()
			t.Fatalf("%s: batch %d differs from the one appended at its place (%d vs %d bytes)%s", label, j, len(got[j]), len(cand[j]), dump())
		}
		if _, err := batch.Validate(got[j], batch.Limits{SkipTimestampCheck: true}); err != nil {
			l.Close()
			t.Fatalf("%s: batch %d is invalid: %v", label, j, err)
		}
	}
	if mustTo > mustFrom && (len(got) == 0 || a+len(got) < mustTo) {
		l.Close()
		t.Fatalf("%s: only batches [%d, %d) survived, [%d, %d) were flushed (recovery point %d)%s", label, a, a+len(got), mustFrom, mustTo, rp, dump())
	}
	leo := l.LogEndOffset()
	if len(got) > 0 {
		h, _ := batch.ParseHeader(got[len(got)-1])
		leo = h.LastOffset() + 1
	}
	if l.LogEndOffset() != leo {
		l.Close()
		t.Fatalf("%s: log end offset %d, the last batch ends at %d", label, l.LogEndOffset(), leo)
	}

	rep := l.Recovery()
	cut := before - l.Size()
	switch {
	case !rep.Recovered:
		t.Errorf("%s: recovery report says the slow path did not run", label)
	case lso > 0 && rep.TruncatedBytes > cut:
		// Segments below the log start offset go without being "lost".
		t.Errorf("%s: report says %d bytes truncated, the .log files shrank by only %d (%+v)", label, rep.TruncatedBytes, cut, rep)
	case lso == 0 && rep.TruncatedBytes != cut:
		t.Errorf("%s: report says %d bytes truncated, the .log files shrank by %d (%+v)", label, rep.TruncatedBytes, cut, rep)
	case rep.TruncatedBytes > 0 && rep.DroppedFromOffset != leo:
		t.Errorf("%s: report says data dropped from %d, the log now ends at %d", label, rep.DroppedFromOffset, leo)
	case rep.DroppedFromOffset != -1 && rep.DroppedFromOffset != leo:
		// A drop without a cut is a hole's: a rescanned segment that lost
		// its unsynced tail at a batch boundary, the next one's file kept.
		t.Errorf("%s: report says data dropped from %d, the log now ends at %d (%+v)", label, rep.DroppedFromOffset, leo, rep)
	}
	if onDisk := logFileBytes(fs, crashDir); onDisk != l.Size() {
		t.Errorf("%s: .log files hold %d bytes, the log %d: recovery left a cut tail on disk", label, onDisk, l.Size())
	}
	checkIndexesAgree(t, l, got, label)
	checkNoLeftovers(t, fs, crashDir, label)

	// The recovered log takes an append and keeps everything across a
	// clean close and reopen.
	extra := makeCrashBatch(rand.New(rand.NewPCG(uint64(leo), 1)), leo, 2, crashBaseTs)
	want := append(append([][]byte(nil), got...), bytes.Clone(extra))
	if _, err := l.Append(extra, AppendOptions{LeaderEpoch: crashEpoch, AssignOffsets: true}); err != nil {
		l.Close()
		t.Fatalf("%s: append after recovery: %v", label, err)
	}
	startAfter := l.LogStartOffset()
	if err := l.Close(); err != nil {
		t.Fatalf("%s: close after recovery: %v", label, err)
	}
	l2, err := OpenLog(crashOptionsLSO(fs, leo+2, startAfter, true))
	if err != nil {
		t.Fatalf("%s: clean reopen after recovery: %v%s", label, err, dump())
	}
	defer l2.Close()
	if rep := l2.Recovery(); rep.Recovered || rep.TruncatedBytes != 0 || rep.RebuiltIndexes != 0 {
		t.Errorf("%s: clean reopen after a clean close repaired something: %+v", label, rep)
	}
	again := readBatches(t, l2, label+" (clean reopen)")
	if len(again) != len(want) {
		t.Fatalf("%s: clean reopen holds %d batches, want %d", label, len(again), len(want))
	}
	for j := range want {
		if !bytes.Equal(again[j], want[j]) {
			t.Fatalf("%s: clean reopen: batch %d differs", label, j)
		}
	}
	checkIndexesAgree(t, l2, want, label+" (clean reopen)")
	return recovered{first: a, batches: len(got), leo: leo}
}

// checkIndexesAgree compares the indexes, Read, OffsetForTimestamp and
// MaxTimestampOffset with a brute-force scan of the log's batches, which
// the caller already checked are got, in order.
func checkIndexesAgree(t testing.TB, l *Log, got [][]byte, label string) {
	t.Helper()
	hdrs := make([]batch.Header, len(got))
	for i, b := range got {
		hdrs[i], _ = batch.ParseHeader(b)
	}
	// Segments tile the offsets.
	infos := l.Segments()
	for i := 1; i < len(infos); i++ {
		if infos[i].BaseOffset != infos[i-1].NextOffset {
			t.Fatalf("%s: segment %d starts at %d, the previous ends at %d", label, i, infos[i].BaseOffset, infos[i-1].NextOffset)
		}
	}
	// Each segment's index entries point at batch starts at or before the
	// batch they are asked for.
	segs, release := pinSegments(t, l)
	defer release()
	for _, s := range segs {
		starts := map[int32]int64{} // position -> base offset
		type bp struct {
			h   batch.Header
			pos int64
		}
		var in []bp
		for pos := int64(0); pos < s.size.Load(); {
			h, err := readHeader(s.log, pos, s.size.Load())
			if err != nil {
				t.Fatalf("%s: segment %d at %d: %v", label, s.base, pos, err)
			}
			starts[int32(pos)] = h.BaseOffset
			in = append(in, bp{h, pos})
			pos += int64(h.Size())
		}
		for j, b := range in {
			for _, off := range []int64{b.h.BaseOffset, b.h.LastOffset()} {
				eo, p := s.oi.Lookup(off)
				base, ok := starts[p]
				if p == 0 && eo == s.base {
					ok, base = true, eo
				}
				if !ok || base != eo || int64(p) > b.pos || eo > off {
					t.Fatalf("%s: segment %d: offset index says %d is at (%d, pos %d); the batch holding it is at pos %d",
						label, s.base, off, eo, p, b.pos)
				}
			}
			// The time index never points past the first batch reaching a
			// timestamp.
			first := j
			for first > 0 && in[first-1].h.MaxTimestamp >= b.h.MaxTimestamp {
				first--
			}
			if o, ok := s.ti.Lookup(b.h.MaxTimestamp); ok && o > in[first].h.BaseOffset {
				t.Fatalf("%s: segment %d: time index sends ts %d to offset %d, past the batch at %d reaching it",
					label, s.base, b.h.MaxTimestamp, o, in[first].h.BaseOffset)
			}
		}
	}
	leo, start := l.LogEndOffset(), l.LocalLogStartOffset()
	for j, h := range hdrs {
		for _, off := range []int64{h.BaseOffset, h.LastOffset()} {
			if off < start {
				continue // the first batch may straddle the log start
			}
			v, err := l.Read(off, 1, leo)
			if err != nil {
				t.Fatalf("%s: Read(%d): %v", label, off, err)
			}
			b, err := v.Bytes()
			v.Release()
			if err != nil || v.FirstOffset != h.BaseOffset || !bytes.Equal(b, got[j]) {
				t.Fatalf("%s: Read(%d) gave batch at %d (%d bytes, %v), want the batch at %d", label, off, v.FirstOffset, len(b), err, h.BaseOffset)
			}
		}
		// Records carry FirstTimestamp+i, strictly increasing across the log.
		for _, ts := range []int64{h.FirstTimestamp, h.MaxTimestamp, h.FirstTimestamp - 1} {
			wantOff, wantTs := h.BaseOffset+max(ts-h.FirstTimestamp, 0), max(ts, h.FirstTimestamp)
			if (j > 0 && ts <= hdrs[j-1].MaxTimestamp) || h.BaseOffset < start {
				continue // answered by the previous batch, or below the start
			}
			off, rts, ok, err := l.OffsetForTimestamp(ts)
			if err != nil || !ok || off != wantOff || rts != wantTs {
				t.Fatalf("%s: OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d", label, ts, off, rts, ok, err, wantOff, wantTs)
			}
		}
	}
	if len(hdrs) > 0 {
		h := hdrs[len(hdrs)-1]
		if _, _, ok, err := l.OffsetForTimestamp(h.MaxTimestamp + 1); ok || err != nil {
			t.Fatalf("%s: OffsetForTimestamp past the newest record = %v, %v", label, ok, err)
		}
		if off, ts := l.MaxTimestampOffset(); off != h.LastOffset() || ts != h.MaxTimestamp {
			t.Fatalf("%s: MaxTimestampOffset = %d, %d; want %d, %d", label, off, ts, h.LastOffset(), h.MaxTimestamp)
		}
	}
}

// checkNoLeftovers fails if an interrupted rename's file survived.
func checkNoLeftovers(t testing.TB, fs vfs.FS, dir, label string) {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatalf("%s: list: %v", label, err)
	}
	for _, n := range names {
		for _, suf := range []string{TmpFileSuffix, DeletedFileSuffix, CleanedFileSuffix, SwapFileSuffix} {
			if strings.HasSuffix(n, suf) {
				t.Fatalf("%s: leftover %s survived recovery (dir: %v)", label, n, names)
			}
		}
	}
}

// syncPoint is the file system as a sync was being issued, with what the
// workload had attempted and what the log had declared flushed by then.
type syncPoint struct {
	fs        *vfs.MemFS
	ev        vfs.SyncEvent
	attempted int
	rp        int64
}

// runRecorded runs steps of w on a fresh log over mem, capturing a
// syncPoint at every sync, plus a last one after a clean Close.
func runRecorded(t testing.TB, mem *vfs.MemFS, w *crashWorkload, steps int) []syncPoint {
	t.Helper()
	var cur *Log
	var points []syncPoint
	mem.SetSyncHook(func(ev vfs.SyncEvent) {
		rp := int64(0)
		if cur != nil {
			rp = cur.RecoveryPoint()
		}
		points = append(points, syncPoint{fs: mem.Clone(), ev: ev, attempted: len(w.attempted), rp: rp})
	})
	defer mem.SetSyncHook(nil)
	l, err := OpenLog(crashOptions(mem, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	cur = l
	for range steps {
		if err := w.step(l); err != nil {
			t.Fatalf("workload: %v", err)
		}
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mem.SetSyncHook(nil)
	points = append(points, syncPoint{fs: mem.Clone(), ev: vfs.SyncEvent{N: mem.SyncCount() + 1, Path: "(after Close)"}, attempted: len(w.attempted), rp: leo})
	return points
}

// sample returns up to k indexes of n, always including the first and the
// last, the rest spread evenly.
func sample(n, k int) []int {
	if n <= k {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, k)
	for i := range k {
		out = append(out, i*(n-1)/(k-1))
	}
	return out
}

func TestCrashSweepRecoversAPrefixAtEverySync(t *testing.T) {
	steps, maxPoints, seeds := 150, 40, []uint64{1, 2}
	if testing.Short() {
		steps, maxPoints, seeds = 80, 15, []uint64{1}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			mem := newCrashFS(t)
			w := newCrashWorkload(seed)
			points := runRecorded(t, mem, w, steps)
			if len(points) < 20 {
				t.Fatalf("only %d syncs: the workload does not exercise rolls and flushes", len(points))
			}
			rng := rand.New(rand.NewPCG(seed, 99))
			var lost, torn int
			for _, i := range sample(len(points), maxPoints) {
				p := points[i]
				cand := w.attempted[:p.attempted]
				must := flushedBatches(cand, p.rp)
				// Nothing, a random part, or all of the unsynced data survives.
				for k, pct := range []int{[]int{0, 100}[i%2], 1 + rng.IntN(99)} {
					// A checkpoint may lag the recovery point; without one
					// recovery starts from 0 and must rescan everything.
					rp := p.rp
					if k == 1 && rng.IntN(2) == 0 {
						rp = 0
					}
					// Every other random crash reorders page write-back: a
					// later page may land while an earlier one is lost.
					crash, model := p.fs.CrashClone, "prefix"
					if k == 1 && i%2 == 1 {
						crash, model = p.fs.CrashCloneReordered, "pages"
					}
					label := fmt.Sprintf("seed=%d sync=%d (%s dir=%v) keep=%d%% %s rp=%d", seed, p.ev.N, p.ev.Path, p.ev.Dir, pct, model, rp)
					r := checkRecovered(t, crash(pct, rng), rp, cand, must, label)
					if r.batches < len(cand) {
						lost++
					}
					if i == len(points)-1 && r.batches != len(cand) {
						t.Fatalf("%s: a crash after Close lost batches: %d of %d", label, r.batches, len(cand))
					}
					if r.batches > w.acked && i < len(points)-1 {
						torn++
					}
				}
			}
			if lost == 0 {
				t.Fatal("no crash lost anything: the sweep does not reach unsynced data")
			}
			t.Logf("%d sync points, %d appended batches, %d crashes lost unflushed batches", len(points), len(w.attempted), lost)
		})
	}
}

// Retention and DeleteRecords move the start of the log: segments are
// renamed to .deleted, synced away and unlinked. A crash at any sync must
// leave a contiguous run of the appended batches that reaches back at
// least to the log start offset of the moment (whether or not the
// checkpoint of it survived) and forward to the recovery point, with no
// hole where an older segment came back beside a deleted newer one, and
// no .deleted file left.
func TestCrashSweepWithRetention(t *testing.T) {
	steps, maxPoints := 200, 30
	if testing.Short() {
		steps, maxPoints = 160, 12
	}
	mem := newCrashFS(t)
	w := newCrashWorkload(31)
	w.retention = true
	var cur *Log
	type point struct {
		fs        *vfs.MemFS
		ev        vfs.SyncEvent
		attempted int
		rp, lso   int64
	}
	var points []point
	mem.SetSyncHook(func(ev vfs.SyncEvent) {
		p := point{fs: mem.Clone(), ev: ev, attempted: len(w.attempted)}
		if cur != nil {
			p.rp, p.lso = cur.RecoveryPoint(), cur.LogStartOffset()
		}
		points = append(points, p)
	})
	l, err := OpenLog(crashOptions(mem, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	cur = l
	deleted := 0
	for range steps {
		before := l.NumSegments()
		if err := w.step(l); err != nil {
			t.Fatalf("workload: %v", err)
		}
		if l.NumSegments() < before {
			deleted++
		}
	}
	mem.SetSyncHook(nil)
	points = append(points, point{fs: mem.Clone(), ev: vfs.SyncEvent{Path: "(end)"}, attempted: len(w.attempted), rp: l.RecoveryPoint(), lso: l.LogStartOffset()})
	l.Close()
	t.Logf("%d sync points, %d batches, %d deletions, log start %d", len(points), len(w.attempted), deleted, l.LogStartOffset())
	if deleted < 3 || l.LogStartOffset() == 0 {
		t.Fatalf("retention deleted segments %d times, log start %d: the sweep does not exercise deletion", deleted, l.LogStartOffset())
	}
	rng := rand.New(rand.NewPCG(31, 1))
	started, resurrected := 0, 0
	for n, i := range sample(len(points), maxPoints) {
		p := points[i]
		cand := w.attempted[:p.attempted]
		mustFrom := 0
		for mustFrom < len(cand) {
			if h, _ := batch.ParseHeader(cand[mustFrom]); h.LastOffset() >= p.lso {
				break
			}
			mustFrom++
		}
		mustTo := flushedBatches(cand, p.rp)
		pct := []int{0, 100, rng.IntN(101)}[n%3]
		for _, lso := range []int64{p.lso, 0} {
			label := fmt.Sprintf("retention sync=%d (%s dir=%v) keep=%d%% rp=%d lso=%d", p.ev.N, p.ev.Path, p.ev.Dir, pct, p.rp, lso)
			crash := p.fs.CrashClone
			if n%2 == 1 {
				crash = p.fs.CrashCloneReordered
				label += " pages"
			}
			r := checkRecoveredRange(t, crash(pct, rand.New(rand.NewPCG(uint64(i), 3))), p.rp, lso, cand, mustFrom, mustTo, label)
			if lso > 0 && r.batches > 0 && r.first != mustFrom {
				t.Fatalf("%s: with the checkpointed log start the log starts at batch %d, want %d", label, r.first, mustFrom)
			}
			if r.first > 0 {
				started++
			}
			if lso == 0 && r.first < mustFrom {
				resurrected++
			}
		}
	}
	t.Logf("%d crashes recovered a log not starting at 0; %d without the checkpoint brought back deleted batches", started, resurrected)
	if started == 0 {
		t.Fatal("no recovered log started after offset 0")
	}
}

// faultKind is one class of injected failure for the error sweep.
type faultKind struct {
	name string
	rule func() *errfs.Rule // a rule matching the operations, without an action
	act  func(*errfs.Rule) *errfs.Rule
}

func crashFaultKinds() []faultKind {
	eio := func(r *errfs.Rule) *errfs.Rule { return r.Err(syscall.EIO) }
	return []faultKind{
		{"write=EIO", func() *errfs.Rule { return errfs.On(errfs.OpWrite, errfs.OpWriteAt) }, eio},
		{"write=ENOSPC", func() *errfs.Rule { return errfs.On(errfs.OpWrite, errfs.OpWriteAt) },
			func(r *errfs.Rule) *errfs.Rule { return r.Err(syscall.ENOSPC) }},
		{"write=short", func() *errfs.Rule { return errfs.On(errfs.OpWrite, errfs.OpWriteAt) },
			func(r *errfs.Rule) *errfs.Rule { return r.Short(-1, syscall.ENOSPC) }},
		{"sync=EIO", func() *errfs.Rule { return errfs.On(errfs.OpSync) }, eio},
		{"syncdir=EIO", func() *errfs.Rule { return errfs.On(errfs.OpSyncDir) }, eio},
		{"rename=EIO", func() *errfs.Rule { return errfs.On(errfs.OpRename) }, eio},
		{"create=ENOSPC", func() *errfs.Rule { return errfs.On(errfs.OpCreate) },
			func(r *errfs.Rule) *errfs.Rule { return r.Err(syscall.ENOSPC) }},
		{"truncate=EIO", func() *errfs.Rule { return errfs.On(errfs.OpTruncate) }, eio},
		{"mmap=ENOMEM", func() *errfs.Rule { return errfs.On(errfs.OpMmap) },
			func(r *errfs.Rule) *errfs.Rule { return r.Err(syscall.ENOMEM) }},
	}
}

// faultRun is one workload run against a file system failing one call.
type faultRun struct {
	w       *crashWorkload
	log     *Log  // nil if OpenLog failed
	err     error // the first error returned by OpenLog, a step or Close
	stepErr bool  // err came from a step after OpenLog
	closed  bool
	rp      int64 // the log's recovery point after the failure
}

func runFaulted(t testing.TB, fs vfs.FS, seed uint64, steps int) (r faultRun) {
	t.Helper()
	r = faultRun{w: newCrashWorkload(seed)}
	defer func() {
		// A panic on an I/O error is a failure of this run, reported with
		// its stack, not the end of the whole test binary.
		if p := recover(); p != nil {
			t.Fatalf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	l, err := OpenLog(crashOptions(fs, 0, false))
	if err != nil {
		r.err = err
		return r
	}
	r.log = l
	for range steps {
		if err := r.w.step(l); err != nil {
			r.err, r.stepErr = err, true
			break
		}
	}
	r.rp = l.RecoveryPoint()
	if r.err == nil {
		r.closed = true
		r.err = l.Close()
		r.stepErr = r.err != nil
	}
	return r
}

func TestCrashErrorSweepLatchesAndKeepsAcknowledged(t *testing.T) {
	const seed = 11
	steps, perKind := 70, 8
	if testing.Short() {
		steps, perKind = 40, 6
	}
	for _, kind := range crashFaultKinds() {
		t.Run(kind.name, func(t *testing.T) {
			count := kind.rule()
			if r := runFaulted(t, errfs.Wrap(newCrashFS(t), count), seed, steps); r.err != nil {
				t.Fatalf("fault-free run failed: %v", r.err)
			}
			if count.Matched() == 0 {
				t.Skip("the workload never makes this call")
			}
			for _, n := range sample(count.Matched(), perKind) {
				n++
				label := fmt.Sprintf("%s nth=%d/%d", kind.name, n, count.Matched())
				mem := newCrashFS(t)
				rule := kind.act(kind.rule().Nth(n))
				r := runFaulted(t, errfs.Wrap(mem, rule), seed, steps)
				if rule.Fired() != 1 {
					t.Fatalf("%s: fault fired %d times", label, rule.Fired())
				}
				checkFaultOutcome(t, mem, r, label)
			}
		})
	}
}

// checkFaultOutcome checks a run that suffered one injected fault: the
// failure surfaced and latched, nothing partial is visible, and both a
// restart and a power loss recover everything they must.
func checkFaultOutcome(t *testing.T, mem *vfs.MemFS, r faultRun, label string) {
	t.Helper()
	w := r.w
	if r.err == nil {
		// Only best-effort calls may swallow a fault (removing a stale
		// file, cutting back after an earlier failure): the run must then
		// be indistinguishable from a fault-free one.
		if w.acked != len(w.attempted) {
			t.Fatalf("%s: no error surfaced but only %d of %d batches were acknowledged", label, w.acked, len(w.attempted))
		}
	} else if r.stepErr && !r.closed && errors.Is(r.err, ErrLogDirFull) {
		// Out of space, cut back: refused, not latched, and the next
		// append (the fault is gone) goes through.
		l := r.log
		if l.Failed() {
			t.Fatalf("%s: a full disk latched the log: %v", label, r.err)
		}
		if got := readBatches(t, l, label+" (full disk)"); len(got) != w.acked {
			t.Fatalf("%s: the log shows %d batches after ENOSPC, %d were acknowledged", label, len(got), w.acked)
		}
		b := makeCrashBatch(w.rng, l.LogEndOffset(), 1, w.ts)
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: crashEpoch, AssignOffsets: true}); err != nil {
			t.Fatalf("%s: append once space is back: %v", label, err)
		}
		w.attempted = append(w.attempted[:w.acked], b)
		w.acked++
	} else if r.stepErr && !r.closed {
		l := r.log
		if !errors.Is(r.err, ErrLogFailed) {
			t.Fatalf("%s: failure surfaced as %v, want ErrLogFailed", label, r.err)
		}
		if !l.Failed() {
			t.Fatalf("%s: log did not latch", label)
		}
		if _, err := l.Append(makeCrashBatch(w.rng, w.next, 1, w.ts), AppendOptions{LeaderEpoch: crashEpoch, AssignOffsets: true}); !errors.Is(err, ErrLogFailed) {
			t.Fatalf("%s: append after the failure: %v, want ErrLogFailed", label, err)
		}
		if err := l.Flush(); !errors.Is(err, ErrLogFailed) {
			t.Fatalf("%s: flush after the failure: %v, want ErrLogFailed", label, err)
		}
		// Readers see exactly the acknowledged batches.
		got := readBatches(t, l, label+" (failed log)")
		if len(got) != w.acked {
			t.Fatalf("%s: the failed log shows %d batches, %d were acknowledged (failure: %v)", label, len(got), w.acked, r.err)
		}
		for j := range got {
			if !bytes.Equal(got[j], w.attempted[j]) {
				t.Fatalf("%s: the failed log shows a different batch %d", label, j)
			}
		}
	}
	if r.log != nil && !r.closed {
		r.log.Close() // may fail: the log is failed
	}
	// A restart keeps the page cache: everything acknowledged is there.
	// A power loss keeps what was flushed.
	checkRecovered(t, mem.Clone(), r.rp, w.attempted, w.acked, label+" restart")
	checkRecovered(t, mem.CrashClone(0, rand.New(rand.NewPCG(1, 2))), 0, w.attempted, flushedBatches(w.attempted, r.rp), label+" power loss")
}

// Failures that persist (a dead device) must latch too and recover like a
// single failure; a full disk refuses appends without latching, and they
// resume once it is gone.
func TestCrashPersistentFaultsLatch(t *testing.T) {
	for _, kind := range crashFaultKinds() {
		for _, from := range []int{1, 5, 20} {
			label := fmt.Sprintf("%s from=%d", kind.name, from)
			mem := newCrashFS(t)
			rule := kind.act(kind.rule().From(from))
			r := runFaulted(t, errfs.Wrap(mem, rule), 21, 50)
			if rule.Fired() == 0 {
				continue
			}
			rule.Disable()
			checkFaultOutcome(t, mem, r, label)
		}
	}
}

// crashFinished returns a fully flushed, closed log of n steps on a fresh
// MemFS, the workload, and the segments' files.
func crashFinished(t *testing.T, seed uint64, steps int) (*vfs.MemFS, *crashWorkload, []SegmentInfo) {
	t.Helper()
	mem := newCrashFS(t)
	w := newCrashWorkload(seed)
	l, err := OpenLog(crashOptions(mem, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	for range steps {
		if err := w.step(l); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) < 4 {
		t.Fatalf("only %d segments", len(segs))
	}
	return mem, w, segs
}

// flipByte inverts one byte of a file.
func flipByte(t *testing.T, fs vfs.FS, name string, pos int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// dirContents returns the .log files of dir by name (indexes are derived
// data and may be rebuilt freely).
func dirContents(t *testing.T, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		if !strings.HasSuffix(n, LogFileSuffix) {
			continue
		}
		f, err := fs.Open(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		b := make([]byte, st.Size())
		f.ReadAt(b, 0)
		f.Close()
		out[n] = string(b)
	}
	return out
}

func checkUnchanged(t *testing.T, before, after map[string]string) {
	t.Helper()
	for n, b := range before {
		if a, ok := after[n]; !ok || a != b {
			t.Errorf("OpenLog refused the log with ErrCorruption but changed %s (%d -> %d bytes)", n, len(b), len(a))
		}
	}
}

// batchIndexAt returns the index in w.attempted of the batch holding off.
func batchIndexAt(w *crashWorkload, off int64) int {
	for i, b := range w.attempted {
		h, _ := batch.ParseHeader(b)
		if h.LastOffset() >= off {
			return i
		}
	}
	return len(w.attempted)
}

func TestCrashDamagedTailIsTruncatedAndReported(t *testing.T) {
	damage := map[string]func(t *testing.T, fs vfs.FS, name string, size int64){
		"flip-last-byte": func(t *testing.T, fs vfs.FS, name string, size int64) { flipByte(t, fs, name, size-1) },
		"flip-header":    nil, // the length field of the last batch, below
		"cut-mid-batch": func(t *testing.T, fs vfs.FS, name string, size int64) {
			f, _ := fs.OpenReadWrite(name)
			defer f.Close()
			if err := f.Truncate(size - 7); err != nil {
				t.Fatal(err)
			}
		},
		"zero-tail": func(t *testing.T, fs vfs.FS, name string, size int64) {
			f, _ := fs.OpenReadWrite(name)
			defer f.Close()
			if err := f.Truncate(size + 4096); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			mem, w, segs := crashFinished(t, 5, 120)
			last := segs[len(segs)-1]
			lastBatch := w.attempted[len(w.attempted)-1]
			h, _ := batch.ParseHeader(lastBatch)
			if fn == nil {
				flipByte(t, mem, last.LogPath, last.Size-int64(len(lastBatch))+9)
			} else {
				fn(t, mem, last.LogPath, last.Size)
			}
			// The damaged batch was never flushed: the checkpoint is below it.
			keep := len(w.attempted) - 1
			if name == "zero-tail" {
				keep++ // zeros after the last batch, which is intact
			}
			label := "tail " + name
			r := checkRecovered(t, mem, h.BaseOffset, w.attempted, keep, label)
			if r.batches != keep {
				t.Fatalf("%s: %d batches survived, want %d", label, r.batches, keep)
			}
		})
	}
}

func TestCrashMidLogDamage(t *testing.T) {
	mem, w, segs := crashFinished(t, 6, 150)
	victim := segs[1] // sealed, with later segments
	vi := batchIndexAt(w, victim.BaseOffset)
	vb := w.attempted[vi+1] // the second batch of the segment
	vh, _ := batch.ParseHeader(vb)
	if vh.LastOffset() >= victim.NextOffset {
		t.Fatal("segment 1 holds a single batch")
	}
	pos := int64(len(w.attempted[vi])) + int64(len(vb))/2
	leo := segs[len(segs)-1].NextOffset

	t.Run("no-checkpoint-truncates", func(t *testing.T) {
		fs := mem.Clone()
		flipByte(t, fs, victim.LogPath, pos)
		// Without a checkpoint nothing is known flushed: recovery keeps
		// what precedes the damage, drops the rest, and says so.
		r := checkRecovered(t, fs, 0, w.attempted, vi+1, "mid-log rp=0")
		if r.batches != vi+1 {
			t.Fatalf("%d batches survived, want %d", r.batches, vi+1)
		}
	})
	t.Run("flushed-damage-is-corruption-or-kept", func(t *testing.T) {
		fs := mem.Clone()
		flipByte(t, fs, victim.LogPath, pos)
		// Below the recovery point damage cannot be a torn write: OpenLog
		// may refuse with ErrCorruption, or (trusting sealed segments
		// below the checkpoint, as Kafka does) open without noticing, but
		// it must never quietly drop flushed data.
		before := dirContents(t, fs, crashDir)
		l, err := OpenLog(crashOptions(fs, leo, false))
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("OpenLog: %v, want ErrCorruption", err)
			}
			checkUnchanged(t, before, dirContents(t, fs, crashDir))
			return
		}
		defer l.Close()
		if l.LogEndOffset() != leo || l.Recovery().TruncatedBytes != 0 {
			t.Fatalf("flushed data dropped: end %d (want %d), report %+v", l.LogEndOffset(), leo, l.Recovery())
		}
	})
	t.Run("active-segment-damage-is-corruption", func(t *testing.T) {
		fs := mem.Clone()
		act := segs[len(segs)-1]
		ai := batchIndexAt(w, act.BaseOffset)
		if ai >= len(w.attempted)-1 {
			t.Skip("the active segment holds a single batch")
		}
		flipByte(t, fs, act.LogPath, int64(len(w.attempted[ai]))/2)
		before := dirContents(t, fs, crashDir)
		_, err := OpenLog(crashOptions(fs, leo, false))
		if !errors.Is(err, ErrCorruption) {
			t.Fatalf("OpenLog with damage below the recovery point in the rescanned segment: %v, want ErrCorruption", err)
		}
		// Refusing must not repair: a retry (or an operator's tool) has to
		// find the flushed data as it was, not quietly cut.
		checkUnchanged(t, before, dirContents(t, fs, crashDir))
	})
}

// Random byte flips anywhere in a segment's files never panic, and index
// damage never loses data or misdirects a read.
func TestCrashRandomDamageNeverPanics(t *testing.T) {
	iters := 60
	if testing.Short() {
		iters = 30
	}
	mem, w, segs := crashFinished(t, 7, 120)
	leo := segs[len(segs)-1].NextOffset
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range iters {
		s := segs[rng.IntN(len(segs))]
		paths := []string{s.LogPath, s.IndexPath, s.TimeIndexPath}
		p := paths[rng.IntN(3)]
		fs := mem.Clone()
		st, err := fs.Stat(p)
		if err != nil || st.Size() == 0 {
			continue
		}
		pos := rng.Int64N(st.Size())
		flipByte(t, fs, p, pos)
		rp := []int64{0, leo}[rng.IntN(2)]
		clean := rng.IntN(2) == 0
		label := fmt.Sprintf("iter %d: %s byte %d rp=%d clean=%v", i, filepath.Base(p), pos, rp, clean)
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s: panic: %v", label, r)
				}
			}()
			l, err := OpenLog(crashOptions(fs, rp, clean))
			if err != nil {
				return // refusing damaged data is allowed
			}
			defer l.Close()
			if p == s.LogPath {
				// Reading damaged data may fail or return the damaged
				// bytes, but never panics.
				for off := l.LocalLogStartOffset(); off < l.LogEndOffset(); off++ {
					v, err := l.Read(off, 1<<20, l.LogEndOffset())
					if err == nil {
						v.Bytes()
						v.Release()
					}
					l.OffsetForTimestamp(crashBaseTs - 1_000_000 + off)
				}
				return
			}
			// Index files are derived data: the log must still hold every
			// batch. A rescan (no checkpoint, no clean shutdown) rebuilds
			// them, so they must then agree with the log; trusted indexes
			// are only sanity-checked (as in Kafka), so a flipped entry in
			// the middle can go unnoticed there.
			got := readBatches(t, l, label)
			if len(got) != len(w.attempted) {
				t.Fatalf("%s: index damage lost batches: %d of %d", label, len(got), len(w.attempted))
			}
			if rp == 0 && !clean {
				checkIndexesAgree(t, l, got, label)
			}
		}()
	}
}

// crashManagerOptions opens the data directory of fs with crash configs.
func crashManagerOptions(fs vfs.FS) ManagerOptions {
	return ManagerOptions{
		Dir: crashDataDir, FS: fs, Default: crashConfig(),
		Now:              func() time.Time { return time.UnixMilli(crashBaseTs) },
		ProducerSnapshot: func(string, int32) func(int64) ([]byte, error) { return crashSnapshot },
		// One open sealed segment: the sweeps also close and reopen
		// segment files (filecache.go) all the time.
		MaxOpenSealedSegments: 1,
	}
}

// managerPoint is the file system as a sync was being issued during a
// Manager workload over several partitions.
type managerPoint struct {
	fs        *vfs.MemFS
	ev        vfs.SyncEvent
	attempted []int
	rp        []int64
}

// The Manager adds the partition directories, the checkpoints and the
// clean-shutdown marker to what a crash can catch half done. The workload
// runs in two sessions (the second opens after a clean shutdown, so the
// marker must be gone before anything new is written) over three
// partitions, checkpointing now and then; a crash at any sync must reopen
// with every partition holding a prefix of its appends, and everything
// flushed.
func TestCrashManagerSweep(t *testing.T) {
	const parts = 3
	steps, maxPoints := 120, 18
	if testing.Short() {
		steps, maxPoints = 60, 8
	}
	mem := newCrashFS(t)
	ws := make([]*crashWorkload, parts)
	for i := range ws {
		ws[i] = newCrashWorkload(uint64(40 + i))
	}
	var (
		mu     sync.Mutex // guards logs, floor and points: recovery syncs from several goroutines
		logs   = make([]*Log, parts)
		floor  = make([]int64, parts) // offsets known durable from an earlier session
		points []managerPoint
	)
	mem.SetSyncHook(func(ev vfs.SyncEvent) {
		c := mem.Clone()
		mu.Lock()
		defer mu.Unlock()
		p := managerPoint{fs: c, ev: ev, attempted: make([]int, parts), rp: make([]int64, parts)}
		for i := range parts {
			p.attempted[i] = len(ws[i].attempted)
			p.rp[i] = floor[i]
			if logs[i] != nil {
				p.rp[i] = max(p.rp[i], logs[i].RecoveryPoint())
			}
		}
		points = append(points, p)
	})
	defer mem.SetSyncHook(nil)
	rng := rand.New(rand.NewPCG(4, 4))
	for session := range 2 {
		m, err := OpenManager(crashManagerOptions(mem))
		if err != nil {
			t.Fatal(err)
		}
		for i := range parts {
			l, err := m.GetOrCreate("t", int32(i), crashConfig())
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			logs[i] = l
			mu.Unlock()
		}
		for range steps {
			i := rng.IntN(parts)
			if rng.IntN(25) == 0 {
				if err := m.Checkpoint(); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := ws[i].step(logs[i]); err != nil {
				t.Fatalf("session %d: %v", session, err)
			}
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for i := range parts {
			floor[i] = ws[i].next
			logs[i] = nil
		}
		mu.Unlock()
	}
	mem.SetSyncHook(nil)
	points = append(points, managerPoint{fs: mem.Clone(), ev: vfs.SyncEvent{Path: "(after Close)"},
		attempted: []int{len(ws[0].attempted), len(ws[1].attempted), len(ws[2].attempted)}, rp: floor})

	for n, i := range sample(len(points), maxPoints) {
		p := points[i]
		pct := []int{0, 100, rng.IntN(101)}[n%3]
		label := fmt.Sprintf("manager sync=%d (%s dir=%v) keep=%d%%", p.ev.N, p.ev.Path, p.ev.Dir, pct)
		fs := p.fs.CrashClone(pct, rng)
		if n%2 == 1 {
			fs = p.fs.CrashCloneReordered(pct, rng)
			label += " pages"
		}
		m, err := OpenManager(crashManagerOptions(fs))
		if err != nil {
			t.Fatalf("%s: OpenManager: %v\n%s", label, err, fs.Dump())
		}
		counts := make([]int, parts)
		for j := range parts {
			cand := ws[j].attempted[:p.attempted[j]]
			must := flushedBatches(cand, p.rp[j])
			l, ok := m.Get("t", int32(j))
			if !ok {
				if must > 0 {
					t.Fatalf("%s: partition %d vanished with %d flushed batches\n%s", label, j, must, fs.Dump())
				}
				continue
			}
			got := readBatches(t, l, label)
			if len(got) < must || len(got) > len(cand) {
				t.Fatalf("%s: partition %d holds %d batches, want %d..%d\n%s", label, j, len(got), must, len(cand), fs.Dump())
			}
			for k := range got {
				if !bytes.Equal(got[k], cand[k]) {
					t.Fatalf("%s: partition %d batch %d differs", label, j, k)
				}
			}
			checkIndexesAgree(t, l, got, label)
			checkNoLeftovers(t, fs, l.Dir(), label)
			counts[j] = len(got)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("%s: Close: %v", label, err)
		}
		if _, err := fs.Stat(filepath.Join(crashDataDir, CleanShutdownFile)); err != nil {
			t.Fatalf("%s: no clean-shutdown marker after Close: %v", label, err)
		}
		// The clean reopen trusts everything and must find the same logs.
		m, err = OpenManager(crashManagerOptions(fs))
		if err != nil {
			t.Fatalf("%s: clean reopen: %v", label, err)
		}
		for j := range parts {
			if l, ok := m.Get("t", int32(j)); ok {
				if got := readBatches(t, l, label); len(got) != counts[j] {
					t.Fatalf("%s: clean reopen: partition %d holds %d batches, had %d", label, j, len(got), counts[j])
				}
			} else if counts[j] > 0 {
				t.Fatalf("%s: clean reopen lost partition %d", label, j)
			}
		}
		if err := m.Close(); err != nil {
			t.Fatalf("%s: Close after clean reopen: %v", label, err)
		}
	}
	t.Logf("%d sync points over two sessions", len(points))
}

// crashScenario is the state of one datadriven script in testdata/crash.
type crashScenario struct {
	mem  *vfs.MemFS
	inj  *switchInjector
	log  *Log
	w    *crashWorkload
	rng  *rand.Rand
	want [][]byte // every batch handed to Append, as stored
}

// switchInjector lets a script install and remove a fault rule.
type switchInjector struct {
	mu   sync.Mutex // guards rule
	rule *errfs.Rule
}

func (s *switchInjector) Inject(c errfs.Call) *errfs.Fault {
	s.mu.Lock()
	r := s.rule
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.Inject(c)
}

var crashOps = map[string][]errfs.Op{
	"write": {errfs.OpWrite, errfs.OpWriteAt}, "sync": {errfs.OpSync}, "syncdir": {errfs.OpSyncDir},
	"rename": {errfs.OpRename}, "create": {errfs.OpCreate}, "truncate": {errfs.OpTruncate},
	"mmap": {errfs.OpMmap}, "remove": {errfs.OpRemove},
}

// errName renders an error as the sentinels it matches, so traces do not
// depend on message wording.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var names []string
	for _, s := range []struct {
		err  error
		name string
	}{
		{ErrLogFailed, "ErrLogFailed"}, {ErrLogDirFull, "ErrLogDirFull"}, {ErrCorruption, "ErrCorruption"}, {ErrClosed, "ErrClosed"},
		{ErrOffsetOutOfRange, "ErrOffsetOutOfRange"}, {syscall.EIO, "EIO"}, {syscall.ENOSPC, "ENOSPC"},
	} {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 {
		return "error: " + err.Error()
	}
	return "error: " + strings.Join(names, " ")
}

// TestCrashScenarios runs the scripts in testdata/crash. Commands:
//
//	open [rp=<offset>] [clean]      open the log (no clean flag: recovery runs)
//	append [n=<batches>]            append n batches of 1-4 random records, one call each
//	flush | roll | close
//	inject op=<write|sync|...> [glob=<pattern>] [nth=<n>|from=<n>] err=<eio|enospc|short>
//	inject off
//	crash keep=<pct> [seed=<n>]     power loss: the log object is abandoned
//	flip seg=<i> pos=<n>            invert one byte of segment i's .log (pos<0: from the end)
//	read                            the batches the log serves, checked against what was appended
//	ls                              the partition directory
//
// Regenerate the expected traces with -rewrite.
func TestCrashScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/crash", func(t *testing.T, path string) {
		sc := &crashScenario{mem: newCrashFS(t), inj: &switchInjector{}, w: newCrashWorkload(77), rng: rand.New(rand.NewPCG(77, 1))}
		defer func() {
			if sc.log != nil {
				sc.log.Close()
			}
		}()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return sc.run(t, d)
		})
	})
}

func (sc *crashScenario) fs() vfs.FS { return errfs.Wrap(sc.mem, sc.inj) }

func (sc *crashScenario) run(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	switch d.Cmd {
	case "append", "flush", "roll", "close", "read":
		if sc.log == nil {
			return "no open log"
		}
	}
	switch d.Cmd {
	case "open":
		var rp int64
		d.MaybeScanArgs(t, "rp", &rp)
		if sc.log != nil {
			t.Fatal("open: a log is already open")
		}
		l, err := OpenLog(crashOptions(sc.fs(), rp, d.HasArg("clean")))
		if err != nil {
			return errName(err)
		}
		sc.log = l
		r := l.Recovery()
		fmt.Fprintf(&out, "recovered=%v truncated=%d dropped-from=%d dropped-segments=%d rebuilt=%d leftovers=%d\n",
			r.Recovered, r.TruncatedBytes, r.DroppedFromOffset, r.DroppedSegments, r.RebuiltIndexes, r.RemovedLeftovers)
		fmt.Fprintf(&out, "log-end=%d recovery-point=%d segments=%d", l.LogEndOffset(), l.RecoveryPoint(), l.NumSegments())
		// What the log holds from here on is what was appended up to its end.
		sc.w.next = l.LogEndOffset()
		sc.want = sc.want[:flushedBatches(sc.want, sc.w.next)]
		return out.String()
	case "append":
		n := 1
		d.MaybeScanArgs(t, "n", &n)
		for range n {
			b := sc.w.nextBatch()
			sc.want = append(sc.want, bytes.Clone(b))
			info, err := sc.log.Append(b, AppendOptions{LeaderEpoch: crashEpoch, AssignOffsets: true})
			if err != nil {
				// The log is failed: no later batch reuses these offsets
				// until a reopen resets the workload to the log end.
				sc.want = sc.want[:len(sc.want)-1]
				if errors.Is(err, ErrLogDirFull) {
					// Refused, not latched: the next append takes
					// the offsets this one would have had.
					sc.w.next = sc.log.LogEndOffset()
				}
				fmt.Fprintf(&out, "%s\n", errName(err))
				continue
			}
			fmt.Fprintf(&out, "[%d, %d]\n", info.FirstOffset, info.LastOffset)
		}
		return strings.TrimSuffix(out.String(), "\n")
	case "flush", "roll", "close":
		var err error
		switch d.Cmd {
		case "flush":
			err = sc.log.Flush()
		case "roll":
			err = sc.log.Roll()
		default:
			err = sc.log.Close()
			sc.log = nil
			return errName(err)
		}
		return fmt.Sprintf("%s recovery-point=%d", errName(err), sc.log.RecoveryPoint())
	case "inject":
		sc.inj.mu.Lock()
		defer sc.inj.mu.Unlock()
		if d.HasArg("off") {
			sc.inj.rule = nil
			return "ok"
		}
		var op, glob, kind string
		var nth, from int
		d.ScanArgs(t, "op", &op)
		d.MaybeScanArgs(t, "glob", &glob)
		d.MaybeScanArgs(t, "nth", &nth)
		d.MaybeScanArgs(t, "from", &from)
		d.ScanArgs(t, "err", &kind)
		ops, ok := crashOps[op]
		if !ok {
			t.Fatalf("unknown op %q", op)
		}
		r := errfs.On(ops...).Glob(glob).Nth(nth).From(from)
		switch kind {
		case "eio":
			r.Err(syscall.EIO)
		case "enospc":
			r.Err(syscall.ENOSPC)
		case "short":
			r.Short(-1, syscall.ENOSPC)
		default:
			t.Fatalf("unknown err %q", kind)
		}
		sc.inj.rule = r
		return "ok"
	case "crash":
		var keep int
		var seed uint64 = 1
		d.ScanArgs(t, "keep", &keep)
		d.MaybeScanArgs(t, "seed", &seed)
		sc.mem = sc.mem.CrashClone(keep, rand.New(rand.NewPCG(seed, seed)))
		sc.log = nil // abandoned with the old file system, like a dead process
		return "ok"
	case "flip":
		var seg int
		var pos int64
		d.ScanArgs(t, "seg", &seg)
		d.ScanArgs(t, "pos", &pos)
		names := sc.segmentLogs(t)
		if seg >= len(names) {
			t.Fatalf("no segment %d in %v", seg, names)
		}
		st, err := sc.mem.Stat(names[seg])
		if err != nil {
			t.Fatal(err)
		}
		if pos < 0 {
			pos += st.Size()
		}
		flipByte(t, sc.mem, names[seg], pos)
		return fmt.Sprintf("flipped %s byte %d", filepath.Base(names[seg]), pos)
	case "read":
		got := readBatches(t, sc.log, d.Pos)
		for i, b := range got {
			h, _ := batch.ParseHeader(b)
			same := i < len(sc.want) && bytes.Equal(b, sc.want[i])
			fmt.Fprintf(&out, "[%d, %d] %d bytes as-appended=%v\n", h.BaseOffset, h.LastOffset(), len(b), same)
		}
		fmt.Fprintf(&out, "log-end=%d", sc.log.LogEndOffset())
		return out.String()
	case "ls":
		names, err := sc.mem.List(crashDir)
		if err != nil {
			return errName(err)
		}
		for _, n := range names {
			st, _ := sc.mem.Stat(filepath.Join(crashDir, n))
			fmt.Fprintf(&out, "%s %d\n", n, st.Size())
		}
		return strings.TrimSuffix(out.String(), "\n")
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

// segmentLogs lists the .log files of the partition, oldest first.
func (sc *crashScenario) segmentLogs(t *testing.T) []string {
	names, err := sc.mem.List(crashDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if _, suf, ok := parseSegmentFileName(n); ok && suf == LogFileSuffix {
			out = append(out, filepath.Join(crashDir, n))
		}
	}
	return out
}

// The Manager's own files (checkpoints, the clean-shutdown marker, the
// partition directories) fail like any other: every fault must surface as
// an error, and a restart or a power loss afterwards must find every
// acknowledged (restart) or flushed (power loss) batch. A marker left by a
// failed Close must never make a restart trust data that was not flushed.
func TestCrashManagerErrorSweep(t *testing.T) {
	const parts = 2
	steps, perKind := 60, 10
	if testing.Short() {
		steps, perKind = 30, 4
	}
	type outcome struct {
		ws  []*crashWorkload
		err error
		rp  []int64
	}
	run := func(fs vfs.FS) (o outcome) {
		o.ws = []*crashWorkload{newCrashWorkload(61), newCrashWorkload(62)}
		o.rp = make([]int64, parts)
		m, err := OpenManager(crashManagerOptions(fs))
		if err != nil {
			o.err = err
			return o
		}
		logs := make([]*Log, parts)
		defer func() {
			for i, l := range logs {
				if l != nil {
					o.rp[i] = l.RecoveryPoint()
				}
			}
			if cerr := m.Close(); o.err == nil {
				o.err = cerr
			}
		}()
		for i := range parts {
			if logs[i], err = m.GetOrCreate("t", int32(i), crashConfig()); err != nil {
				o.err = err
				return o
			}
		}
		rng := rand.New(rand.NewPCG(6, 6))
		for s := range steps {
			if s%15 == 14 {
				if err := m.Checkpoint(); err != nil {
					o.err = err
					return o
				}
				continue
			}
			i := rng.IntN(parts)
			if err := o.ws[i].step(logs[i]); err != nil {
				o.err = err
				return o
			}
		}
		return o
	}
	for _, kind := range crashFaultKinds() {
		t.Run(kind.name, func(t *testing.T) {
			count := kind.rule().Glob(crashDataDir + "/*")
			if o := run(errfs.Wrap(newCrashFS(t), count)); o.err != nil {
				t.Fatalf("fault-free run: %v", o.err)
			}
			if count.Matched() == 0 {
				t.Skip("the Manager never makes this call on its own files")
			}
			for _, n := range sample(count.Matched(), perKind) {
				n++
				label := fmt.Sprintf("manager %s nth=%d/%d", kind.name, n, count.Matched())
				mem := newCrashFS(t)
				rule := kind.act(kind.rule().Glob(crashDataDir + "/*").Nth(n))
				o := run(errfs.Wrap(mem, rule))
				if rule.Fired() != 1 {
					t.Fatalf("%s: fired %d times", label, rule.Fired())
				}
				if o.err == nil {
					t.Fatalf("%s: the fault never surfaced", label)
				}
				for _, c := range []struct {
					name string
					fs   *vfs.MemFS
					must func(i int) int
				}{
					{"restart", mem.Clone(), func(i int) int { return o.ws[i].acked }},
					{"power loss", mem.CrashClone(0, rand.New(rand.NewPCG(uint64(n), 5))), func(i int) int {
						return flushedBatches(o.ws[i].attempted, o.rp[i])
					}},
				} {
					m, err := OpenManager(crashManagerOptions(c.fs))
					if err != nil {
						t.Fatalf("%s %s: OpenManager: %v\n%s", label, c.name, err, c.fs.Dump())
					}
					for i := range parts {
						cand := o.ws[i].attempted
						l, ok := m.Get("t", int32(i))
						if !ok {
							if c.must(i) > 0 {
								t.Fatalf("%s %s: partition %d vanished with %d batches it must hold", label, c.name, i, c.must(i))
							}
							continue
						}
						got := readBatches(t, l, label)
						if len(got) < c.must(i) || len(got) > len(cand) {
							t.Fatalf("%s %s: partition %d holds %d batches, want %d..%d", label, c.name, i, len(got), c.must(i), len(cand))
						}
						for k := range got {
							if !bytes.Equal(got[k], cand[k]) {
								t.Fatalf("%s %s: partition %d batch %d differs", label, c.name, i, k)
							}
						}
						checkNoLeftovers(t, c.fs, l.Dir(), label)
					}
					if err := m.Close(); err != nil {
						t.Fatalf("%s %s: Close: %v", label, c.name, err)
					}
				}
			}
		})
	}
}
