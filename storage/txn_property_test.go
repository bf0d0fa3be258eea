package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/storage/vfs"
)

// The transaction property test: random interleavings of transactional
// and plain producers, commits, aborts, fencing markers, stale
// coordinators, rolls, high-watermark moves, truncations, clean reopens
// and crashes (MemFS CrashClone, torn and reordered) run against a log and
// against a model that is nothing but the list of batches the log should
// hold. Everything the model expects is derived from that list, so a
// crash or a truncation only cuts it. After every step:
//
//   - the log's batches are the model's (offsets, kinds);
//   - LastStableOffset equals the model's: min(HW, first offset of every
//     open transaction and of every completed one whose marker the HW has
//     not passed) — so it never passes an open transaction;
//   - the read_committed view computed from Read + AbortedTxns + LSO
//     (committedRead, the client's algorithm) equals the model's committed
//     records below the LSO, in offset order;
//   - the aborted-transaction index (memory and .txnindex files) equals
//     the model's entries, so the index recovery rebuilt after a crash is
//     the one the live log wrote;
//   - OngoingTxn agrees with the model for every producer;
//   - at the end, a follower copying the leader's bytes has the same
//     transaction state.

type modelBatch struct {
	kind      byte // 'p' plain, 't' transactional data, 'm' marker
	pid       int64
	epoch     int16
	coord     int32
	commit    bool
	first     int64
	last      int64
	values    []string
	opCounter int
}

type txnModel struct {
	batches []modelBatch
	hw      int64
}

func (m *txnModel) leo() int64 {
	if len(m.batches) == 0 {
		return 0
	}
	return m.batches[len(m.batches)-1].last + 1
}

func (m *txnModel) cut(leo int64) {
	n := len(m.batches)
	for n > 0 && m.batches[n-1].last >= leo {
		n--
	}
	m.batches = m.batches[:n]
	m.hw = min(m.hw, leo)
}

// derived is everything the model implies.
type derived struct {
	open      map[int64]int64 // pid -> first offset of its open txn
	epoch     map[int64]int16 // the log's epoch per transactional producer
	coord     map[int64]int32 // coordinator epoch of its last marker (-1 none)
	aborted   []AbortedTxn
	completed []AbortedTxn // every completed txn (for the unreplicated rule), LastOffset = marker
	committed []string     // "offset:value" of every committed record (plain or committed txn)
	lso       int64
}

func (m *txnModel) derive() derived {
	d := derived{open: map[int64]int64{}, epoch: map[int64]int16{}, coord: map[int64]int32{}}
	pending := map[int64][]string{}
	for _, b := range m.batches {
		switch b.kind {
		case 'p':
			for i, v := range b.values {
				d.committed = append(d.committed, fmt.Sprintf("%d:%s", b.first+int64(i), v))
			}
		case 't':
			if _, ok := d.open[b.pid]; !ok {
				d.open[b.pid] = b.first
			}
			d.epoch[b.pid] = b.epoch
			if _, ok := d.coord[b.pid]; !ok {
				d.coord[b.pid] = -1
			}
			for i, v := range b.values {
				pending[b.pid] = append(pending[b.pid], fmt.Sprintf("%d:%s", b.first+int64(i), v))
			}
		case 'm':
			first, wasOpen := d.open[b.pid]
			if !wasOpen {
				first = b.first
			}
			delete(d.open, b.pid)
			d.epoch[b.pid], d.coord[b.pid] = b.epoch, b.coord
			lsoAt := b.first + 1
			for _, f := range d.open {
				lsoAt = min(lsoAt, f)
			}
			a := AbortedTxn{ProducerID: b.pid, FirstOffset: first, LastOffset: b.first, LastStableOffset: lsoAt}
			d.completed = append(d.completed, a)
			if b.commit {
				d.committed = append(d.committed, pending[b.pid]...)
			} else {
				d.aborted = append(d.aborted, a)
			}
			delete(pending, b.pid)
		}
	}
	slices.SortFunc(d.committed, func(a, b string) int {
		var x, y int64
		fmt.Sscanf(a, "%d:", &x)
		fmt.Sscanf(b, "%d:", &y)
		return int(x - y)
	})
	d.lso = m.hw
	for _, f := range d.open {
		d.lso = min(d.lso, f)
	}
	for _, c := range d.completed {
		if c.LastOffset >= m.hw {
			d.lso = min(d.lso, c.FirstOffset)
		}
	}
	return d
}

func TestTxnPropertyAgainstModel(t *testing.T) {
	seeds := 60
	if s := os.Getenv("STRATA_TEST_TXN_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		seeds = 15
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runTxnProperty(t, uint64(seed)) })
	}
}

func runTxnProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x7a11))
	mem := vfs.NewMem()
	e := newEnvFS(t, mem, "/data/t-0", func(c *Config) { c.SegmentBytes = 600 + rng.Int64N(1200) })
	m := &txnModel{}
	pids := []int64{11, 12, 13}
	coord := int32(0)
	var trace []string
	step := func(format string, args ...any) { trace = append(trace, fmt.Sprintf(format, args...)) }
	defer func() {
		if t.Failed() {
			t.Logf("trace (seed %d):\n%s", seed, joinLines(trace))
		}
	}()
	ts := baseTs
	truncated := false
	ops := 150
	if s := os.Getenv("STRATA_TEST_TXN_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	for op := range ops {
		d := m.derive()
		l := e.log
		switch r := rng.IntN(100); {
		case r < 22: // plain batch
			n := 1 + rng.IntN(3)
			vals := values(op, n)
			info := leaderAppend(t, l, valuesBatch(t, -1, -1, false, vals, ts))
			m.batches = append(m.batches, modelBatch{kind: 'p', pid: -1, first: info.FirstOffset, last: info.LastOffset, values: vals})
			step("plain %d-%d", info.FirstOffset, info.LastOffset)
		case r < 50: // transactional batch
			pid := pids[rng.IntN(len(pids))]
			ep := d.epoch[pid]
			n := 1 + rng.IntN(3)
			vals := values(op, n)
			info := leaderAppend(t, l, valuesBatch(t, pid, ep, true, vals, ts))
			m.batches = append(m.batches, modelBatch{kind: 't', pid: pid, epoch: ep, first: info.FirstOffset, last: info.LastOffset, values: vals})
			step("txn p%d e%d %d-%d", pid, ep, info.FirstOffset, info.LastOffset)
		case r < 70: // commit or abort (also of a producer with nothing open)
			pid := pids[rng.IntN(len(pids))]
			if rng.IntN(5) == 0 {
				coord++
			}
			mk := producer.Marker{ProducerID: pid, ProducerEpoch: d.epoch[pid], CoordinatorEpoch: max(coord, coordOf(d, pid)), Commit: rng.IntN(2) == 0}
			off := mustMarker(t, l, mk)
			m.batches = append(m.batches, modelBatch{kind: 'm', pid: pid, epoch: mk.ProducerEpoch, coord: mk.CoordinatorEpoch, commit: mk.Commit, first: off, last: off})
			step("marker %+v at %d", mk, off)
		case r < 74: // fencing: an abort at a bumped epoch
			pid := pids[rng.IntN(len(pids))]
			mk := producer.Marker{ProducerID: pid, ProducerEpoch: d.epoch[pid] + 1, CoordinatorEpoch: max(coord, coordOf(d, pid))}
			off := mustMarker(t, l, mk)
			m.batches = append(m.batches, modelBatch{kind: 'm', pid: pid, epoch: mk.ProducerEpoch, coord: mk.CoordinatorEpoch, first: off, last: off})
			step("fence %+v at %d", mk, off)
		case r < 78: // a stale marker is refused and writes nothing
			pid := pids[rng.IntN(len(pids))]
			leo := l.LogEndOffset()
			var mk producer.Marker
			var want error
			if c := coordOf(d, pid); c > 0 && rng.IntN(2) == 0 {
				mk, want = producer.Marker{ProducerID: pid, ProducerEpoch: d.epoch[pid], CoordinatorEpoch: c - 1}, producer.ErrTransactionCoordinatorFenced
			} else if ep, ok := d.epoch[pid]; ok && ep > 0 {
				mk, want = producer.Marker{ProducerID: pid, ProducerEpoch: ep - 1, CoordinatorEpoch: coord}, producer.ErrInvalidProducerEpoch
			} else {
				continue
			}
			if _, err := l.AppendMarker(mk, 1); !errors.Is(err, want) {
				t.Fatalf("op %d: stale marker %+v: %v, want %v", op, mk, err, want)
			}
			if l.LogEndOffset() != leo {
				t.Fatalf("op %d: a refused marker moved the LEO", op)
			}
			step("stale %+v refused", mk)
		case r < 84: // replication moves the HW
			// A high watermark is some replica's log end: a batch boundary.
			ends := []int64{m.hw}
			for _, b := range m.batches {
				if b.last+1 > m.hw {
					ends = append(ends, b.last+1)
				}
			}
			hw := ends[rng.IntN(len(ends))]
			l.SetHighWatermark(hw)
			m.hw = hw
			step("hw %d", hw)
		case r < 87:
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			step("roll")
		case r < 89:
			if truncated {
				leaderAppend(t, l, valuesBatch(t, -1, -1, false, values(op, 1), ts))
				m.batches = append(m.batches, modelBatch{kind: 'p', pid: -1, first: m.leo(), last: m.leo(), values: values(op, 1)})
				truncated = false
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			step("flush")
		case r < 91: // follower truncation
			if m.leo() == 0 {
				continue
			}
			to := rng.Int64N(m.leo() + 1)
			if err := l.Truncate(to); err != nil {
				t.Fatal(err)
			}
			// A truncation is made durable by the next fsync of the
			// segment only (as in Kafka): a crash before that may bring
			// the cut batches back, which the follower's next truncation
			// by leader epoch removes. Not modelled: no crash until then.
			truncated = true
			m.cut(l.LogEndOffset())
			if m.leo() != l.LogEndOffset() {
				t.Fatalf("op %d: truncate(%d): log ends at %d, model at %d", op, to, l.LogEndOffset(), m.leo())
			}
			l.SetHighWatermark(m.hw)
			step("truncate %d -> leo %d", to, l.LogEndOffset())
		case r < 94: // clean restart
			e.reopen()
			m.hw = e.log.LogEndOffset()
			e.log.SetHighWatermark(m.hw)
			step("reopen")
		default: // crash
			if truncated {
				continue
			}
			live := allAborted(l)
			rp := l.RecoveryPoint()
			pct := rng.IntN(101)
			var crashed *vfs.MemFS
			if rng.IntN(2) == 0 {
				crashed = mem.CrashClone(pct, rng)
			} else {
				crashed = mem.CrashCloneReordered(pct, rng)
			}
			l.Close()
			mem = crashed
			e.fs = mem
			e.open(false, rp, 0)
			leo := e.log.LogEndOffset()
			if leo < rp {
				t.Fatalf("op %d: crash lost fsynced data: LEO %d below the recovery point %d", op, leo, rp)
			}
			m.cut(leo)
			if m.leo() != leo {
				t.Fatalf("op %d: crash: log recovered to %d, not a batch boundary of the model (%d)", op, leo, m.leo())
			}
			// The index recovery wrote is the live one, cut where the log was.
			var want []AbortedTxn
			for _, a := range live {
				if a.LastOffset < leo {
					want = append(want, a)
				}
			}
			if got := allAborted(e.log); !reflect.DeepEqual(got, want) {
				t.Fatalf("op %d: recovered aborted index\n got %+v\nwant %+v (live, cut at %d)", op, got, want, leo)
			}
			m.hw = leo
			e.log.SetHighWatermark(leo)
			// Recovery cuts a torn tail without an fsync (as Kafka's
			// LogLoader): until the next flush, another crash may bring
			// back the cut bytes, as after a truncation.
			if e.log.Recovery().TruncatedBytes > 0 {
				truncated = true
			}
			step("crash keep=%d rp=%d -> leo %d", pct, rp, leo)
		}
		checkTxnModel(t, op, e, m)
	}
	// A follower copying the leader's log ends in the same state.
	f := newEnv(t)
	all, _ := readAll(t, e.log)
	if len(all) > 0 {
		if err := f.log.TruncateFullyAndStartAt(e.log.LocalLogStartOffset()); err != nil {
			t.Fatal(err)
		}
		if _, err := f.log.Append(all, AppendOptions{}); err != nil {
			t.Fatalf("follower append: %v", err)
		}
	}
	f.log.SetHighWatermark(e.log.HighWatermark())
	want, got := stateOf(e.log), stateOf(f.log)
	got.Index = regroup(got.Index, e.log)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("follower state\n got %+v\nwant %+v", got, want)
	}
}

func checkTxnModel(t *testing.T, op int, e *testEnv, m *txnModel) {
	t.Helper()
	l := e.log
	d := m.derive()
	if l.LogEndOffset() != m.leo() {
		t.Fatalf("op %d: LEO %d, model %d", op, l.LogEndOffset(), m.leo())
	}
	hdrs := scanBatches(t, l)
	if len(hdrs) != len(m.batches) {
		t.Fatalf("op %d: %d batches in the log, model %d", op, len(hdrs), len(m.batches))
	}
	for i, h := range hdrs {
		b := m.batches[i]
		if h.BaseOffset != b.first || h.LastOffset() != b.last || h.ProducerID != b.pid || h.Control() != (b.kind == 'm') || h.Transactional() != (b.kind != 'p') {
			t.Fatalf("op %d: batch %d is %+v, model %+v", op, i, h, b)
		}
	}
	if got := l.LastStableOffset(); got != d.lso {
		t.Fatalf("op %d: LSO %d, model %d (hw %d, open %v)", op, got, d.lso, m.hw, d.open)
	}
	for _, first := range d.open {
		if l.LastStableOffset() > first {
			t.Fatalf("op %d: LSO %d passes an open transaction at %d", op, l.LastStableOffset(), first)
		}
	}
	var want []string
	for _, c := range d.committed {
		var off int64
		fmt.Sscanf(c, "%d:", &off)
		if off < d.lso {
			want = append(want, c)
		}
	}
	if got := committedRead(t, l); !slices.Equal(got, want) {
		t.Fatalf("op %d: read_committed\n got %v\nwant %v", op, got, want)
	}
	wantAb := d.aborted
	if got := allAborted(l); !reflect.DeepEqual(got, wantAb) && !(len(got) == 0 && len(wantAb) == 0) {
		t.Fatalf("op %d: aborted index\n got %+v\nwant %+v", op, got, wantAb)
	}
	if files, mem := txnIndexFiles(t, e.fs, e.dir), txnIndexMemory(l); !reflect.DeepEqual(files, mem) {
		t.Fatalf("op %d: .txnindex files %+v, memory %+v", op, files, mem)
	}
	for _, pid := range []int64{11, 12, 13} {
		f, ok := l.OngoingTxn(pid)
		wf, wok := d.open[pid]
		if ok != wok || (ok && f != wf) {
			t.Fatalf("op %d: OngoingTxn(%d) = %d %v, model %d %v", op, pid, f, ok, wf, wok)
		}
	}
}

func coordOf(d derived, pid int64) int32 {
	if c, ok := d.coord[pid]; ok {
		return c
	}
	return 0
}

func values(op, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("o%d.%d", op, i)
	}
	return out
}

// valuesBatch is txnBatch with the given record values.
func valuesBatch(tb testing.TB, pid int64, epoch int16, txn bool, vals []string, ts int64) []byte {
	tb.Helper()
	return txnBatchValues(tb, pid, epoch, 0, txn, vals, ts)
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		out += fmt.Sprintf("  %3d %s\n", i, l)
	}
	return out
}
