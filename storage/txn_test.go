package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/batch"

	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/storage/vfs"
)

func TestTxnLastStableOffsetStopsAtOpenTxnUntilMarkerReplicated(t *testing.T) {
	e := newEnv(t)
	l := e.log
	ts := baseTs
	leaderAppend(t, l, txnBatch(t, -1, 0, 0, 2, false, "plain", ts)) // 0-1
	l.SetHighWatermark(l.LogEndOffset())
	if got := l.LastStableOffset(); got != 2 {
		t.Fatalf("LSO without transactions = %d, want the HW 2", got)
	}
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("first unstable offset without transactions")
	}
	leaderAppend(t, l, txnBatch(t, 7, 0, 0, 3, true, "t", ts))   // 2-4
	leaderAppend(t, l, txnBatch(t, -1, 0, 0, 1, false, "p", ts)) // 5
	l.SetHighWatermark(l.LogEndOffset())
	if f, ok := l.FirstUnstableOffset(); !ok || f != 2 {
		t.Fatalf("FirstUnstableOffset = %d %v, want 2", f, ok)
	}
	if got := l.LastStableOffset(); got != 2 {
		t.Fatalf("LSO = %d, want 2 (the open transaction's first offset)", got)
	}
	if f, ok := l.OngoingTxn(7); !ok || f != 2 {
		t.Fatalf("OngoingTxn(7) = %d %v, want 2", f, ok)
	}
	if _, ok := l.OngoingTxn(8); ok {
		t.Fatal("OngoingTxn(8) for a producer that never wrote")
	}
	off := mustMarker(t, l, producer.Marker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 3, Commit: true})
	if off != 6 {
		t.Fatalf("marker at %d, want 6", off)
	}
	if _, ok := l.OngoingTxn(7); ok {
		t.Fatal("transaction still open after its COMMIT")
	}
	// The marker is not replicated yet (HW 6): still unstable (KAFKA-5121).
	if got := l.LastStableOffset(); got != 2 {
		t.Fatalf("LSO before the marker is below the HW = %d, want 2", got)
	}
	l.SetHighWatermark(7)
	if got := l.LastStableOffset(); got != 7 {
		t.Fatalf("LSO after the HW passed the marker = %d, want 7", got)
	}
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("first unstable offset after the commit was replicated")
	}
	if got := committedRead(t, l); !slices.Equal(got, []string{"0:plain-0", "1:plain-1", "2:t-0", "3:t-1", "4:t-2", "5:p-0"}) {
		t.Fatalf("read committed = %v", got)
	}
}

func TestTxnMarkerFencing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prior   []producer.Marker // written first (producer 1 wrote a txn batch at epoch 2)
		m       producer.Marker
		wantErr error
		wantK   error
	}{
		{name: "same epochs", m: producer.Marker{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 0}},
		{name: "older producer epoch", m: producer.Marker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 0},
			wantErr: producer.ErrInvalidProducerEpoch, wantK: kerr.InvalidProducerEpoch},
		{name: "newer producer epoch (fencing abort)", m: producer.Marker{ProducerID: 1, ProducerEpoch: 3, CoordinatorEpoch: 0}},
		{name: "older coordinator epoch", prior: []producer.Marker{{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 5, Commit: true}},
			m: producer.Marker{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 4}, wantErr: producer.ErrTransactionCoordinatorFenced, wantK: kerr.TransactionCoordinatorFenced},
		{name: "same coordinator epoch again", prior: []producer.Marker{{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 5, Commit: true}},
			m: producer.Marker{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 5}},
		{name: "producer epoch checked first", prior: []producer.Marker{{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 5}},
			m: producer.Marker{ProducerID: 1, ProducerEpoch: 1, CoordinatorEpoch: 4}, wantErr: producer.ErrInvalidProducerEpoch, wantK: kerr.InvalidProducerEpoch},
		{name: "unknown producer", m: producer.Marker{ProducerID: 99, ProducerEpoch: 0, CoordinatorEpoch: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			leaderAppend(t, e.log, txnBatch(t, 1, 2, 0, 1, true, "a", baseTs))
			for _, p := range tc.prior {
				mustMarker(t, e.log, p)
			}
			leo := e.log.LogEndOffset()
			_, err := e.log.AppendMarker(tc.m, 1)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("AppendMarker: %v", err)
				}
				if e.log.LogEndOffset() != leo+1 {
					t.Fatalf("LEO %d after the marker, want %d", e.log.LogEndOffset(), leo+1)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, tc.wantK) {
				t.Fatalf("AppendMarker = %v, want %v (%v)", err, tc.wantErr, tc.wantK)
			}
			if e.log.LogEndOffset() != leo {
				t.Fatalf("a refused marker was written: LEO %d, want %d", e.log.LogEndOffset(), leo)
			}
		})
	}
}

func TestTxnAbortIndexEntries(t *testing.T) {
	e := newEnv(t)
	l := e.log
	ts := baseTs
	leaderAppend(t, l, txnBatch(t, 1, 0, 0, 2, true, "a", ts))                                  // 0-1 p1
	leaderAppend(t, l, txnBatch(t, 2, 0, 0, 1, true, "b", ts))                                  // 2 p2
	leaderAppend(t, l, txnBatch(t, 1, 0, 2, 1, true, "a2", ts))                                 // 3 p1
	abort1 := mustMarker(t, l, producer.Marker{ProducerID: 1, ProducerEpoch: 0})                // 4
	empty := mustMarker(t, l, producer.Marker{ProducerID: 3, ProducerEpoch: 0})                 // 5: no open txn
	commit2 := mustMarker(t, l, producer.Marker{ProducerID: 2, ProducerEpoch: 0, Commit: true}) // 6
	l.SetHighWatermark(l.LogEndOffset())
	want := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: abort1, LastStableOffset: 2}, // p2 still open at 2
		{ProducerID: 3, FirstOffset: empty, LastOffset: empty, LastStableOffset: 2},
	}
	if got := allAborted(l); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted index = %+v, want %+v", got, want)
	}
	if got := txnIndexFiles(t, e.fs, e.dir); !reflect.DeepEqual(got, map[int64][]AbortedTxn{0: want}) {
		t.Fatalf(".txnindex on disk = %+v", got)
	}
	for _, q := range []struct {
		from, to int64
		want     []AbortedTxn
	}{
		{0, 1, want[:1]}, {4, 5, want[:1]}, {5, 7, want[1:]}, {6, 7, nil}, {0, 7, want}, {3, 3, nil},
	} {
		if got := l.AbortedTxns(q.from, q.to); !reflect.DeepEqual(got, q.want) {
			t.Errorf("AbortedTxns(%d, %d) = %+v, want %+v", q.from, q.to, got, q.want)
		}
	}
	_ = commit2
	if got := committedRead(t, l); !slices.Equal(got, []string{"2:b-0"}) {
		t.Fatalf("read committed = %v, want only p2's committed record", got)
	}
}

// TestTxnAbortedTxnsAcrossSegments: an aborted transaction that began in an
// earlier segment is found from a fetch of that segment (its entry lives in
// the marker's segment).
func TestTxnAbortedTxnsAcrossSegments(t *testing.T) {
	e := newEnv(t)
	l := e.log
	leaderAppend(t, l, txnBatch(t, 1, 0, 0, 2, true, "a", baseTs)) // 0-1
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	leaderAppend(t, l, txnBatch(t, -1, 0, 0, 1, false, "p", baseTs)) // 2
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	m := mustMarker(t, l, producer.Marker{ProducerID: 1}) // 3
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: m, LastStableOffset: m + 1}}
	if got := l.AbortedTxns(0, 2); !reflect.DeepEqual(got, want) {
		t.Fatalf("AbortedTxns(0, 2) = %+v, want %+v", got, want)
	}
	if got := txnIndexFiles(t, e.fs, e.dir); !reflect.DeepEqual(got, map[int64][]AbortedTxn{3: want}) {
		t.Fatalf(".txnindex files = %+v", got)
	}
}

func TestTxnClientControlBatchRefused(t *testing.T) {
	e := newEnv(t)
	b := buildMarker(producer.Marker{ProducerID: 1}, -1, baseTs)
	_, err := e.log.Append(b, AppendOptions{LeaderEpoch: 1, AssignOffsets: true})
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("client control batch: %v, want INVALID_RECORD", err)
	}
}

// TestTxnPlainLogWritesNoTxnFiles: a log that never saw a transaction
// writes neither snapshot nor index, and opens with nothing to replay.
func TestTxnPlainLogWritesNoTxnFiles(t *testing.T) {
	e := newEnv(t)
	e.appendBatches(3, 2, 10)
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	e.appendBatches(1, 1, 10)
	e.reopen()
	names, _ := e.fs.List(e.dir)
	for _, n := range names {
		if _, suf, ok := parseSegmentFileName(n); ok && (suf == TxnIndexFileSuffix || suf == TxnSnapshotFileSuffix) {
			t.Fatalf("plain log wrote %s", n)
		}
	}
}

// txnState is what a log's transaction side looks like from outside.
type txnState struct {
	LEO      int64
	First    int64
	Ongoing  map[int64]int64
	Index    map[int64][]AbortedTxn
	Producer []producer.TxnProducer
}

func stateOf(l *Log) txnState {
	s := txnState{LEO: l.LogEndOffset(), Ongoing: map[int64]int64{}, Index: txnIndexMemory(l), Producer: l.TxnProducers()}
	s.First, _ = l.FirstUnstableOffset()
	for _, p := range s.Producer {
		if p.FirstOffset >= 0 {
			s.Ongoing[p.ID] = p.FirstOffset
		}
	}
	return s
}

// txnWorkload writes open, committed and aborted transactions over a few
// segments and returns the log's state.
func txnWorkload(t *testing.T, l *Log) {
	ts := baseTs
	leaderAppend(t, l, txnBatch(t, 1, 0, 0, 2, true, "a", ts))
	leaderAppend(t, l, txnBatch(t, 2, 0, 0, 1, true, "b", ts))
	mustMarker(t, l, producer.Marker{ProducerID: 1, CoordinatorEpoch: 1})
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	leaderAppend(t, l, txnBatch(t, 1, 0, 2, 1, true, "a", ts))
	leaderAppend(t, l, txnBatch(t, 3, 0, 0, 1, true, "c", ts))
	mustMarker(t, l, producer.Marker{ProducerID: 2, CoordinatorEpoch: 1, Commit: true})
	mustMarker(t, l, producer.Marker{ProducerID: 3, CoordinatorEpoch: 2})
	leaderAppend(t, l, txnBatch(t, 4, 1, 0, 2, true, "d", ts))
	l.SetHighWatermark(l.LogEndOffset())
}

func TestTxnStateSurvivesReopen(t *testing.T) {
	for _, mode := range []string{"clean", "crash-synced", "crash-torn"} {
		t.Run(mode, func(t *testing.T) {
			mem := vfs.NewMem()
			e := newEnvFS(t, mem, "/data/t-0")
			txnWorkload(t, e.log)
			if mode != "crash-torn" {
				if err := e.log.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			live := stateOf(e.log)
			if len(live.Ongoing) != 2 || len(live.Index) == 0 {
				t.Fatalf("workload state %+v", live)
			}
			switch mode {
			case "clean":
				e.reopen()
			default:
				rp := e.log.RecoveryPoint()
				crashed := mem.CrashClone(map[string]int{"crash-synced": 0, "crash-torn": 50}[mode], rand.New(rand.NewPCG(1, 2)))
				e.log.Close()
				e.fs = crashed
				e.open(false, rp, 0)
			}
			e.log.SetHighWatermark(e.log.LogEndOffset()) // as the broker does once it leads
			got := stateOf(e.log)
			if mode == "crash-torn" {
				// Whatever survived, the state must be the one of the
				// surviving prefix: replay it on a fresh log.
				live = replayedState(t, e.log)
			}
			if !reflect.DeepEqual(got, live) {
				t.Fatalf("after %s reopen:\n got %+v\nwant %+v", mode, got, live)
			}
			if files := txnIndexFiles(t, e.fs, e.dir); !reflect.DeepEqual(files, got.Index) {
				t.Fatalf(".txnindex files %+v, in memory %+v", files, got.Index)
			}
		})
	}
}

// replayedState copies l's batches into a fresh log as a follower would
// and returns that log's state: the state l's data implies.
func replayedState(t *testing.T, l *Log) txnState {
	t.Helper()
	f := newEnv(t)
	all, _ := readAll(t, l)
	if len(all) > 0 {
		if _, err := f.log.Append(all, AppendOptions{}); err != nil {
			t.Fatalf("follower append: %v", err)
		}
	}
	// Segment bases differ: compare the index by content only.
	f.log.SetHighWatermark(f.log.LogEndOffset())
	s := stateOf(f.log)
	s.Index = regroup(s.Index, l)
	return s
}

// regroup files the entries of idx under l's segments.
func regroup(idx map[int64][]AbortedTxn, l *Log) map[int64][]AbortedTxn {
	var all []AbortedTxn
	for _, b := range slices.Sorted(mapsKeys(idx)) {
		all = append(all, idx[b]...)
	}
	out := map[int64][]AbortedTxn{}
	segs := l.segments()
	for _, a := range all {
		s := segs[findSegment(segs, a.LastOffset)]
		out[s.base] = append(out[s.base], a)
	}
	return out
}

func mapsKeys(m map[int64][]AbortedTxn) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestTxnFollowerCopiesMarkers(t *testing.T) {
	e := newEnv(t)
	txnWorkload(t, e.log)
	f := newEnv(t)
	all, _ := readAll(t, e.log)
	// Batch by batch, as replica fetches deliver them in pieces.
	for rest := all; len(rest) > 0; {
		n := min(len(rest), 150)
		// cut at a batch boundary
		cut := 0
		for p := rest; len(p) > 0; {
			first, r, err := batch.Split(p)
			if err != nil {
				t.Fatal(err)
			}
			if cut+len(first) > n && cut > 0 {
				break
			}
			cut += len(first)
			p = r
		}
		if _, err := f.log.Append(rest[:cut], AppendOptions{}); err != nil {
			t.Fatalf("follower append: %v", err)
		}
		rest = rest[cut:]
	}
	f.log.SetHighWatermark(f.log.LogEndOffset())
	want, got := stateOf(e.log), stateOf(f.log)
	got.Index = regroup(got.Index, e.log)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("follower state\n got %+v\nwant %+v", got, want)
	}
}

func TestTxnTruncateRecomputesOngoing(t *testing.T) {
	e := newEnv(t)
	l := e.log
	ts := baseTs
	leaderAppend(t, l, txnBatch(t, 1, 0, 0, 2, true, "a", ts)) // 0-1
	if err := l.Roll(); err != nil {                           // snapshot at 2: p1 open
		t.Fatal(err)
	}
	leaderAppend(t, l, txnBatch(t, 2, 0, 0, 1, true, "b", ts))     // 2
	abort := mustMarker(t, l, producer.Marker{ProducerID: 1})      // 3
	leaderAppend(t, l, txnBatch(t, -1, 0, 0, 1, false, "p", ts))   // 4
	mustMarker(t, l, producer.Marker{ProducerID: 2, Commit: true}) // 5
	leaderAppend(t, l, txnBatch(t, 5, 0, 0, 1, true, "e", ts))     // 6
	if got := allAborted(l); len(got) != 1 || got[0].LastOffset != abort {
		t.Fatalf("aborted %+v", got)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Truncate(6); err != nil { // p5's transaction goes
		t.Fatal(err)
	}
	if _, ok := l.OngoingTxn(5); ok {
		t.Fatal("p5's transaction above the truncation point is still open")
	}
	if _, ok := l.FirstUnstableOffset(); ok {
		t.Fatal("unstable offset after truncating the only open transaction away")
	}
	if err := l.Truncate(3); err != nil { // the ABORT and the COMMIT go: p1 and p2 open again
		t.Fatal(err)
	}
	if f, ok := l.OngoingTxn(1); !ok || f != 0 {
		t.Fatalf("p1 after cutting its ABORT: %d %v, want open at 0", f, ok)
	}
	if f, ok := l.OngoingTxn(2); !ok || f != 2 {
		t.Fatalf("p2 after cutting its COMMIT: %d %v, want open at 2", f, ok)
	}
	if f, _ := l.FirstUnstableOffset(); f != 0 {
		t.Fatalf("first unstable %d, want 0", f)
	}
	if got := allAborted(l); len(got) != 0 {
		t.Fatalf("aborted entries past the truncation point remain: %+v", got)
	}
	if got := txnIndexFiles(t, e.fs, e.dir); len(got) != 0 {
		t.Fatalf(".txnindex files keep entries past the truncation point: %+v", got)
	}
	// A reopen agrees.
	want := stateOf(l)
	e.reopen()
	if got := stateOf(e.log); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen %+v, want %+v", got, want)
	}
	if err := e.log.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.log.FirstUnstableOffset(); ok || len(e.log.TxnProducers()) != 0 {
		t.Fatal("transactions survive a full truncation")
	}
}

// TestTxnRecoveryDropsIndexEntriesNotBackedByTheLog: the active segment's
// .txnindex may hold unsynced bytes a crash garbled; recovery keeps of it
// only entries pointing at a marker of their producer and rewrites the
// file (a torn tail included).
func TestTxnRecoveryDropsIndexEntriesNotBackedByTheLog(t *testing.T) {
	e := newEnv(t)
	leaderAppend(t, e.log, txnBatch(t, -1, 0, 0, 2, false, "p", baseTs)) // 0-1
	leaderAppend(t, e.log, txnBatch(t, 1, 0, 0, 1, true, "a", baseTs))   // 2
	m := mustMarker(t, e.log, producer.Marker{ProducerID: 1})            // 3
	leaderAppend(t, e.log, txnBatch(t, 2, 0, 0, 1, true, "b", baseTs))   // 4
	good := AbortedTxn{ProducerID: 1, FirstOffset: 2, LastOffset: m, LastStableOffset: m + 1}
	e.reopen() // the close snapshot is at 5: nothing after it to replay
	path := e.dir + "/" + SegmentFileName(0, TxnIndexFileSuffix)
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"entry at a plain batch", encodeTxnIndex([]AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2}, good})},
		{"entry of another producer's batch", encodeTxnIndex([]AbortedTxn{good, {ProducerID: 7, FirstOffset: 4, LastOffset: 4, LastStableOffset: 4}})},
		{"torn tail", append(encodeTxnIndex([]AbortedTxn{good}), 0, 0, 0, 9, 9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.log.Close()
			if err := vfs.WriteFileAtomic(e.fs, path, tc.file); err != nil {
				t.Fatal(err)
			}
			e.open(false, 0, 0)
			if got := allAborted(e.log); !reflect.DeepEqual(got, []AbortedTxn{good}) {
				t.Fatalf("recovered index %+v, want only %+v", got, good)
			}
			if got := txnIndexFiles(t, e.fs, e.dir); !reflect.DeepEqual(got, map[int64][]AbortedTxn{0: {good}}) {
				t.Fatalf(".txnindex file %+v after recovery", got)
			}
			if n := e.log.Recovery().RebuiltTxnIndexes; n != 1 {
				t.Fatalf("RecoveryReport.RebuiltTxnIndexes = %d, want 1", n)
			}
		})
	}
}

// TestTxnSealedSegmentExposesTxnIndex: tiering copies a sealed segment's
// .txnindex with it (none for a segment without aborts).
func TestTxnSealedSegmentExposesTxnIndex(t *testing.T) {
	e := newEnv(t)
	leaderAppend(t, e.log, txnBatch(t, 1, 0, 0, 2, true, "a", baseTs))
	m := mustMarker(t, e.log, producer.Marker{ProducerID: 1})
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	leaderAppend(t, e.log, txnBatch(t, -1, 0, 0, 1, false, "p", baseTs))
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	ss, err := e.log.OpenSealedSegment(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Release()
	if ss.TxnIndex.R == nil {
		t.Fatal("no .txnindex for a segment with an abort")
	}
	b := make([]byte, ss.TxnIndex.Size)
	if _, err := ss.TxnIndex.R.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTxnIndex(b)
	if want := []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: m, LastStableOffset: m + 1}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("uploaded .txnindex %+v %v, want %+v", got, err, want)
	}
	plain, err := e.log.OpenSealedSegment(m + 1)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Release()
	if plain.TxnIndex.R != nil || plain.TxnIndex.Size != 0 {
		t.Fatal("a .txnindex for a segment without aborts")
	}
}

// TestTxnProducersExpireAtRollUnlessOpen: producer.id.expiration.ms forgets
// an idle transactional producer at a roll, never one with an open
// transaction.
func TestTxnProducersExpireAtRollUnlessOpen(t *testing.T) {
	e := newEnv(t)
	leaderAppend(t, e.log, txnBatch(t, 1, 0, 0, 1, true, "a", baseTs))
	leaderAppend(t, e.log, txnBatch(t, 2, 0, 0, 1, true, "b", baseTs))
	mustMarker(t, e.log, producer.Marker{ProducerID: 2, Commit: true})
	e.clock.Advance(25 * time.Hour)
	if err := e.log.Roll(); err != nil {
		t.Fatal(err)
	}
	ps := e.log.TxnProducers()
	if len(ps) != 1 || ps[0].ID != 1 || ps[0].FirstOffset != 0 {
		t.Fatalf("after expiry: %+v, want only producer 1 with its open transaction", ps)
	}
}

// TestTxnConcurrentReaders runs the lock-free and txnMu readers
// (LastStableOffset, AbortedTxns, OngoingTxn, TxnProducers) against a
// writer of transactions, markers and rolls and a goroutine raising the
// high watermark (run under -race). Without truncation the LSO never goes
// back, and the aborted list is always in marker order.
func TestTxnConcurrentReaders(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 2048 })
	l := e.log
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				lso := l.LastStableOffset()
				if lso < last {
					errs <- fmt.Errorf("LSO went back from %d to %d", last, lso)
					return
				}
				last = lso
				ab := l.AbortedTxns(0, lso)
				for i := 1; i < len(ab); i++ {
					if ab[i].LastOffset <= ab[i-1].LastOffset {
						errs <- fmt.Errorf("aborted list out of order: %+v", ab)
						return
					}
				}
				l.OngoingTxn(1)
				l.TxnProducers()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			l.SetHighWatermark(max(l.HighWatermark(), l.LogEndOffset()))
		}
	}()
	for i := range 400 {
		pid := int64(1 + i%3)
		switch i % 4 {
		case 0, 1:
			leaderAppend(t, l, txnBatch(t, pid, 0, 0, 2, true, "x", baseTs))
		case 2:
			mustMarker(t, l, producer.Marker{ProducerID: pid, Commit: i%8 == 2})
		case 3:
			leaderAppend(t, l, txnBatch(t, -1, 0, 0, 1, false, "p", baseTs))
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestTxnFencedEpochBatchRefused: after a fencing ABORT at a bumped epoch,
// a late transactional batch of the old epoch is refused and writes
// nothing (it would open a transaction nobody ends).
func TestTxnFencedEpochBatchRefused(t *testing.T) {
	e := newEnv(t)
	leaderAppend(t, e.log, txnBatch(t, 1, 3, 0, 1, true, "a", baseTs))
	mustMarker(t, e.log, producer.Marker{ProducerID: 1, ProducerEpoch: 4})
	leo := e.log.LogEndOffset()
	_, err := e.log.Append(txnBatch(t, 1, 3, 1, 1, true, "late", baseTs), AppendOptions{LeaderEpoch: 1, AssignOffsets: true})
	if !errors.Is(err, producer.ErrInvalidProducerEpoch) || !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("old-epoch batch after the fence: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if e.log.LogEndOffset() != leo {
		t.Fatal("the refused batch was written")
	}
	if _, ok := e.log.OngoingTxn(1); ok {
		t.Fatal("the refused batch opened a transaction")
	}
	// The new epoch writes.
	leaderAppend(t, e.log, txnBatch(t, 1, 4, 0, 1, true, "b", baseTs))
	// A follower copies whatever its leader wrote (no check).
	f := newEnv(t)
	all, _ := readAll(t, e.log)
	if _, err := f.log.Append(all, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestTxnTruncatedSnapshotStaysGoneAfterCrash: a truncation removes the
// snapshots of the cut history durably, so a power loss after new data
// was written and flushed over the cut cannot bring back a snapshot that
// claims the old history's open transaction.
func TestTxnTruncatedSnapshotStaysGoneAfterCrash(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnvFS(t, mem, "/data/t-0")
	leaderAppend(t, e.log, txnBatch(t, -1, 0, 0, 1, false, "p", baseTs)) // 0
	leaderAppend(t, e.log, txnBatch(t, 11, 0, 0, 3, true, "t", baseTs))  // 1-3
	e.reopen()                                                           // snapshot at 4: p11 open at 1
	if err := e.log.Truncate(2); err != nil {                            // the batch 1-3 goes
		t.Fatal(err)
	}
	for range 4 {
		leaderAppend(t, e.log, txnBatch(t, -1, 0, 0, 1, false, "q", baseTs)) // 1..4
	}
	if err := e.log.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.log.OngoingTxn(11); ok {
		t.Fatal("the cut transaction is open before the crash")
	}
	rp := e.log.RecoveryPoint()
	crashed := mem.CrashClone(0, rand.New(rand.NewPCG(1, 2)))
	e.log.Close()
	e.fs = crashed
	e.open(false, rp, 0)
	if f, ok := e.log.OngoingTxn(11); ok {
		t.Fatalf("after a power loss the cut history's transaction is open again at %d", f)
	}
	if _, ok := e.log.FirstUnstableOffset(); ok {
		t.Fatal("an unstable offset after the power loss")
	}
}

// TestTxnFirstUnstableNotBelowLogStart: DeleteRecords past an open
// transaction's first offset moves the first unstable offset (and so the
// LSO) up to the new log start, as Kafka clamps it.
func TestTxnFirstUnstableNotBelowLogStart(t *testing.T) {
	e := newEnv(t)
	leaderAppend(t, e.log, txnBatch(t, -1, 0, 0, 1, false, "p", baseTs)) // 0
	leaderAppend(t, e.log, txnBatch(t, 1, 0, 0, 2, true, "t", baseTs))   // 1-2
	leaderAppend(t, e.log, txnBatch(t, -1, 0, 0, 3, false, "p", baseTs)) // 3-5
	e.log.SetHighWatermark(e.log.LogEndOffset())
	if got := e.log.LastStableOffset(); got != 1 {
		t.Fatalf("LSO %d, want 1", got)
	}
	if err := e.log.SetLogStartOffset(3); err != nil {
		t.Fatal(err)
	}
	if f, ok := e.log.FirstUnstableOffset(); !ok || f != 3 {
		t.Fatalf("first unstable after DeleteRecords to 3: %d %v, want 3", f, ok)
	}
	if got := e.log.LastStableOffset(); got != 3 {
		t.Fatalf("LSO %d, want 3", got)
	}
}
