package share

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestJournal(t *testing.T) {
	k := Key{Group: "g", TopicID: testTopic, Partition: 1}
	j := NewJournal()
	j.UpdatesPerSnapshot = 2
	var log []LogRecord
	add := func(r Record) {
		key, value := EncodeRecord(r)
		log = append(log, LogRecord{Offset: int64(len(log)), Key: key, Value: value})
	}
	r, err := j.Initialize(k, 3, 10, 100)
	if err != nil || r.Type != SnapshotRecord || r.Snapshot.StartOffset != 10 || r.Snapshot.StateEpoch != 3 {
		t.Fatalf("initialize: %+v, %v", r, err)
	}
	add(r)
	types := []RecordType{}
	writes := []Update{
		{StartOffset: -1, DeliveryCompleteCount: 1, Batches: []StateBatch{{10, 14, Available, 1}, {15, 15, Acknowledged, 1}}},
		{StartOffset: 12, DeliveryCompleteCount: 1, Batches: []StateBatch{{12, 13, Archived, 2}}},
		{StartOffset: -1, DeliveryCompleteCount: 1, Batches: []StateBatch{{14, 14, Acknowledged, 1}}},
		{StartOffset: 14, DeliveryCompleteCount: 2, Batches: []StateBatch{{16, 16, Available, 1}}},
	}
	for i, u := range writes {
		r, err := j.Write(k, 3, int32(i), u, int64(200+i))
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		types = append(types, r.Type)
		add(r)
	}
	// Two updates per snapshot: update, update, snapshot, update.
	if want := []RecordType{UpdateRecord, UpdateRecord, SnapshotRecord, UpdateRecord}; !equalTypes(types, want) {
		t.Fatalf("record types %v, want %v", types, want)
	}
	want := PersistedState{SnapshotEpoch: 1, StateEpoch: 3, LeaderEpoch: 3, StartOffset: 14, DeliveryCompleteCount: 2,
		Batches: []StateBatch{{14, 15, Acknowledged, 1}, {16, 16, Available, 1}}}
	got, _ := j.State(k)
	if fmtState(got) != fmtState(want) {
		t.Fatalf("state %s, want %s", fmtState(got), fmtState(want))
	}
	replayed, err := Replay(log)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := replayed.State(k); fmtState(got) != fmtState(want) {
		t.Fatalf("replayed %s, want %s", fmtState(got), fmtState(want))
	}
	// Restored, the acknowledged head is done: SPSO 16, 16 available.
	p, err := Restore(DefaultConfig(), want)
	if err != nil || p.StartOffset() != 16 || p.InFlight() != 1 {
		t.Fatalf("restore: spso %d in flight %d, %v", p.StartOffset(), p.InFlight(), err)
	}

	if _, err := j.Write(k, 2, 9, Update{StartOffset: -1}, 300); !errors.Is(err, kerr.FencedStateEpoch) {
		t.Errorf("stale state epoch: %v", err)
	}
	if _, err := j.Write(k, 3, 2, Update{StartOffset: -1}, 300); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Errorf("stale leader epoch: %v", err)
	}
	if _, err := j.Initialize(k, 2, 0, 300); !errors.Is(err, kerr.FencedStateEpoch) {
		t.Errorf("initialize at an older state epoch: %v", err)
	}
	// An update of an older snapshot epoch (a zombie's) is ignored by replay.
	j.Apply(Record{Type: UpdateRecord, Key: k, Update: &UpdateValue{SnapshotEpoch: 0, LeaderEpoch: 9, StartOffset: 99}})
	if got, _ := j.State(k); got.StartOffset != 14 {
		t.Errorf("stale update applied: %+v", got)
	}
	for _, r := range j.Delete(k) {
		add(r)
	}
	if _, ok := j.State(k); ok {
		t.Error("deleted key still there")
	}
	replayed, err = Replay(log)
	if err != nil || replayed.Keys() != 0 {
		t.Fatalf("replay after delete: %d keys, %v", replayed.Keys(), err)
	}
}

func equalTypes(a, b []RecordType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func fmtState(s PersistedState) string {
	return fmt.Sprintf("epochs %d/%d/%d start %d complete %d %s",
		s.SnapshotEpoch, s.StateEpoch, s.LeaderEpoch, s.StartOffset, s.DeliveryCompleteCount, fmtBatches(s.Batches))
}

// TestJournalLastRedundantOffset: the log below the lowest current
// snapshot of a live key is redundant; a replay of what is above it gives
// the same journal; an unknown snapshot offset prunes nothing.
func TestJournalLastRedundantOffset(t *testing.T) {
	a := Key{Group: "a", TopicID: testTopic, Partition: 0}
	b := Key{Group: "b", TopicID: testTopic, Partition: 0}
	j := NewJournal()
	j.UpdatesPerSnapshot = 2
	if off, ok := j.LastRedundantOffset(); !ok || off != math.MaxInt64 {
		t.Fatalf("empty journal: %d %v, want everything redundant", off, ok)
	}
	var log []LogRecord
	add := func(recs ...Record) {
		first := int64(len(log))
		for _, r := range recs {
			key, value := EncodeRecord(r)
			log = append(log, LogRecord{Offset: int64(len(log)), Key: key, Value: value})
		}
		j.Placed(recs, first)
	}
	must := func(r Record, err error) Record {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	add(must(j.Initialize(a, 0, 0, 1))) // 0: a's snapshot
	add(must(j.Initialize(b, 0, 0, 1))) // 1: b's snapshot
	if off, _ := j.LastRedundantOffset(); off != 0 {
		t.Fatalf("redundant below %d, want 0", off)
	}
	for i := range 3 { // a: update, update, snapshot (at 4)
		add(must(j.Write(a, 0, 0, Update{StartOffset: int64(i + 1), Batches: []StateBatch{{int64(i + 1), int64(i + 1), Acknowledged, 1}}}, 2)))
	}
	if off, _ := j.LastRedundantOffset(); off != 1 {
		t.Fatalf("redundant below %d, want 1 (b's snapshot)", off)
	}
	add(must(j.Write(b, 0, 0, Update{StartOffset: 5}, 3))) // 5: b update
	add(must(j.Write(b, 0, 0, Update{StartOffset: 6}, 3))) // 6: b update
	add(must(j.Write(b, 0, 0, Update{StartOffset: 7}, 3))) // 7: b snapshot
	add(must(j.Write(a, 0, 0, Update{StartOffset: 8}, 3))) // 8: a update of the snapshot at 4
	off, ok := j.LastRedundantOffset()
	if !ok || off != 4 {
		t.Fatalf("redundant below %d %v, want 4 (a's snapshot)", off, ok)
	}
	pruned, err := Replay(log[off:])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Key{a, b} {
		want, _ := j.State(k)
		if got, _ := pruned.State(k); fmtState(got) != fmtState(want) {
			t.Errorf("%s from the pruned log: %s, want %s", k.Group, fmtState(got), fmtState(want))
		}
	}
	if got, _ := pruned.LastRedundantOffset(); got != off {
		t.Errorf("replayed journal: redundant below %d, want %d", got, off)
	}
	// Deleting a leaves b's snapshot the lowest.
	add(j.Delete(a)...)
	if off, _ := j.LastRedundantOffset(); off != 7 {
		t.Errorf("after deleting a: redundant below %d, want 7", off)
	}
	// A snapshot not placed yet (its append outstanding) prunes nothing;
	// reverted, the journal is as before.
	saved := j.Save(b)
	for range 3 {
		_ = must(j.Write(b, 0, 0, Update{StartOffset: 9}, 4))
	}
	if _, ok := j.LastRedundantOffset(); ok {
		t.Error("an unplaced snapshot: pruning allowed")
	}
	j.Revert(saved)
	if off, ok := j.LastRedundantOffset(); !ok || off != 7 {
		t.Errorf("reverted: redundant below %d %v, want 7", off, ok)
	}
	if st, _ := j.State(b); st.StartOffset != 7 {
		t.Errorf("reverted: b at %d, want 7", st.StartOffset)
	}
}
