package metadata

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// brokersState registers and unfences brokers with the given racks
// (racks[i] is broker i+1's rack).
func brokersState(t *testing.T, racks ...string) *State {
	t.Helper()
	st := NewState()
	off := int64(0)
	for i, rack := range racks {
		recs, _, err := st.PlanRegisterBroker(RegisterBrokerRequest{BrokerID: int32(i + 1), IncarnationID: uuid.NewSHA1(uuid.Nil, []byte{byte(i)}), Rack: rack})
		if err != nil {
			t.Fatal(err)
		}
		off++
		if err := st.ApplyBatch(off, recs); err != nil {
			t.Fatal(err)
		}
	}
	for i := range racks {
		id := int32(i + 1)
		recs, _, err := st.PlanBrokerHeartbeat(BrokerHeartbeatRequest{BrokerID: id, BrokerEpoch: st.BrokerEpoch(id), CurrentMetadataOffset: off})
		if err != nil {
			t.Fatal(err)
		}
		off++
		if err := st.ApplyBatch(off, recs); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestPlacementSpreadsReplicasAcrossRacksAndLeadersEvenly checks, over
// many layouts, replication factors and seeds, that every partition's
// replicas are distinct, span as many racks as possible, and that
// leadership (first replicas) is spread evenly over the brokers, every
// replica of a new partition in its ISR (all logs are empty), through
// PlanCreateTopics.
func TestPlacementSpreadsReplicasAcrossRacksAndLeadersEvenly(t *testing.T) {
	layouts := [][]string{
		{"", "", ""},
		{"a", "b", "c"},
		{"a", "a", "b", "b", "c", "c"},
		{"a", "a", "a", "b"},
		{"a", "b", "a", "b", "a"},
		{"x", "y", "z", "x", "y", "z", "x", "y", "z"},
	}
	for li, racks := range layouts {
		st := brokersState(t, racks...)
		numRacks := len(slices.Compact(slices.Sorted(slices.Values(racks))))
		for rf := 1; rf <= len(racks); rf++ {
			for seed := uint64(0); seed < 10; seed++ {
				n := len(racks) * 4
				var parts []*PartitionRecord
				recs, res := st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{{Name: "t", NumPartitions: int32(n), ReplicationFactor: int16(rf)}}}, rand.New(rand.NewPCG(seed, 0)))
				if res[0].Err != nil {
					t.Fatalf("layout %d rf %d: %v", li, rf, res[0].Err)
				}
				for _, r := range recs {
					if p, ok := r.(*PartitionRecord); ok {
						parts = append(parts, p)
					}
				}
				leaders := map[int32]int{}
				for _, p := range parts {
					if len(p.Replicas) != rf || len(slices.Compact(slices.Sorted(slices.Values(p.Replicas)))) != rf {
						t.Fatalf("layout %d rf %d: replicas %v", li, rf, p.Replicas)
					}
					used := map[string]bool{}
					for _, b := range p.Replicas {
						used[racks[b-1]] = true
					}
					if want := min(rf, numRacks); len(used) != want {
						t.Fatalf("layout %d rf %d seed %d: replicas %v span %d racks, want %d", li, rf, seed, p.Replicas, len(used), want)
					}
					if p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) {
						t.Fatalf("leader %d isr %v for replicas %v", p.Leader, p.ISR, p.Replicas)
					}
					leaders[p.Leader]++
				}
				for b := int32(1); b <= int32(len(racks)); b++ {
					if leaders[b] != 4 {
						t.Fatalf("layout %d rf %d seed %d: broker %d leads %d partitions, want 4 (%v)", li, rf, seed, b, leaders[b], leaders)
					}
				}
			}
		}
	}
}

func TestPlanCreateTopicsIsDeterministicForASeed(t *testing.T) {
	st := brokersState(t, "a", "b", "c", "a")
	req := CreateTopicsRequest{Topics: []CreateTopic{{Name: "x", NumPartitions: 8, ReplicationFactor: 1}, {Name: "y", NumPartitions: 3, ReplicationFactor: 1}}}
	r1, res1 := st.PlanCreateTopics(req, rand.New(rand.NewPCG(5, 5)))
	r2, res2 := st.PlanCreateTopics(req, rand.New(rand.NewPCG(5, 5)))
	if !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(res1, res2) {
		t.Fatal("same seed, different plan")
	}
	if res1[0].TopicID == res1[1].TopicID || res1[0].TopicID.Version() != 4 {
		t.Fatalf("topic ids %s %s", res1[0].TopicID, res1[1].TopicID)
	}
	r3, _ := st.PlanCreateTopics(req, rand.New(rand.NewPCG(6, 5)))
	if reflect.DeepEqual(r1, r3) {
		t.Fatal("different seeds gave the same plan")
	}
}

func TestPlanCreateTopicsRequestLevelErrors(t *testing.T) {
	st := brokersState(t, "", "")
	rng := rand.New(rand.NewPCG(1, 1))
	recs, res := st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{
		{Name: "dup", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "dup", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "ok", NumPartitions: -1, ReplicationFactor: -1},
		{Name: "both", NumPartitions: 2, Assignments: [][]int32{{1}}},
		{Name: "rf0", NumPartitions: 1, ReplicationFactor: 0},
		{Name: "o.k", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "o_k", NumPartitions: 1, ReplicationFactor: 1},
	}, DefaultPartitions: 3, DefaultReplicationFactor: 1}, rng)
	want := []*kerr.Error{kerr.InvalidRequest, kerr.InvalidRequest, nil, kerr.InvalidRequest, kerr.InvalidReplicationFactor, nil, kerr.InvalidTopicException}
	for i, w := range want {
		if w == nil {
			if res[i].Err != nil {
				t.Fatalf("%s: %v", res[i].Name, res[i].Err)
			}
			continue
		}
		if !errors.Is(res[i].Err, w) || ErrorCode(res[i].Err) != w.Code {
			t.Fatalf("%s: %v, want %v", res[i].Name, res[i].Err, w)
		}
	}
	if res[2].NumPartitions != 3 || res[2].ReplicationFactor != 1 {
		t.Fatalf("defaults not applied: %+v", res[2])
	}
	if len(recs) != 1+3+1+1 {
		t.Fatalf("%d records, want ok's topic and 3 partitions, o.k's topic and partition", len(recs))
	}
	recs, res = st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{{Name: "v", NumPartitions: 2, ReplicationFactor: 1}}, ValidateOnly: true}, rng)
	if len(recs) != 0 || res[0].Err != nil {
		t.Fatalf("validate-only: %d records, %v", len(recs), res[0].Err)
	}
}

// TestPlanReplicationFactorUpToUsableBrokers: a replication factor up to
// the number of usable brokers is placed (asked for, defaulted, given as
// assignments, for new partitions too); one above is
// INVALID_REPLICATION_FACTOR with Kafka's message and plans nothing; a
// fenced broker is not usable, and a manual assignment naming it keeps it
// out of the ISR.
func TestPlanReplicationFactorUpToUsableBrokers(t *testing.T) {
	st := brokersState(t, "", "", "")
	rng := rand.New(rand.NewPCG(1, 1))
	refused := func(what string, recs []Record, err error, rf, usable int) {
		t.Helper()
		msg := fmt.Sprintf("Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, usable)
		if len(recs) != 0 || !errors.Is(err, kerr.InvalidReplicationFactor) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %d records, %v; want INVALID_REPLICATION_FACTOR %q", what, len(recs), err, msg)
		}
	}
	for _, tc := range []struct {
		name string
		req  CreateTopicsRequest
	}{
		{"rf3", CreateTopicsRequest{Topics: []CreateTopic{{Name: "t3", NumPartitions: 2, ReplicationFactor: 3}}}},
		{"default rf2", CreateTopicsRequest{DefaultReplicationFactor: 2, Topics: []CreateTopic{{Name: "d2", NumPartitions: 1, ReplicationFactor: -1}}}},
		{"assignments", CreateTopicsRequest{Topics: []CreateTopic{{Name: "a", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{3, 1, 2}}}}}},
	} {
		recs, res := st.PlanCreateTopics(tc.req, rng)
		if res[0].Err != nil || len(recs) < 2 {
			t.Fatalf("%s: %v", tc.name, res[0].Err)
		}
		for _, r := range recs {
			if p, ok := r.(*PartitionRecord); ok && (!slices.Equal(p.ISR, p.Replicas) || p.Leader != p.Replicas[0]) {
				t.Fatalf("%s: partition %d replicas %v isr %v leader %d", tc.name, p.Partition, p.Replicas, p.ISR, p.Leader)
			}
		}
		if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
			t.Fatal(err)
		}
	}
	recs, res := st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{{Name: "t4", NumPartitions: 1, ReplicationFactor: 4}}}, rng)
	refused("rf4", recs, res[0].Err, 4, 3)
	recs, res = st.PlanCreateTopics(CreateTopicsRequest{ValidateOnly: true, DefaultReplicationFactor: 5, Topics: []CreateTopic{{Name: "t5", NumPartitions: 1, ReplicationFactor: -1}}}, rng)
	refused("default rf5 validate-only", recs, res[0].Err, 5, 3)
	recs, pres := st.PlanCreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Name: "t3", Count: 4}}}, rng)
	if pres[0].Err != nil || len(recs) != 2 {
		t.Fatalf("create-partitions rf3: %d records, %v", len(recs), pres[0].Err)
	}
	if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
		t.Fatal(err)
	}
	// Broker 3 fenced: two usable brokers.
	b3, _ := st.Broker(3)
	if err := st.Apply(st.Offset()+1, &BrokerRegistrationChangeRecord{BrokerID: 3, BrokerEpoch: b3.Epoch, Fenced: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	recs, pres = st.PlanCreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Name: "t3", Count: 5}}}, rng)
	refused("create-partitions rf3 over two usable brokers", recs, pres[0].Err, 3, 2)
	recs, pres = st.PlanCreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Name: "t3", Count: 5, Assignments: [][]int32{{3, 2, 1}}}}}, rng)
	if pres[0].Err != nil || len(recs) != 1 {
		t.Fatalf("manual assignment with a fenced broker: %v", pres[0].Err)
	}
	if p := recs[0].(*PartitionRecord); !slices.Equal(p.ISR, []int32{2, 1}) || p.Leader != 2 {
		t.Fatalf("manual assignment [3 2 1], 3 fenced: isr %v leader %d, want [2 1] and 2", p.ISR, p.Leader)
	}
	_, pres = st.PlanCreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Name: "t3", Count: 5, Assignments: [][]int32{{3, 2}}}}}, rng)
	if !errors.Is(pres[0].Err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("assignment of 2 replicas for an rf3 topic: %v", pres[0].Err)
	}
}

func TestPlanCreateTopicsWithGivenTopicID(t *testing.T) {
	st := brokersState(t, "", "")
	rng := rand.New(rand.NewPCG(3, 3))
	given := uuid.MustParse("7a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d")
	twice := uuid.MustParse("8a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d")
	// Validate-only answers as a real create would, without records or an ID.
	recs, res := st.PlanCreateTopics(CreateTopicsRequest{ValidateOnly: true, Topics: []CreateTopic{{Name: "r", NumPartitions: 1, ReplicationFactor: 1, TopicID: given}}}, rng)
	if len(recs) != 0 || res[0].Err != nil || res[0].TopicID != uuid.Nil {
		t.Fatalf("validate-only: %d records, %+v", len(recs), res[0])
	}
	recs, res = st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{
		{Name: "r", NumPartitions: 2, ReplicationFactor: 1, TopicID: given},
		{Name: "a", NumPartitions: 1, ReplicationFactor: 1, TopicID: twice},
		{Name: "b", NumPartitions: 1, ReplicationFactor: 1, TopicID: twice},
		{Name: "gen", NumPartitions: 1, ReplicationFactor: 1},
	}}, rng)
	if res[0].Err != nil || res[0].TopicID != given {
		t.Fatalf("given id: %+v", res[0])
	}
	for _, r := range res[1:3] {
		if !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Fatalf("%s: id given twice: %v", r.Name, r.Err)
		}
	}
	if res[3].Err != nil || res[3].TopicID == given || res[3].TopicID == twice || res[3].TopicID == uuid.Nil {
		t.Fatalf("generated id: %+v", res[3])
	}
	if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
		t.Fatal(err)
	}
	if ti, ok := st.TopicByID(given); !ok || ti.Name != "r" || ti.NumPartitions != 2 {
		t.Fatalf("topic under the given id: %+v %t", ti, ok)
	}
	// The ID is now taken, for a real create and a validate-only one alike.
	for _, validate := range []bool{false, true} {
		recs, res = st.PlanCreateTopics(CreateTopicsRequest{ValidateOnly: validate, Topics: []CreateTopic{{Name: "r2", NumPartitions: 1, ReplicationFactor: 1, TopicID: given}}}, rng)
		if len(recs) != 0 || !errors.Is(res[0].Err, kerr.TopicAlreadyExists) {
			t.Fatalf("validate-only=%t: taken id: %d records, %v", validate, len(recs), res[0].Err)
		}
	}
	// Removed while its segments remain: INVALID_REQUEST until they are
	// deleted, then a restore under the ID succeeds.
	seg := RemoteSegmentRecord{SegmentID: uuid.MustParse("9a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d"), TopicID: given, Partition: 1, EndOffset: 9}
	apply := func(recs ...Record) {
		t.Helper()
		if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
			t.Fatal(err)
		}
	}
	apply(&seg)
	del, _ := st.PlanDeleteTopics([]string{"r"}, nil)
	apply(del...)
	restore := CreateTopicsRequest{Topics: []CreateTopic{{Name: "r", NumPartitions: 2, ReplicationFactor: 1, TopicID: given}}}
	for _, validate := range []bool{false, true} {
		restore.ValidateOnly = validate
		recs, res = st.PlanCreateTopics(restore, rng)
		if len(recs) != 0 || !errors.Is(res[0].Err, kerr.InvalidRequest) {
			t.Fatalf("validate-only=%t: id with remote data left: %d records, %v", validate, len(recs), res[0].Err)
		}
	}
	seg.State = DeleteStarted
	apply(&seg)
	seg.State = DeleteFinished
	apply(&seg)
	restore.ValidateOnly = false
	recs, res = st.PlanCreateTopics(restore, rng)
	if res[0].Err != nil || res[0].TopicID != given {
		t.Fatalf("restore after deletion: %v", res[0].Err)
	}
	apply(recs...)
}

func TestErrorCodeMapsKafkaAndOtherErrors(t *testing.T) {
	if ErrorCode(nil) != 0 || ErrorName(nil) != "NONE" {
		t.Fatal("nil")
	}
	err := fmt.Errorf("%w: detail", kerr.FencedLeaderEpoch)
	if ErrorCode(err) != 74 || ErrorName(err) != "FENCED_LEADER_EPOCH" {
		t.Fatalf("%d %s", ErrorCode(err), ErrorName(err))
	}
	if ErrorCode(errors.New("x")) != -1 {
		t.Fatal("plain error")
	}
	// Every code a planner's error, or one it is given, is answered with.
	for _, c := range []struct {
		err  error
		code int16
		name string
	}{
		{kerr.TopicAlreadyExists, 36, "TOPIC_ALREADY_EXISTS"},
		{fmt.Errorf("%w: %w", ErrIllegalSegmentTransition, kerr.InvalidRequest), 42, "INVALID_REQUEST"},
		{ErrIllegalSegmentTransition, -1, "UNKNOWN_SERVER_ERROR"},
		{ErrCorruptRecord, -1, "UNKNOWN_SERVER_ERROR"},
		{context.DeadlineExceeded, -1, "UNKNOWN_SERVER_ERROR"},
		{fmt.Errorf("%w (%w)", kerr.RequestTimedOut, context.DeadlineExceeded), 7, "REQUEST_TIMED_OUT"},
		{kerr.UnknownServerError, -1, "UNKNOWN_SERVER_ERROR"},
	} {
		if got, name := ErrorCode(c.err), ErrorName(c.err); got != c.code || name != c.name {
			t.Errorf("%v: %d %s, want %d %s", c.err, got, name, c.code, c.name)
		}
	}
}

// TestPlanAlterPartitionRefusesAStaleLeader is the guard in one place: a
// leader deposed by a fencing may not change the ISR with its old epochs,
// and the partition epoch alone refuses a replayed request.
func TestPlanAlterPartitionRefusesAStaleLeader(t *testing.T) {
	st := brokersState(t, "", "", "")
	// A partition with every replica in sync.
	id := uuid.MustParse("00000000-0000-4000-8000-0000000000cc")
	off := st.Offset() + 1
	if err := st.ApplyBatch(off, []Record{&TopicRecord{Name: "t", TopicID: id}, &PartitionRecord{TopicID: id, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}}); err != nil {
		t.Fatal(err)
	}
	old, _ := st.Partition(id, 0)
	req := AlterPartitionRequest{BrokerID: 1, BrokerEpoch: st.BrokerEpoch(1), TopicID: id, LeaderEpoch: old.LeaderEpoch, PartitionEpoch: old.PartitionEpoch, NewISR: []int32{1, 2}}
	recs, ar := st.PlanAlterPartition(req)
	if ar.Err != nil || len(recs) != 1 || ar.PartitionEpoch != old.PartitionEpoch+1 {
		t.Fatalf("first change: %+v", ar)
	}
	off++
	if err := st.ApplyBatch(off, recs); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.Partition(id, 0); p.PartitionEpoch != ar.PartitionEpoch || !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("after apply: %+v", p)
	}
	// Replayed: stale partition epoch.
	if _, ar := st.PlanAlterPartition(req); !errors.Is(ar.Err, kerr.InvalidUpdateVersion) {
		t.Fatalf("replay: %v", ar.Err)
	}
	// Deposed: broker 1 fenced, broker 2 (the next ISR member in replica
	// order) leads with a new leader epoch.
	off++
	if err := st.ApplyBatch(off, st.PlanFenceBroker(1, nil)); err != nil {
		t.Fatal(err)
	}
	p, _ := st.Partition(id, 0)
	if p.Leader != 2 || p.LeaderEpoch != old.LeaderEpoch+1 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("after fencing: %+v", p)
	}
	req.PartitionEpoch = p.PartitionEpoch // even with a current partition epoch
	if recs, ar := st.PlanAlterPartition(req); !errors.Is(ar.Err, kerr.FencedLeaderEpoch) || len(recs) != 0 || ar.Leader != 2 {
		t.Fatalf("stale leader: %+v", ar)
	}
}

func TestPlanCreatePartitionsOfTopicWithoutPartitionsIsRefused(t *testing.T) {
	st := brokersState(t, "")
	id := uuid.MustParse("00000000-0000-4000-8000-0000000000aa")
	if err := st.Apply(st.Offset()+1, &TopicRecord{Name: "bare", TopicID: id}); err != nil {
		t.Fatal(err)
	}
	recs, res := st.PlanCreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Name: "bare", Count: 2}}}, rand.New(rand.NewPCG(1, 1)))
	if len(recs) != 0 || !errors.Is(res[0].Err, kerr.InvalidRequest) {
		t.Fatalf("%d records, %v", len(recs), res[0].Err)
	}
}

// TestPlannersOnArbitraryRequestsNeverPlanRefusedRecords throws random,
// mostly invalid requests at the planners over a random image. Whatever
// they accept must apply without a single refusal, keep the image's
// invariants, and nothing may panic.
func TestPlannersOnArbitraryRequestsNeverPlanRefusedRecords(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		_, st := randomLog(t, seed, 200)
		revive(t, st)
		rng := rand.New(rand.NewPCG(seed, 7))
		anyID := func() int32 { return rng.Int32N(8) - 1 }
		anyEpoch := func() int64 { return rng.Int64N(int64(st.MaxBrokerEpoch()) + 3) }
		anyList := func() []int32 {
			out := []int32{}
			for range rng.IntN(4) {
				out = append(out, anyID())
			}
			return out
		}
		var topicIDs []uuid.UUID
		for _, ti := range st.Topics() {
			topicIDs = append(topicIDs, ti.ID)
		}
		for _, tp := range st.RemotePartitions() { // removed topics' segments too
			topicIDs = append(topicIDs, tp.TopicID)
		}
		topicIDs = append(topicIDs, uuid.Nil, uuid.MustParse("00000000-0000-4000-8000-0000000000bb"))
		anyTopic := func() uuid.UUID { return topicIDs[rng.IntN(len(topicIDs))] }
		names := []string{"t0", "t1", "t2", "x", "", "a.b", "a_b"}
		for i := 0; i < 500; i++ {
			var recs []Record
			switch rng.IntN(11) {
			case 0:
				recs, _, _ = st.PlanRegisterBroker(RegisterBrokerRequest{BrokerID: anyID(), IncarnationID: uuid.NewSHA1(uuid.Nil, fmt.Appendf(nil, "%d", i)), ExistingSessionAlive: rng.IntN(2) == 0})
			case 1:
				recs, _, _ = st.PlanBrokerHeartbeat(BrokerHeartbeatRequest{BrokerID: anyID(), BrokerEpoch: anyEpoch(), CurrentMetadataOffset: rng.Int64N(st.Offset() + 2), WantFence: rng.IntN(3) == 0, WantShutDown: rng.IntN(5) == 0})
			case 2:
				recs = st.PlanFenceBroker(anyID(), func(string) bool { return rng.IntN(2) == 0 })
			case 3:
				ct := CreateTopic{Name: names[rng.IntN(len(names))], NumPartitions: rng.Int32N(4) - 1, ReplicationFactor: int16(rng.IntN(5) - 1)}
				if rng.IntN(3) == 0 {
					ct = CreateTopic{Name: ct.Name, Assignments: [][]int32{anyList(), anyList()}}
				}
				if rng.IntN(3) == 0 { // live, removed-with-segments, nil or fresh
					ct.TopicID = anyTopic()
				}
				recs, _ = st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{ct}}, rng)
			case 4:
				recs, _ = st.PlanCreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Name: names[rng.IntN(len(names))], Count: rng.Int32N(6)}}}, rng)
			case 5:
				p, _ := st.Partition(anyTopic(), rng.Int32N(3))
				req := AlterPartitionRequest{BrokerID: anyID(), BrokerEpoch: anyEpoch(), TopicID: p.TopicID, Partition: p.Partition,
					LeaderEpoch: p.LeaderEpoch + rng.Int32N(3) - 1, PartitionEpoch: p.PartitionEpoch + rng.Int32N(3) - 1, NewISR: anyList()}
				if rng.IntN(2) == 0 { // the real leader with current epochs, proposing a near-valid ISR
					req.BrokerID, req.BrokerEpoch = p.Leader, st.BrokerEpoch(p.Leader)
					req.LeaderEpoch, req.PartitionEpoch = p.LeaderEpoch, p.PartitionEpoch
					req.NewISR = req.NewISR[:0]
					for _, r := range p.Replicas {
						if rng.IntN(3) > 0 {
							req.NewISR = append(req.NewISR, r)
						}
					}
					if rng.IntN(4) == 0 {
						req.NewISR = append(req.NewISR, anyID())
					}
				}
				recs, _ = st.PlanAlterPartition(req)
			case 6:
				recs, _ = st.PlanRemoteSegment(RemoteSegmentRecord{SegmentID: uuid.NewSHA1(uuid.Nil, fmt.Appendf(nil, "s%d", rng.IntN(20))), TopicID: anyTopic(), Partition: rng.Int32N(3),
					BaseOffset: rng.Int64N(10) - 1, EndOffset: rng.Int64N(10), State: RemoteSegmentState(rng.IntN(5))})
			case 7:
				v := []string{"true", "false", "1", "-2", "compact"}[rng.IntN(5)]
				n := []string{ConfigUncleanLeaderElectionEnable, ConfigRetentionMs, ConfigLocalRetentionMs, ConfigCleanupPolicy}[rng.IntN(4)]
				typ, rname := ResourceTopic, names[rng.IntN(len(names))]
				if rng.IntN(3) == 0 {
					typ, rname, n = ResourceBroker, "", "unclean.leader.election.enable"
				}
				recs, _ = st.PlanAlterConfigs(AlterConfigsRequest{Incremental: rng.IntN(2) == 0, Resources: []AlterConfigResource{{Type: typ, Name: rname, Configs: []AlterConfigEntry{{Name: n, Value: &v, Op: ConfigOp(rng.IntN(5))}}}}})
			case 8:
				req := ElectLeadersRequest{Type: ElectionType(rng.IntN(3))}
				if rng.IntN(3) > 0 {
					req.Topics = []ElectLeadersTopic{{Name: names[rng.IntN(len(names))], Partitions: []int32{rng.Int32N(4) - 1, rng.Int32N(4) - 1}}}
				}
				recs, _ = st.PlanElectLeaders(req)
			case 9:
				recs, _ = st.PlanPreferredRebalance(rng.IntN(101))
			case 10: // reassignments (KIP-455): targets, cancels, several at once
				var reqs []ReassignmentRequest
				for range 1 + rng.IntN(3) {
					r := ReassignmentRequest{Topic: names[rng.IntN(len(names))], Partition: rng.Int32N(3), KeepReplicationFactor: rng.IntN(4) == 0}
					if ts := st.Topics(); len(ts) > 0 && rng.IntN(4) > 0 { // mostly live topics
						r.Topic = ts[rng.IntN(len(ts))].Name
					}
					switch rng.IntN(4) {
					case 0: // cancel
					case 1:
						r.Replicas = anyList()
					default: // a valid-looking target: distinct live brokers
						r.Replicas = []int32{}
						for _, b := range rng.Perm(5)[:1+rng.IntN(4)] {
							r.Replicas = append(r.Replicas, int32(b+1))
						}
					}
					reqs = append(reqs, r)
				}
				recs, _ = st.PlanReassignments(reqs)
			}
			if len(recs) == 0 {
				continue
			}
			if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
				t.Fatalf("seed %d step %d: planned records refused: %v", seed, i, err)
			}
			checkInvariants(t, st)
		}
	}
}

// revive registers brokers 1-5 afresh and unfences them, so that an image
// left mostly fenced by a random log has live leaders again.
func revive(t *testing.T, st *State) {
	t.Helper()
	for id := int32(1); id <= 5; id++ {
		recs, _, err := st.PlanRegisterBroker(RegisterBrokerRequest{BrokerID: id, IncarnationID: uuid.NewSHA1(uuid.Nil, fmt.Appendf(nil, "revive%d", id))})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
			t.Fatal(err)
		}
		recs, _, err = st.PlanBrokerHeartbeat(BrokerHeartbeatRequest{BrokerID: id, BrokerEpoch: st.BrokerEpoch(id), CurrentMetadataOffset: st.Offset()})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPlanPreferredRebalanceBatchesAtMostTheCap: a check plans at most
// MaxElectionsPerImbalance elections, says there are more, and the next
// check plans the rest (at percentage 0: at 10 the 5 left of 1005 are
// below it); then the imbalance is gone.
func TestPlanPreferredRebalanceBatchesAtMostTheCap(t *testing.T) {
	st := brokersState(t, "", "")
	const n = MaxElectionsPerImbalance + 5
	id := uuid.MustParse("00000000-0000-4000-8000-00000000ba1a")
	recs := []Record{&TopicRecord{Name: "many", TopicID: id}}
	for p := range n {
		recs = append(recs, &PartitionRecord{TopicID: id, Partition: int32(p), Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2})
	}
	if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		elections int
		more      bool
	}{{MaxElectionsPerImbalance, true}, {5, false}, {0, false}} {
		recs, more := st.PlanPreferredRebalance(0)
		if len(recs) != want.elections || more != want.more {
			t.Fatalf("check %d: %d elections, more %t; want %d, %t", i, len(recs), more, want.elections, want.more)
		}
		for _, r := range recs {
			if pc := r.(*PartitionChangeRecord); pc.Leader == nil || *pc.Leader != 1 {
				t.Fatalf("check %d: %+v, want broker 1 elected", i, pc)
			}
		}
		if len(recs) > 0 {
			if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestPreferredReplicaImbalance: partitions led by another replica than
// the first of theirs count, and so do offline ones (Kafka's
// PreferredReplicaImbalanceCount); a preferred election takes one off.
func TestPreferredReplicaImbalance(t *testing.T) {
	st := brokersState(t, "", "", "")
	if n := st.PreferredReplicaImbalance(); n != 0 {
		t.Fatalf("empty: %d", n)
	}
	id := uuid.MustParse("00000000-0000-4000-8000-0000000001b1")
	recs := []Record{&TopicRecord{Name: "imb", TopicID: id}}
	for p, leader := range []int32{1, 2, NoLeader, 3, 3} {
		recs = append(recs, &PartitionRecord{TopicID: id, Partition: int32(p), Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: leader})
	}
	recs[len(recs)-1].(*PartitionRecord).Replicas = []int32{3, 1, 2} // 4: led by its preferred 3
	if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
		t.Fatal(err)
	}
	if n := st.PreferredReplicaImbalance(); n != 3 {
		t.Fatalf("leaders 1 2 -1 3 (prefs 1) and 3 (pref 3): %d imbalanced, want 3 (partitions 1, 2, 3)", n)
	}
	one := int32(1)
	if err := st.ApplyBatch(st.Offset()+1, []Record{&PartitionChangeRecord{TopicID: id, Partition: 1, Leader: &one}}); err != nil {
		t.Fatal(err)
	}
	if n := st.PreferredReplicaImbalance(); n != 2 {
		t.Fatalf("after partition 1's preferred election: %d, want 2", n)
	}
}

// TestElectLeadersPlanSteps: a request over 2 500 partitions planned in
// steps of at most MaxElectionsPerStep, each step on the image with the
// earlier steps' records applied, elects every partition once (none
// twice across a step boundary, a partition named twice answered alike)
// and answers exactly as the whole request planned at once; with null
// topics too (the already-led ones left out).
func TestElectLeadersPlanSteps(t *testing.T) {
	const n = 2*MaxElectionsPerStep + 500
	build := func() *State {
		st := brokersState(t, "", "")
		id := uuid.MustParse("00000000-0000-4000-8000-00000000e1ec")
		recs := []Record{&TopicRecord{Name: "big", TopicID: id}}
		for p := range n {
			leader := int32(2)
			if p%10 == 0 {
				leader = 1 // led by its preferred replica already
			}
			recs = append(recs, &PartitionRecord{TopicID: id, Partition: int32(p), Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: leader})
		}
		if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
			t.Fatal(err)
		}
		return st
	}
	named := ElectLeadersTopic{Name: "big"}
	for p := range n {
		named.Partitions = append(named.Partitions, int32(p))
	}
	// partition 1 again right after the first step's boundary, and a
	// partition and a topic that do not exist
	named.Partitions = slices.Insert(named.Partitions, MaxElectionsPerStep, 1)
	named.Partitions = append(named.Partitions, n)
	for _, req := range []ElectLeadersRequest{
		{Type: ElectPreferred, Topics: []ElectLeadersTopic{named, {Name: "nope", Partitions: []int32{0}}, {Name: "big"}}},
		{Type: ElectPreferred},
	} {
		wantRecs, want := build().PlanElectLeaders(req)
		st := build()
		plan := NewElectLeadersPlan(req)
		var steps, elections int
		for !plan.Done() {
			recs := plan.Step(st, MaxElectionsPerStep)
			if len(recs) > MaxElectionsPerStep {
				t.Fatalf("step %d: %d records, want at most %d", steps, len(recs), MaxElectionsPerStep)
			}
			if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
				t.Fatal(err)
			}
			steps++
			elections += len(recs)
			if steps > 10 {
				t.Fatal("the plan does not end")
			}
		}
		if wantSteps := 3; steps != wantSteps {
			t.Errorf("null topics %t: %d steps, want %d", req.Topics == nil, steps, wantSteps)
		}
		if elections != len(wantRecs) || elections != n-n/10 {
			t.Errorf("null topics %t: %d elections in steps, %d at once, want %d", req.Topics == nil, elections, len(wantRecs), n-n/10)
		}
		if got := plan.Results(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("null topics %t: stepped answers differ from the whole request's", req.Topics == nil)
		}
		if st.PreferredReplicaImbalance() != 0 {
			t.Errorf("null topics %t: %d partitions still led by another than their preferred replica", req.Topics == nil, st.PreferredReplicaImbalance())
		}
	}
}
