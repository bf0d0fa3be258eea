package metadata

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/google/uuid"
)

// Fixed IDs of snapshotFixture.
var (
	fixtureOrders = uuid.MustParse("5d1c0a4e-7b1f-4c55-9a0e-3f2b9e1d0a01")
	fixtureGone   = uuid.MustParse("0a9f3c1e-2d4b-4e6a-8c7d-1b2a3c4d5e02")
	fixtureSegA   = uuid.MustParse("11111111-1111-4111-8111-111111111111")
	fixtureSegB   = uuid.MustParse("22222222-2222-4222-8222-222222222222")
	fixtureSegC   = uuid.MustParse("33333333-3333-4333-8333-333333333333")
)

const fixtureClusterID = "q1Sh-17bRiyp7dUWwcDOVQ"

// snapshotFixture builds, from explicit records (no planner, no rng), an
// image touching every snapshot section: features, brokers with listeners,
// a live topic with partitions, configs and a remote segment, and a removed
// topic ("gone") whose remote segments remain; no cluster id (see
// TestSnapshotCarriesRemovedTopicNamesAndClusterID).
// testdata/snapshot/v0.snap and v1.snap are this image as the version 0
// and version 1 encoders wrote it.
func snapshotFixture(t testing.TB) *State {
	t.Helper()
	seg := func(id, topic uuid.UUID, p int32, base int64, st RemoteSegmentState) *RemoteSegmentRecord {
		return &RemoteSegmentRecord{SegmentID: id, TopicID: topic, Partition: p, BaseOffset: base, EndOffset: base + 99,
			MaxTimestamp: 1700000000000 + base, LeaderEpochs: []EpochStart{{Epoch: 0, StartOffset: base}},
			SizeBytes: 4096, State: st, BrokerID: 1, EventTimestamp: 1700000000500}
	}
	recs := []Record{
		&FeatureLevelRecord{Name: "metadata.version", Level: 7},
		&RegisterBrokerRecord{BrokerID: 1, IncarnationID: incarnationID(1, 1), BrokerEpoch: 1, Rack: "a",
			Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}}},
		&RegisterBrokerRecord{BrokerID: 2, IncarnationID: incarnationID(2, 1), BrokerEpoch: 2, Rack: "b", Fenced: true},
		&TopicRecord{Name: "orders", TopicID: fixtureOrders},
		&PartitionRecord{TopicID: fixtureOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},
		&PartitionRecord{TopicID: fixtureOrders, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 4},
		&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Name: ConfigRetentionMs, Value: ptr("60000")},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "", Name: "log.retention.ms", Value: ptr("1000")},
		&TopicRecord{Name: "gone", TopicID: fixtureGone},
		&PartitionRecord{TopicID: fixtureGone, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		seg(fixtureSegA, fixtureOrders, 1, 0, CopyStarted),
		seg(fixtureSegB, fixtureGone, 0, 0, CopyStarted),
		seg(fixtureSegB, fixtureGone, 0, 0, CopyFinished),
		seg(fixtureSegC, fixtureGone, 0, 100, CopyStarted),
		seg(fixtureSegC, fixtureGone, 0, 100, DeleteStarted),
		&RemoveTopicRecord{TopicID: fixtureGone},
	}
	st := NewState()
	for i, r := range recs {
		if err := st.Apply(int64(i+1), r); err != nil {
			t.Fatalf("fixture record %d (%T): %v", i, r, err)
		}
	}
	return st
}

// removedView is what the image knows of topics that are gone but whose
// remote segments remain: topic ID → (name, known).
func removedView(st *State) map[uuid.UUID]string {
	out := map[uuid.UUID]string{}
	for _, tp := range st.RemotePartitions() {
		if name, exists, known := st.TopicNameByID(tp.TopicID); !exists {
			if !known {
				name = "<unknown>"
			}
			out[tp.TopicID] = name
		}
	}
	return out
}

func wantName(t *testing.T, st *State, id uuid.UUID, name string, exists, known bool) {
	t.Helper()
	n, e, k := st.TopicNameByID(id)
	if n != name || e != exists || k != known {
		t.Fatalf("TopicNameByID(%s) = (%q, exists %t, known %t), want (%q, %t, %t)", id, n, e, k, name, exists, known)
	}
}

func TestStateKeepsRemovedTopicNameUntilLastRemoteSegmentIsDeleted(t *testing.T) {
	st := snapshotFixture(t)
	wantName(t, st, fixtureOrders, "orders", true, true)
	wantName(t, st, fixtureGone, "gone", false, true)
	wantName(t, st, uuid.MustParse("44444444-4444-4444-8444-444444444444"), "", false, false)

	step := func(r Record) {
		t.Helper()
		if err := st.Apply(st.Offset()+1, r); err != nil {
			t.Fatal(err)
		}
		// Every step survives a snapshot round trip and a clone.
		b := marshal(t, st)
		back, err := Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(marshal(t, back), b) || !bytes.Equal(marshal(t, st.Clone()), b) {
			t.Fatal("round trip or clone differs")
		}
		if !reflect.DeepEqual(removedView(back), removedView(st)) {
			t.Fatalf("removed names after round trip %v, want %v", removedView(back), removedView(st))
		}
	}
	// A new topic may take the name; the removed one's name stays known.
	other := uuid.MustParse("55555555-5555-4555-8555-555555555555")
	step(&TopicRecord{Name: "gone", TopicID: other})
	wantName(t, st, other, "gone", true, true)
	wantName(t, st, fixtureGone, "gone", false, true)

	// DELETE_FINISHED of one of two segments: still known.
	step(&RemoteSegmentRecord{SegmentID: fixtureSegC, TopicID: fixtureGone, Partition: 0, State: DeleteFinished})
	wantName(t, st, fixtureGone, "gone", false, true)
	// A clone forgets independently of its original.
	c := st.Clone()
	step(&RemoteSegmentRecord{SegmentID: fixtureSegB, TopicID: fixtureGone, Partition: 0, State: DeleteStarted})
	step(&RemoteSegmentRecord{SegmentID: fixtureSegB, TopicID: fixtureGone, Partition: 0, State: DeleteFinished})
	wantName(t, st, fixtureGone, "", false, false)
	wantName(t, c, fixtureGone, "gone", false, true)

	// Removing a topic with no remote segment remembers nothing; removing
	// one whose segments are all deleting still does.
	step(&RemoveTopicRecord{TopicID: other})
	wantName(t, st, other, "", false, false)
	step(&RemoveTopicRecord{TopicID: fixtureOrders})
	wantName(t, st, fixtureOrders, "orders", false, true)
	step(&RemoteSegmentRecord{SegmentID: fixtureSegA, TopicID: fixtureOrders, Partition: 1, State: DeleteStarted})
	wantName(t, st, fixtureOrders, "orders", false, true)
	step(&RemoteSegmentRecord{SegmentID: fixtureSegA, TopicID: fixtureOrders, Partition: 1, State: DeleteFinished})
	wantName(t, st, fixtureOrders, "", false, false)
	if len(st.RemotePartitions()) != 0 || len(st.removedNames) != 0 || len(st.remoteTopics) != 0 {
		t.Fatalf("leftovers: %v %v %v", st.RemotePartitions(), st.removedNames, st.remoteTopics)
	}
}

func TestStateRefusesTopicRecordForIDWhoseRemoteSegmentsRemain(t *testing.T) {
	st := snapshotFixture(t)
	before := marshal(t, st)
	err := st.Apply(st.Offset()+1, &TopicRecord{Name: "restored", TopicID: fixtureGone})
	if !errors.Is(err, ErrInconsistentRecord) {
		t.Fatalf("err %v, want ErrInconsistentRecord", err)
	}
	if !bytes.Equal(marshal(t, st), before) {
		t.Fatal("refused record changed the state")
	}
}

func TestSnapshotCarriesRemovedTopicNamesAndClusterID(t *testing.T) {
	st := snapshotFixture(t)
	if err := st.Apply(st.Offset()+1, &ClusterIDRecord{ClusterID: fixtureClusterID}); err != nil {
		t.Fatal(err)
	}
	b := marshal(t, st)
	if b[len(snapshotMagic)] != snapshotVersion {
		t.Fatalf("version %d, want %d", b[len(snapshotMagic)], snapshotVersion)
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	wantName(t, back, fixtureGone, "gone", false, true)
	if back.ClusterID() != fixtureClusterID {
		t.Fatalf("cluster id %q after Unmarshal, want %q", back.ClusterID(), fixtureClusterID)
	}
	if !reflect.DeepEqual(imageView(back), imageView(st)) {
		t.Fatal("accessors differ after Unmarshal")
	}
	if !bytes.Equal(marshal(t, back), b) {
		t.Fatal("re-marshal differs")
	}
	// The restored image goes on forgetting the name as Apply does.
	for _, r := range []Record{
		&RemoteSegmentRecord{SegmentID: fixtureSegB, TopicID: fixtureGone, State: DeleteStarted},
		&RemoteSegmentRecord{SegmentID: fixtureSegB, TopicID: fixtureGone, State: DeleteFinished},
		&RemoteSegmentRecord{SegmentID: fixtureSegC, TopicID: fixtureGone, State: DeleteFinished},
	} {
		if err := back.Apply(back.Offset()+1, r); err != nil {
			t.Fatal(err)
		}
	}
	wantName(t, back, fixtureGone, "", false, false)
}

// TestSnapshotVersion0StillDecodes reads testdata/snapshot/v0.snap, written
// by the version 0 encoder from snapshotFixture before version 1 existed.
// Everything but the removed topic's name comes back; the image re-marshals
// as version 1 and keeps working.
func TestSnapshotVersion0StillDecodes(t *testing.T) {
	v0, err := os.ReadFile("testdata/snapshot/v0.snap")
	if err != nil {
		t.Fatal(err)
	}
	if v0[len(snapshotMagic)] != 0 {
		t.Fatalf("golden file is version %d", v0[len(snapshotMagic)])
	}
	st, err := Unmarshal(v0)
	if err != nil {
		t.Fatal(err)
	}
	fresh := snapshotFixture(t)
	got, want := imageView(st), imageView(fresh)
	if g, w := got["removed"], map[uuid.UUID]string{fixtureGone: "<unknown>"}; !reflect.DeepEqual(g, w) {
		t.Fatalf("removed topics from v0: %v, want %v", g, w)
	}
	delete(got, "removed")
	delete(want, "removed")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("v0 image differs from the fixture:\n%v\n%v", got, want)
	}
	wantName(t, st, fixtureOrders, "orders", true, true)
	wantName(t, st, fixtureGone, "", false, false) // version 0 never recorded it
	b := marshal(t, st)
	back, err := Unmarshal(b)
	if err != nil || b[len(snapshotMagic)] != snapshotVersion || !bytes.Equal(marshal(t, back), b) {
		t.Fatalf("re-marshal of a v0 image: version %d, %v", b[len(snapshotMagic)], err)
	}
	// Its removed topic's ID stays unusable until its segments are gone.
	if err := st.Apply(st.Offset()+1, &TopicRecord{Name: "gone", TopicID: fixtureGone}); !errors.Is(err, ErrInconsistentRecord) {
		t.Fatalf("recreating under a v0 removed topic's ID: %v", err)
	}
	// A damaged v0 snapshot is still refused.
	c := slices.Clone(v0)
	c[len(c)-1] ^= 1
	if _, err := Unmarshal(c); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("damaged v0: %v", err)
	}
}

// TestSnapshotVersion1StillDecodes reads testdata/snapshot/v1.snap, written
// by the version 1 encoder from snapshotFixture before version 2 existed:
// the image comes back whole (without a cluster id, which version 1 never
// had), re-marshals as the current version and takes the id when the next
// leader records it.
func TestSnapshotVersion1StillDecodes(t *testing.T) {
	v1, err := os.ReadFile("testdata/snapshot/v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	if v1[len(snapshotMagic)] != 1 {
		t.Fatalf("golden file is version %d", v1[len(snapshotMagic)])
	}
	st, err := Unmarshal(v1)
	if err != nil {
		t.Fatal(err)
	}
	got, want := imageView(st), imageView(snapshotFixture(t))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("v1 image differs from the fixture:\n%v\n%v", got, want)
	}
	b := marshal(t, st)
	back, err := Unmarshal(b)
	if err != nil || b[len(snapshotMagic)] != snapshotVersion || !bytes.Equal(marshal(t, back), b) {
		t.Fatalf("re-marshal of a v1 image: version %d, %v", b[len(snapshotMagic)], err)
	}
	if err := st.Apply(st.Offset()+1, &ClusterIDRecord{ClusterID: fixtureClusterID}); err != nil || st.ClusterID() != fixtureClusterID {
		t.Fatalf("recording the cluster id on a v1 image: %v, id %q", err, st.ClusterID())
	}
}

// withRemovedSection re-encodes st's snapshot with its removed section
// replaced by entries, for testing what Unmarshal accepts there.
func withRemovedSection(t *testing.T, st *State, entries []struct {
	id   uuid.UUID
	name string
}) []byte {
	t.Helper()
	saved := st.removedNames
	st.removedNames = map[uuid.UUID]string{}
	b := marshal(t, st) // ends with empty removed, acls, scram and quotas sections: four zero count bytes
	st.removedNames = saved
	e := encoder{b: b[:len(b)-4]}
	e.count(len(entries))
	for _, en := range entries {
		e.uuid(en.id)
		e.str(en.name)
	}
	e.count(0) // acls
	e.count(0) // scram
	e.count(0) // quotas
	putCRC(e.b)
	return e.b
}

func TestSnapshotUnmarshalRejectsBadRemovedSection(t *testing.T) {
	st := snapshotFixture(t)
	// A second removed topic with remote data, so ordering can be tested.
	for _, r := range []Record{
		&RemoveTopicRecord{TopicID: fixtureOrders},
	} {
		if err := st.Apply(st.Offset()+1, r); err != nil {
			t.Fatal(err)
		}
	}
	type entry = struct {
		id   uuid.UUID
		name string
	}
	good := []entry{{fixtureGone, "gone"}, {fixtureOrders, "orders"}} // ascending
	if b := withRemovedSection(t, st, good); !bytes.Equal(b, marshal(t, st)) {
		t.Fatal("hand-built section differs from Marshal's")
	}
	live := snapshotFixture(t)
	for name, c := range map[string]struct {
		st      *State
		entries []entry
	}{
		"out of order":       {st, []entry{good[1], good[0]}},
		"repeated":           {st, []entry{good[0], good[0]}},
		"invalid name":       {st, []entry{{fixtureGone, "a/b"}}},
		"empty name":         {st, []entry{{fixtureGone, ""}}},
		"no remote segments": {st, []entry{{uuid.MustParse("66666666-6666-4666-8666-666666666666"), "x"}}},
		"nil id":             {st, []entry{{uuid.Nil, "x"}}},
		"live topic":         {live, []entry{{fixtureOrders, "orders"}}},
	} {
		if _, err := Unmarshal(withRemovedSection(t, c.st, c.entries)); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: %v, want ErrCorruptSnapshot", name, err)
		}
	}
	b := marshal(t, st)
	b[len(snapshotMagic)] = snapshotVersion + 1
	if _, err := Unmarshal(b); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("unknown version: %v", err)
	}
	// A current body read as an older version does not parse: here
	// versions 0 and 1 (v2 and v3 differ only in the fields of live
	// partitions, which this image has none of; the fixture's own v3
	// body as v2 is checked below).
	for v := range byte(2) {
		b[len(snapshotMagic)] = v
		if _, err := Unmarshal(b); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("v%d body as v%d: %v", snapshotVersion, v, err)
		}
	}
	b = marshal(t, live)
	b[len(snapshotMagic)] = 2
	if _, err := Unmarshal(b); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("v%d body with partitions as v2: %v", snapshotVersion, err)
	}
}

// TestSnapshotVersion2StillDecodes reads testdata/snapshot/v2.snap, written
// by the version 2 encoder from snapshotFixture (with its cluster id)
// before version 3 added the partitions' ELR, last known ELR and leader
// recovery state: the image comes back whole, every partition with an
// empty ELR and RECOVERED, and re-marshals as the current version.
func TestSnapshotVersion2StillDecodes(t *testing.T) {
	v2, err := os.ReadFile("testdata/snapshot/v2.snap")
	if err != nil {
		t.Fatal(err)
	}
	if v2[len(snapshotMagic)] != 2 {
		t.Fatalf("golden file is version %d", v2[len(snapshotMagic)])
	}
	st, err := Unmarshal(v2)
	if err != nil {
		t.Fatal(err)
	}
	want := snapshotFixture(t)
	if err := want.Apply(want.Offset()+1, &ClusterIDRecord{ClusterID: fixtureClusterID}); err != nil {
		t.Fatal(err)
	}
	if got, want := imageView(st), imageView(want); !reflect.DeepEqual(got, want) {
		t.Fatalf("v2 image differs from the fixture:\n%v\n%v", got, want)
	}
	if st.ClusterID() != fixtureClusterID {
		t.Fatalf("cluster id %q", st.ClusterID())
	}
	for _, ti := range st.Topics() {
		for _, p := range st.Partitions(ti.ID) {
			if p.ELR != nil || p.LastKnownELR != nil || p.LeaderRecoveryState != LeaderRecovered {
				t.Fatalf("%s-%d from v2: ELR %v last known %v recovery %d", ti.Name, p.Partition, p.ELR, p.LastKnownELR, p.LeaderRecoveryState)
			}
		}
	}
	b := marshal(t, st)
	back, err := Unmarshal(b)
	if err != nil || b[len(snapshotMagic)] != snapshotVersion || !bytes.Equal(marshal(t, back), b) {
		t.Fatalf("re-marshal of a v2 image: version %d, %v", b[len(snapshotMagic)], err)
	}
}

// TestSnapshotCarriesELRAndRecoveryState: a partition's ELR, last known
// ELR and leader recovery state survive a snapshot round trip.
func TestSnapshotCarriesELRAndRecoveryState(t *testing.T) {
	st := snapshotFixture(t)
	rec := &PartitionChangeRecord{TopicID: fixtureOrders, Partition: 0, Leader: ptr(NoLeader), ISR: []int32{1},
		ELR: []int32{2}, LastKnownELR: []int32{1}}
	if err := st.Apply(st.Offset()+1, rec); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(st.Offset()+1, &PartitionChangeRecord{TopicID: fixtureOrders, Partition: 1, LeaderRecoveryState: ptr(LeaderRecovering)}); err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(marshal(t, st))
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := back.Partition(fixtureOrders, 0)
	p1, _ := back.Partition(fixtureOrders, 1)
	if !reflect.DeepEqual(p0.ELR, []int32{2}) || !reflect.DeepEqual(p0.LastKnownELR, []int32{1}) || p1.LeaderRecoveryState != LeaderRecovering {
		t.Fatalf("restored p0 ELR %v last known %v, p1 recovery %d", p0.ELR, p0.LastKnownELR, p1.LeaderRecoveryState)
	}
}

// TestSnapshotVersion3StillDecodes reads testdata/snapshot/v3.snap, written
// by the version 3 encoder from snapshotFixture (with its cluster id)
// before version 4 added the partitions' adding and removing replicas:
// the image comes back whole with no reassignment in progress, and
// re-marshals as the current version. The current body with live
// partitions does not parse as version 3.
func TestSnapshotVersion3StillDecodes(t *testing.T) {
	v3, err := os.ReadFile("testdata/snapshot/v3.snap")
	if err != nil {
		t.Fatal(err)
	}
	if v3[len(snapshotMagic)] != 3 {
		t.Fatalf("golden file is version %d", v3[len(snapshotMagic)])
	}
	st, err := Unmarshal(v3)
	if err != nil {
		t.Fatal(err)
	}
	want := snapshotFixture(t)
	if err := want.Apply(want.Offset()+1, &ClusterIDRecord{ClusterID: fixtureClusterID}); err != nil {
		t.Fatal(err)
	}
	if got, want := imageView(st), imageView(want); !reflect.DeepEqual(got, want) {
		t.Fatalf("v3 image differs from the fixture:\n%v\n%v", got, want)
	}
	for _, ti := range st.Topics() {
		for _, p := range st.Partitions(ti.ID) {
			if p.Reassigning() || p.AddingReplicas != nil || p.RemovingReplicas != nil {
				t.Fatalf("%s-%d from v3: adding %v removing %v", ti.Name, p.Partition, p.AddingReplicas, p.RemovingReplicas)
			}
		}
	}
	b := marshal(t, st)
	back, err := Unmarshal(b)
	if err != nil || b[len(snapshotMagic)] != snapshotVersion || !bytes.Equal(marshal(t, back), b) {
		t.Fatalf("re-marshal of a v3 image: version %d, %v", b[len(snapshotMagic)], err)
	}
	b[len(snapshotMagic)] = 3
	if _, err := Unmarshal(b); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("v%d body with partitions as v3: %v", snapshotVersion, err)
	}
}

// TestSnapshotCarriesReassignment: a partition's adding and removing
// replicas (KIP-455) survive a snapshot round trip.
func TestSnapshotCarriesReassignment(t *testing.T) {
	st := snapshotFixture(t)
	rec := &PartitionChangeRecord{TopicID: fixtureOrders, Partition: 0, Replicas: []int32{2, 1},
		AddingReplicas: []int32{2}, RemovingReplicas: []int32{}}
	if err := st.Apply(st.Offset()+1, &PartitionChangeRecord{TopicID: fixtureOrders, Partition: 0, Replicas: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(st.Offset()+1, rec); err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(marshal(t, st))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := back.Partition(fixtureOrders, 0)
	if !reflect.DeepEqual(p.Replicas, []int32{2, 1}) || !reflect.DeepEqual(p.AddingReplicas, []int32{2}) || p.RemovingReplicas != nil {
		t.Fatalf("restored %+v", p)
	}
}

// TestApplyRefusesInconsistentReassignment: adding and removing replicas
// must be disjoint replicas without repeats, and not every replica may be
// removing; a refused change leaves the image as it was.
func TestApplyRefusesInconsistentReassignment(t *testing.T) {
	st := snapshotFixture(t) // orders-1: replicas [2 1]
	before := marshal(t, st)
	for name, rec := range map[string]*PartitionChangeRecord{
		"adding not a replica":        {AddingReplicas: []int32{3}},
		"removing not a replica":      {RemovingReplicas: []int32{3}},
		"adding repeated":             {AddingReplicas: []int32{2, 2}},
		"both adding and removing":    {AddingReplicas: []int32{2}, RemovingReplicas: []int32{2}},
		"every replica removing":      {RemovingReplicas: []int32{2, 1}},
		"replicas drop an adding one": {Replicas: []int32{1}, AddingReplicas: []int32{2}, RemovingReplicas: []int32{}},
	} {
		rec.TopicID, rec.Partition = fixtureOrders, 1
		if err := st.Apply(st.Offset()+1, rec); !errors.Is(err, ErrInconsistentRecord) {
			t.Errorf("%s: %v, want ErrInconsistentRecord", name, err)
		}
		if !bytes.Equal(marshal(t, st), before) {
			t.Fatalf("%s: a refused record changed the image", name)
		}
	}
}
