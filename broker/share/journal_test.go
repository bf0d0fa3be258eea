package share

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestJournal(t *testing.T) {
	k := Key{Group: "g", TopicID: testTopic, Partition: 1}
	j := NewJournal()
	j.UpdatesPerSnapshot = 2
	var log [][2][]byte
	add := func(r Record) {
		key, value := EncodeRecord(r)
		log = append(log, [2][]byte{key, value})
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
