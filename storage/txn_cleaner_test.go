package storage

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/producer"
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
	want := []string{"a=a1", "b=b1", "e=e2", "f=f3", "d=d1", "d=d2"}
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
	if n := len(markerOffsets(t, l)); n != 2 {
		t.Fatalf("%d markers left, want the two COMMITs", n)
	}
	if got := committedRead(t, l); len(got) != 3 { // a1 b1 e2 below the LSO
		t.Fatalf("read committed after cleaning: %v", got)
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
