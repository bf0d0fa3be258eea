package metadata

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
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
// leadership (first replicas) is spread evenly over the brokers.
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
				recs, res := st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{{Name: "t", NumPartitions: int32(n), ReplicationFactor: int16(rf)}}}, rand.New(rand.NewPCG(seed, 0)))
				if res[0].Err != nil {
					t.Fatalf("layout %d rf %d: %v", li, rf, res[0].Err)
				}
				leaders := map[int32]int{}
				for _, r := range recs {
					p, ok := r.(*PartitionRecord)
					if !ok {
						continue
					}
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
	req := CreateTopicsRequest{Topics: []CreateTopic{{Name: "x", NumPartitions: 8, ReplicationFactor: 3}, {Name: "y", NumPartitions: 3, ReplicationFactor: 2}}}
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
	}, DefaultPartitions: 3, DefaultReplicationFactor: 2}, rng)
	want := []*kerr.Error{kerr.InvalidRequest, kerr.InvalidRequest, nil, kerr.InvalidRequest, kerr.InvalidReplicationFactor}
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
	if res[2].NumPartitions != 3 || res[2].ReplicationFactor != 2 {
		t.Fatalf("defaults not applied: %+v", res[2])
	}
	if len(recs) != 1+3 {
		t.Fatalf("%d records, want a topic and 3 partitions", len(recs))
	}
	recs, res = st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{{Name: "v", NumPartitions: 2, ReplicationFactor: 2}}, ValidateOnly: true}, rng)
	if len(recs) != 0 || res[0].Err != nil {
		t.Fatalf("validate-only: %d records, %v", len(recs), res[0].Err)
	}
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
}

// TestPlanAlterPartitionRefusesAStaleLeader is the guard in one place: a
// leader deposed by a fencing may not change the ISR with its old epochs,
// and the partition epoch alone refuses a replayed request.
func TestPlanAlterPartitionRefusesAStaleLeader(t *testing.T) {
	st := brokersState(t, "", "", "")
	rng := rand.New(rand.NewPCG(1, 1))
	recs, res := st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{{Name: "t", Assignments: [][]int32{{1, 2, 3}}}}}, rng)
	off := st.Offset() + 1
	if err := st.ApplyBatch(off, recs); err != nil {
		t.Fatal(err)
	}
	id := res[0].TopicID
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
	// Deposed: broker 1 fenced, broker 2 leads with a new leader epoch.
	off++
	if err := st.ApplyBatch(off, st.PlanFenceBroker(1, nil)); err != nil {
		t.Fatal(err)
	}
	p, _ := st.Partition(id, 0)
	if p.Leader != 2 || p.LeaderEpoch != old.LeaderEpoch+1 {
		t.Fatalf("after fencing: %+v", p)
	}
	req.PartitionEpoch = p.PartitionEpoch // even with a current partition epoch
	if recs, ar := st.PlanAlterPartition(req); !errors.Is(ar.Err, kerr.FencedLeaderEpoch) || len(recs) != 0 || ar.Leader != 2 {
		t.Fatalf("stale leader: %+v", ar)
	}
}
