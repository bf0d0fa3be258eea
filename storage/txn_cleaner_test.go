package storage

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/storage/vfs"
)

// TestCleanerTransactions: compaction drops the records of aborted
// transactions whatever their keys (an aborted write never wins over a
// committed one), never cleans at or past the first unstable offset, keeps
// markers (and their .txnindex entries) while delete.retention.ms has not
// passed or their transaction still has a batch, and drops them after.
func TestCleanerTransactions(t *testing.T) {
	e := newCompactEnv(t, nil, func(c *Config) { c.SegmentBytes = 1 << 20 })
	l := e.log
	ts := func() int64 { return e.clock.Now().UnixMilli() }
	app := func(b []byte) int64 { return leaderAppend(t, l, b).FirstOffset }
	// Segment 1: a committed and an aborted transaction over the same keys.
	app(txnKeyed(t, []op{{key: "a", value: "a1"}, {key: "b", value: "b1"}}, ts(), 1, 0))
	app(txnKeyed(t, []op{{key: "a", value: "aX"}, {key: "c", value: "cX"}}, ts(), 2, 0))
	mustMarker(t, l, producer.Marker{ProducerID: 1, Commit: true})
	abort2 := mustMarker(t, l, producer.Marker{ProducerID: 2})
	// p2 commits later, so its ABORT marker is not its newest batch.
	app(txnKeyed(t, []op{{key: "e", value: "e2"}}, ts(), 2, 0))
	mustMarker(t, l, producer.Marker{ProducerID: 2, Commit: true})
	// And p1 again, so that its first COMMIT is not its newest batch.
	app(txnKeyed(t, []op{{key: "g", value: "g1"}}, ts(), 1, 0))
	mustMarker(t, l, producer.Marker{ProducerID: 1, Commit: true})
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	// Segment 2: p3's transaction opens; a key written twice after it.
	open3 := app(txnKeyed(t, []op{{key: "f", value: "f3"}}, ts(), 3, 0))
	e.put([]op{{key: "d", value: "d1"}}, 0, nil)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	e.put([]op{{key: "d", value: "d2"}}, 0, nil)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if f, _ := l.FirstUnstableOffset(); f != open3 {
		t.Fatalf("first unstable %d, want %d", f, open3)
	}
	e.cleanNow(0)

	vals := dataRecords(t, l)
	// aX and cX (aborted) are gone; a1, b1, e2 stay; the segments from the
	// open transaction on are untouched (d1 is still there).
	want := []string{"a=a1", "b=b1", "e=e2", "g=g1", "f=f3", "d=d1", "d=d2"}
	if !slices.Equal(vals, want) {
		t.Fatalf("after cleaning: %v, want %v", vals, want)
	}
	wantAborted := []AbortedTxn{{ProducerID: 2, FirstOffset: 2, LastOffset: abort2, LastStableOffset: abort2 + 1}}
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("aborted after cleaning %+v, want %+v", got, wantAborted)
	}
	if got := txnIndexFiles(t, e.fs, e.dir); !reflect.DeepEqual(got, map[int64][]AbortedTxn{0: wantAborted}) {
		t.Fatalf(".txnindex files after cleaning %+v", got)
	}
	if !slices.Contains(markerOffsets(t, l), abort2) {
		t.Fatal("the ABORT marker went before delete.retention.ms")
	}
	// A reopen (crash) agrees.
	rp := l.RecoveryPoint()
	l.Close()
	e.open(false, rp, 0)
	l = e.log
	l.SetHighWatermark(l.LogEndOffset())
	if got := l.AbortedTxns(0, l.LogEndOffset()); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("aborted after reopen %+v, want %+v", got, wantAborted)
	}

	// Past delete.retention.ms: the ABORT marker (no batch of its
	// transaction left) and its index entry go; the COMMIT markers whose
	// transactions kept records stay.
	e.clock.Advance(2 * time.Hour)
	res, err := l.clean(cleanParams{firstDirty: 0, now: e.clock.Now(), dedupeBytes: 1 << 20, expireTombstones: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = res
	if slices.Contains(markerOffsets(t, l), abort2) {
		t.Fatal("the ABORT marker outlived delete.retention.ms")
	}
	if got := l.AbortedTxns(0, l.LogEndOffset()); len(got) != 0 {
		t.Fatalf("index entry of a removed marker remains: %+v", got)
	}
	if got := txnIndexFiles(t, e.fs, e.dir); len(got) != 0 {
		t.Fatalf(".txnindex files of removed markers remain: %+v", got)
	}
	if n := len(markerOffsets(t, l)); n != 3 {
		t.Fatalf("%d markers left, want the three COMMITs (their transactions kept records)", n)
	}
	if got := committedRead(t, l); len(got) != 4 { // a1 b1 e2 g1 below the LSO
		t.Fatalf("read committed after cleaning: %v", got)
	}
	// A full replay of the cleaned log (the transaction snapshot lost)
	// finds exactly p3's transaction open: no kept batch lost its marker.
	l.Close()
	for _, o := range l.snapshotOffsetsOf(TxnSnapshotFileSuffix) {
		if err := vfs.WriteFileAtomic(e.fs, l.txnSnapshotPath(o), []byte("garbage")); err != nil {
			t.Fatal(err)
		}
	}
	e.open(false, 0, 0)
	for _, pid := range []int64{1, 2} {
		if f, ok := e.log.OngoingTxn(pid); ok {
			t.Fatalf("after a full replay of the cleaned log, producer %d has a transaction open at %d", pid, f)
		}
	}
	if f, ok := e.log.OngoingTxn(3); !ok || f != open3 {
		t.Fatalf("p3's transaction after a full replay: %d %v, want open at %d", f, ok, open3)
	}
}

// dataRecords returns "key=value" of every record of the log's data
// batches, in offset order.
func dataRecords(tb testing.TB, l *Log) []string {
	tb.Helper()
	all, _ := readAll(tb, l)
	var out []string
	for rest := all; len(rest) > 0; {
		first, r, err := batch.Split(rest)
		if err != nil {
			tb.Fatal(err)
		}
		rest = r
		h, _ := batch.ParseHeader(first)
		if h.Control() {
			continue
		}
		if err := batch.Records(first, func(rec batch.Record) error {
			out = append(out, string(rec.Key)+"="+string(rec.Value))
			return nil
		}); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// TestCleanerTransactionsProperty: random transactional and plain keyed
// writes, commits, aborts, rolls, cleanings (some past delete.retention.ms)
// and reopens on a compacted log. After every step the read_committed
// view, folded to the newest value per key, equals the model's (the
// newest committed write per key below the LSO): compaction neither loses
// a committed value nor lets an aborted one through, the LSO and the open
// transactions are unchanged by cleaning, and a reopen agrees.
func TestCleanerTransactionsProperty(t *testing.T) {
	seeds := 30
	if s := os.Getenv("STRATA_TEST_TXN_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 99))
			e := newCompactEnv(t, nil, func(c *Config) { c.SegmentBytes = 400 + rng.Int64N(600) })
			type rec struct {
				off int64
				key string
				val string
			}
			var committed []rec          // plain and committed records
			pending := map[int64][]rec{} // open transactions' records
			var hw int64
			keys := []string{"a", "b", "c", "d"}
			var trace []string
			defer func() {
				if t.Failed() {
					t.Logf("trace:\n%s", joinLines(trace))
				}
			}()
			for step := range 120 {
				l := e.log
				pid := int64(1 + rng.IntN(3))
				switch r := rng.IntN(100); {
				case r < 30:
					k := keys[rng.IntN(len(keys))]
					v := fmt.Sprintf("%s#%d", k, step)
					off := leaderAppend(t, l, keyedBatch(t, []op{{key: k, value: v}}, e.clock.Now().UnixMilli(), 0, nil)).FirstOffset
					committed = append(committed, rec{off, k, v})
					trace = append(trace, fmt.Sprintf("plain %s at %d", v, off))
				case r < 60:
					k := keys[rng.IntN(len(keys))]
					v := fmt.Sprintf("%s#%d", k, step)
					off := leaderAppend(t, l, txnKeyed(t, []op{{key: k, value: v}}, e.clock.Now().UnixMilli(), pid, 0)).FirstOffset
					pending[pid] = append(pending[pid], rec{off, k, v})
					trace = append(trace, fmt.Sprintf("txn p%d %s at %d", pid, v, off))
				case r < 80:
					commit := rng.IntN(2) == 0
					mo := mustMarker(t, l, producer.Marker{ProducerID: pid, Commit: commit})
					trace = append(trace, fmt.Sprintf("marker p%d commit=%v at %d", pid, commit, mo))
					if commit {
						committed = append(committed, pending[pid]...)
					}
					delete(pending, pid)
				case r < 86:
					if err := l.Roll(); err != nil {
						t.Fatal(err)
					}
					trace = append(trace, "roll")
				case r < 90:
					hw = l.LogEndOffset()
					l.SetHighWatermark(hw)
					trace = append(trace, fmt.Sprintf("hw %d", hw))
				case r < 97:
					if rng.IntN(3) == 0 {
						e.clock.Advance(2 * time.Hour)
					}
					res, err := l.clean(cleanParams{firstDirty: 0, now: e.clock.Now(), dedupeBytes: 1 << 20, expireTombstones: true})
					if err != nil {
						t.Fatal(err)
					}
					trace = append(trace, fmt.Sprintf("clean: %d groups, first unstable %d", res.groups, l.firstUnstable.Load()))
				default:
					e.reopen()
					e.log.SetHighWatermark(hw)
					trace = append(trace, "reopen")
				}
				l = e.log
				lso := l.LastStableOffset()
				want := map[string]string{}
				slices.SortFunc(committed, func(a, b rec) int { return int(a.off - b.off) })
				for _, c := range committed {
					if c.off < lso {
						want[c.key] = c.val
					}
				}
				got := map[string]string{}
				for _, s := range committedRead(t, l) {
					_, v, _ := strings.Cut(s, ":")
					k, _, _ := strings.Cut(v, "#")
					got[k] = v
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d: read_committed newest per key %v, model %v (lso %d)", step, got, want, lso)
				}
				for p, recs := range pending {
					if f, ok := l.OngoingTxn(p); !ok || f != recs[0].off {
						t.Fatalf("step %d: OngoingTxn(%d) = %d %v, model %d", step, p, f, ok, recs[0].off)
					}
				}
			}
		})
	}
}

// TestCleanerStopsAtTheHighWatermark: a record above the high watermark
// (which a follower truncation may still remove) never supersedes a
// committed one: the cleaner stops at the last stable offset, which
// includes the HW (Kafka's LogCleanerManager.cleanableOffsets).
func TestCleanerStopsAtTheHighWatermark(t *testing.T) {
	e := newCompactEnv(t, nil)
	l := e.log
	app := func(k, v string) {
		leaderAppend(t, l, keyedBatch(t, []op{{key: k, value: v}}, e.clock.Now().UnixMilli(), 0, nil))
	}
	app("k", "committed")
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	app("k", "above-hw")
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.clean(cleanParams{firstDirty: 0, now: e.clock.Now(), dedupeBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if got := dataRecords(t, l); !slices.Equal(got, []string{"k=committed", "k=above-hw"}) {
		t.Fatalf("after cleaning with the HW at 1: %v", got)
	}
	if err := l.Truncate(1); err != nil { // the leader never had it
		t.Fatal(err)
	}
	if got := dataRecords(t, l); !slices.Equal(got, []string{"k=committed"}) {
		t.Fatalf("after the truncation: %v", got)
	}
}
