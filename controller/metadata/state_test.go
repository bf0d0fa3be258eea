package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/google/uuid"
)

// randomLog drives the planners with a random workload against a leader
// image and returns the committed log: one batch per accepted plan, each
// already applied to the returned leader state at offsets 1, 2, ....
// It checks the image's invariants after every batch.
func randomLog(t *testing.T, seed uint64, steps int) ([][]Record, *State) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	st := NewState()
	var log [][]Record
	commit := func(recs []Record) {
		if len(recs) == 0 {
			return
		}
		off := int64(len(log) + 1)
		if err := st.ApplyBatch(off, recs); err != nil {
			t.Fatalf("seed %d: planned batch refused at %d: %v", seed, off, err)
		}
		log = append(log, recs)
		checkInvariants(t, st)
	}
	incarnations := 0
	brokerIDs := []int32{1, 2, 3, 4, 5}
	var segs []RemoteSegmentRecord
	for i := 0; i < steps; i++ {
		b := brokerIDs[rng.IntN(len(brokerIDs))]
		switch op := rng.IntN(12); op {
		case 0:
			incarnations++
			recs, _, err := st.PlanRegisterBroker(RegisterBrokerRequest{
				BrokerID: b, IncarnationID: uuid.NewSHA1(uuid.Nil, fmt.Appendf(nil, "%d", incarnations)),
				Rack: fmt.Sprintf("r%d", b%3), ExistingSessionAlive: rng.IntN(4) == 0,
				PreviousBrokerEpoch: st.BrokerEpoch(b) * int64(rng.IntN(2)), // clean or unclean restart
			})
			if err == nil {
				commit(recs)
			}
		case 1, 2:
			recs, _, err := st.PlanBrokerHeartbeat(BrokerHeartbeatRequest{
				BrokerID: b, BrokerEpoch: st.BrokerEpoch(b), CurrentMetadataOffset: st.Offset(),
				WantFence: rng.IntN(16) == 0, WantShutDown: rng.IntN(40) == 0,
			})
			if err == nil {
				commit(recs)
			}
		case 3:
			commit(st.PlanFenceBroker(b, nil))
		case 4:
			ct := CreateTopic{Name: fmt.Sprintf("t%d", rng.IntN(8)), NumPartitions: int32(1 + rng.IntN(4)), ReplicationFactor: int16(1 + rng.IntN(3))}
			if rng.IntN(3) == 0 {
				// A restore under one of a few fixed IDs: often taken by a
				// live topic or by a removed one's remaining segments.
				ct.TopicID = uuid.NewSHA1(uuid.Nil, fmt.Appendf(nil, "topic%d", rng.IntN(3)))
			}
			if rng.IntN(3) == 0 {
				ct.Configs = map[string]string{ConfigUncleanLeaderElectionEnable: "true", ConfigRetentionMs: "1000"}
			}
			recs, _ := st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{ct}}, rng)
			commit(recs)
		case 5:
			recs, _ := st.PlanDeleteTopics([]string{fmt.Sprintf("t%d", rng.IntN(8))}, nil)
			commit(recs)
		case 6, 7:
			// A partition leader shrinks or expands its ISR.
			topics := st.Topics()
			if len(topics) == 0 {
				continue
			}
			ti := topics[rng.IntN(len(topics))]
			p, _ := st.Partition(ti.ID, rng.Int32N(ti.NumPartitions))
			if p.Leader == NoLeader {
				continue
			}
			isr := []int32{p.Leader}
			for _, r := range p.Replicas {
				if r != p.Leader && rng.IntN(2) == 0 {
					isr = append(isr, r)
				}
			}
			recs, res := st.PlanAlterPartition(AlterPartitionRequest{
				BrokerID: p.Leader, BrokerEpoch: st.BrokerEpoch(p.Leader), TopicID: p.TopicID, Partition: p.Partition,
				LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr,
			})
			if res.Err == nil {
				commit(recs)
			}
		case 8:
			topics := st.Topics()
			if len(topics) == 0 {
				continue
			}
			ti := topics[rng.IntN(len(topics))]
			recs, _ := st.PlanAlterConfigs(AlterConfigsRequest{Incremental: true, Resources: []AlterConfigResource{{
				Type: ResourceTopic, Name: ti.Name,
				Configs: []AlterConfigEntry{{Name: ConfigSegmentBytes, Value: ptr(fmt.Sprint(1 << (10 + rng.IntN(10))))}},
			}}})
			commit(recs)
		case 9, 10:
			// Remote segments: start new ones or advance existing ones.
			if len(segs) > 0 && rng.IntN(2) == 0 {
				s := segs[rng.IntN(len(segs))]
				s.State = RemoteSegmentState(rng.IntN(4))
				if recs, err := st.PlanRemoteSegment(s); err == nil {
					commit(recs)
				}
				continue
			}
			topics := st.Topics()
			if len(topics) == 0 {
				continue
			}
			ti := topics[rng.IntN(len(topics))]
			base := rng.Int64N(1000)
			s := RemoteSegmentRecord{
				SegmentID: uuid.NewSHA1(uuid.Nil, fmt.Appendf(nil, "seg%d", i)), TopicID: ti.ID,
				Partition: rng.Int32N(ti.NumPartitions), BaseOffset: base, EndOffset: base + rng.Int64N(100),
				LeaderEpochs: []EpochStart{{Epoch: 0, StartOffset: base}}, SizeBytes: rng.Int64N(1 << 20), BrokerID: b,
			}
			if recs, err := st.PlanRemoteSegment(s); err == nil {
				commit(recs)
				segs = append(segs, s)
			}
		case 11:
			commit([]Record{&NoOpRecord{}})
		}
	}
	return log, st
}

// checkInvariants asserts what the planners promise about every image.
func checkInvariants(t *testing.T, st *State) {
	t.Helper()
	for _, ti := range st.Topics() {
		for _, p := range st.Partitions(ti.ID) {
			if err := checkAssignment(p.Replicas, p.ISR, p.Leader); err != nil {
				t.Fatalf("%s-%d: %v", ti.Name, p.Partition, err)
			}
			// An ISR empties only when its last member restarted
			// uncleanly (KIP-966), and then nobody leads.
			if len(p.ISR) == 0 && p.Leader != NoLeader {
				t.Fatalf("%s-%d: empty ISR with leader %d", ti.Name, p.Partition, p.Leader)
			}
			if err := checkELR(p.Replicas, p.ISR, p.ELR, p.LastKnownELR, p.LeaderRecoveryState); err != nil {
				t.Fatalf("%s-%d: %v", ti.Name, p.Partition, err)
			}
			if len(p.ELR) > 0 && len(p.ISR) >= st.MinInsyncReplicas(ti.Name, len(p.Replicas)) {
				t.Fatalf("%s-%d: ELR %v with ISR %v at min ISR", ti.Name, p.Partition, p.ELR, p.ISR)
			}
			if p.Leader != NoLeader {
				if b, ok := st.Broker(p.Leader); !ok || b.Fenced {
					t.Fatalf("%s-%d: leader %d is fenced or unregistered", ti.Name, p.Partition, p.Leader)
				}
			}
		}
	}
}

// replay applies a log to a state, batch i at offset i+1, from batch from.
func replay(t *testing.T, st *State, log [][]Record, from int) {
	t.Helper()
	for i := from; i < len(log); i++ {
		recs, err := DecodeBatch(EncodeBatch(log[i]))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ApplyBatch(int64(i+1), recs); err != nil {
			t.Fatalf("replay of batch %d: %v", i+1, err)
		}
	}
}

func marshal(t *testing.T, st *State) []byte {
	t.Helper()
	b, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStateReplayIsDeterministicAndSnapshotsResume replays random logs
// into fresh states, and into states restored from a snapshot taken at
// every tenth batch, and requires byte-identical snapshots at the end.
func TestStateReplayIsDeterministicAndSnapshotsResume(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		log, leader := randomLog(t, seed, 400)
		want := marshal(t, leader)
		a, b := NewState(), NewState()
		replay(t, a, log, 0)
		replay(t, b, log, 0)
		if !bytes.Equal(marshal(t, a), want) || !bytes.Equal(marshal(t, b), want) {
			t.Fatalf("seed %d: replay differs from the leader's image", seed)
		}
		mid, done := NewState(), 0
		for k := 0; k < len(log); k += 10 {
			replay(t, mid, log[:k], done)
			done = k
			snap, err := Unmarshal(marshal(t, mid))
			if err != nil {
				t.Fatalf("seed %d: snapshot at %d: %v", seed, k, err)
			}
			replay(t, snap, log, k)
			if !bytes.Equal(marshal(t, snap), want) {
				t.Fatalf("seed %d: resuming from the snapshot at batch %d diverges", seed, k)
			}
		}
		if !reflect.DeepEqual(imageView(a), imageView(leader)) {
			t.Fatalf("seed %d: accessors differ", seed)
		}
		t.Logf("seed %d: %d batches, %d topics, %d brokers, snapshot %d bytes", seed, len(log), len(leader.Topics()), len(leader.Brokers()), len(want))
	}
}

// imageView collects everything the accessors expose.
func imageView(st *State) map[string]any {
	v := map[string]any{"offset": st.Offset(), "brokers": st.Brokers(), "topics": st.Topics()}
	for _, ti := range st.Topics() {
		v["p/"+ti.Name] = st.Partitions(ti.ID)
		v["c/"+ti.Name] = st.TopicConfig(ti.Name)
	}
	for _, tp := range st.RemotePartitions() {
		v[fmt.Sprintf("r/%s/%d", tp.TopicID, tp.Partition)] = st.RemoteSegments(tp.TopicID, tp.Partition)
	}
	v["removed"] = removedView(st)
	v["cluster"] = st.ClusterID()
	return v
}

func TestStateUnmarshalOfMarshalIsEqual(t *testing.T) {
	_, st := randomLog(t, 42, 600)
	b := marshal(t, st)
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(imageView(back), imageView(st)) {
		t.Fatal("accessors differ after Unmarshal")
	}
	if !bytes.Equal(marshal(t, back), b) {
		t.Fatal("re-marshal differs")
	}
	if !bytes.Equal(marshal(t, st.Clone()), b) {
		t.Fatal("clone marshals differently")
	}
	// A clone is independent: changing it leaves the original alone.
	c := st.Clone()
	if recs := c.PlanFenceBroker(1, nil); len(recs) > 0 {
		if err := c.ApplyBatch(c.Offset()+1, recs); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(marshal(t, st), b) {
			t.Fatal("applying to a clone changed the original")
		}
	}
	// Accessors return copies.
	for _, ti := range st.Topics() {
		ps := st.Partitions(ti.ID)
		ps[0].ISR[0] = 999
		ps[0].Replicas[0] = 999
	}
	if !bytes.Equal(marshal(t, st), b) {
		t.Fatal("mutating accessor results changed the state")
	}
}

func TestStateUnmarshalRejectsDamage(t *testing.T) {
	_, st := randomLog(t, 7, 300)
	b := marshal(t, st)
	for n := 0; n < len(b); n += 1 + n/8 {
		if _, err := Unmarshal(b[:n]); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("cut at %d of %d: %v", n, len(b), err)
		}
	}
	for i := 0; i < len(b); i += 1 + i/16 {
		c := slices.Clone(b)
		c[i] ^= 0x20
		if _, err := Unmarshal(c); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
}

// FuzzUnmarshal: Unmarshal never panics, and anything it accepts
// re-marshals to bytes that decode and re-marshal identically. The
// checksum is recomputed over the fuzzed body so the fuzzer reaches the
// body decoder; the version byte is kept when it is one Unmarshal reads
// (so version 0 bodies are fuzzed too), else set to the current one.
func FuzzUnmarshal(f *testing.F) {
	empty, _ := NewState().Marshal()
	f.Add(empty)
	h := newHarness()
	for _, r := range sampleRecords() {
		_ = h.st.Apply(h.next, r)
		h.next++
	}
	b, _ := h.st.Marshal()
	f.Add(b)
	fixture, _ := snapshotFixture(f).Marshal() // has a removed section
	f.Add(fixture)
	scram, _ := scramFixture(f).Marshal() // has a scram section
	f.Add(scram)
	if v0, err := os.ReadFile("testdata/snapshot/v0.snap"); err == nil {
		f.Add(v0)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= snapshotHeader {
			b = slices.Clone(b)
			copy(b, snapshotMagic)
			if b[len(snapshotMagic)] > snapshotVersion {
				b[len(snapshotMagic)] = snapshotVersion
			}
			putCRC(b)
		}
		s, err := Unmarshal(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error kind: %v", err)
			}
			return
		}
		again := marshal(t, s)
		s2, err := Unmarshal(again)
		if err != nil || !bytes.Equal(marshal(t, s2), again) {
			t.Fatalf("re-marshal unstable: %v", err)
		}
	})
}

func TestStateApplyRefusalLeavesStateUnchanged(t *testing.T) {
	_, st := randomLog(t, 3, 300)
	before := marshal(t, st)
	off := st.Offset() + 1
	missing := uuid.MustParse("00000000-0000-4000-8000-000000000001")
	topic := st.Topics()
	bad := []Record{
		&RegisterBrokerRecord{BrokerID: -1, BrokerEpoch: 1 << 40},
		&UnregisterBrokerRecord{BrokerID: 77, BrokerEpoch: 1},
		&BrokerRegistrationChangeRecord{BrokerID: 77, Fenced: ptr(true)},
		&TopicRecord{Name: "..", TopicID: missing},
		&TopicRecord{Name: "fresh", TopicID: uuid.Nil},
		&PartitionRecord{TopicID: missing, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&PartitionChangeRecord{TopicID: missing},
		&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "no-such-topic", Name: "x", Value: ptr("1")},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "01", Name: "x", Value: ptr("1")},
		&RemoveTopicRecord{TopicID: missing},
		&RemoteSegmentRecord{SegmentID: missing, TopicID: missing, State: CopyStarted},
		&FeatureLevelRecord{Name: "x", Level: -1},
		&ClusterIDRecord{ClusterID: ""},
		&ClusterIDRecord{ClusterID: "has space"},
	}
	if st.ClusterID() != "" {
		bad = append(bad, &ClusterIDRecord{ClusterID: st.ClusterID() + "x"})
	}
	if len(topic) > 0 {
		id := topic[0].ID
		p, _ := st.Partition(id, 0)
		bad = append(bad,
			&TopicRecord{Name: topic[0].Name, TopicID: missing},
			&PartitionRecord{TopicID: id, Partition: topic[0].NumPartitions + 1, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
			&PartitionRecord{TopicID: id, Partition: topic[0].NumPartitions, Replicas: []int32{1, 1}, ISR: []int32{1}, Leader: 1},
			&PartitionChangeRecord{TopicID: id, Partition: 0, Leader: ptr(int32(99))},
			&PartitionChangeRecord{TopicID: id, Partition: 0, ISR: append(slices.Clone(p.ISR), 99)},
		)
	}
	for _, r := range bad {
		if err := st.Apply(off, r); !errors.Is(err, ErrInconsistentRecord) {
			t.Fatalf("%T %+v: err %v, want ErrInconsistentRecord", r, r, err)
		}
		if st.Offset() != off-1 || !bytes.Equal(marshal(t, st), before) {
			t.Fatalf("%T: refused record changed the state", r)
		}
	}
	if err := st.Apply(off-1, &NoOpRecord{}); !errors.Is(err, ErrOffsetRegression) {
		t.Fatalf("offset regression: %v", err)
	}
	if err := st.AdvanceTo(off); err != nil || st.Offset() != off {
		t.Fatalf("AdvanceTo: %v", err)
	}
}

// FinishedRemoteSegmentAt answers what a walk of the sorted
// RemoteSegments list answers (the last finished segment holding the
// offset, then the next one when it starts right after), on random
// partitions with overlapping segments (a new leader's upload may
// straddle an old one's) and segments in every state.
func TestFinishedRemoteSegmentAtMatchesTheSortedList(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	topic := uuid.New()
	states := []RemoteSegmentState{CopyStarted, CopyFinished, CopyFinished, CopyFinished, DeleteStarted}
	for round := range 200 {
		s := NewState()
		m := map[uuid.UUID]*RemoteSegmentInfo{}
		base := int64(0)
		for range rng.IntN(12) {
			base += int64(rng.IntN(40)) - 10 // gaps and overlaps
			base = max(base, 0)
			end := base + int64(rng.IntN(30))
			id := uuid.New()
			if rng.IntN(4) == 0 { // same base as another: the segment ID decides
				for _, o := range m {
					base, end = o.BaseOffset, o.EndOffset+int64(rng.IntN(3))
					break
				}
			}
			m[id] = &RemoteSegmentInfo{SegmentID: id, TopicID: topic, BaseOffset: base, EndOffset: end,
				State: states[rng.IntN(len(states))], LeaderEpochs: []EpochStart{{Epoch: 1, StartOffset: base}}}
			base = end + 1
		}
		s.remote[TopicPartition{topic, 0}] = m

		var finished []RemoteSegmentInfo
		for _, seg := range s.RemoteSegments(topic, 0) {
			if seg.State == CopyFinished {
				finished = append(finished, seg)
			}
		}
		for off := int64(-1); off <= base+2; off++ {
			var want *RemoteSegmentInfo
			var wantNext *RemoteSegmentInfo
			for i := len(finished) - 1; i >= 0; i-- {
				if finished[i].BaseOffset <= off && off <= finished[i].EndOffset {
					want = &finished[i]
					for _, c := range finished { // sorted: the first is the lowest ID
						if c.BaseOffset == want.EndOffset+1 {
							wantNext = &c
							break
						}
					}
					break
				}
			}
			got, next, ok := s.FinishedRemoteSegmentAt(topic, 0, off)
			if ok != (want != nil) || ok && got.SegmentID != want.SegmentID ||
				(next == nil) != (wantNext == nil) || next != nil && next.SegmentID != wantNext.SegmentID {
				t.Fatalf("round %d offset %d: got %v %v %v, want %v %v", round, off, ok, got, next, want, wantNext)
			}
			if ok {
				// A copy: the caller cannot reach into the image.
				got.LeaderEpochs[0].Epoch = 99
				if m[got.SegmentID].LeaderEpochs[0].Epoch != 1 {
					t.Fatal("the returned segment aliases the image")
				}
			}
		}
	}
}
