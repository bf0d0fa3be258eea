package admincli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/testutil"
)

// TestGeneratePlanBalancesLeadersReplicasAndRacks: on 6 brokers in 3
// racks, 12 partitions at RF 3 get every leader twice, every broker's
// replica count equal, and each partition's replicas on 3 distinct racks;
// without racks the replicas stay distinct and balanced.
func TestGeneratePlanBalancesLeadersReplicasAndRacks(t *testing.T) {
	for _, racked := range []bool{true, false} {
		var brokers []brokerRack
		rackOf := map[int32]string{}
		for id := int32(1); id <= 6; id++ {
			r := ""
			if racked {
				r = fmt.Sprintf("r%d", (id-1)%3)
			}
			brokers = append(brokers, brokerRack{id, r})
			rackOf[id] = r
		}
		var parts []plannedPartition
		for p := int32(0); p < 12; p++ {
			parts = append(parts, plannedPartition{Topic: "t", Partition: p, Replicas: []int32{1}})
		}
		plan, err := generatePlan(brokers, parts, 3)
		if err != nil {
			t.Fatal(err)
		}
		leaders, replicas := map[int32]int{}, map[int32]int{}
		for _, p := range plan {
			if len(p.Replicas) != 3 {
				t.Fatalf("%+v: not 3 replicas", p)
			}
			seen := map[int32]bool{}
			racks := map[string]bool{}
			for _, r := range p.Replicas {
				if seen[r] {
					t.Fatalf("%+v: replica twice", p)
				}
				seen[r], racks[rackOf[r]] = true, true
				replicas[r]++
			}
			if racked && len(racks) != 3 {
				t.Errorf("racked: %+v on racks %v", p, racks)
			}
			leaders[p.Replicas[0]]++
		}
		for id := int32(1); id <= 6; id++ {
			if leaders[id] != 2 || replicas[id] != 6 {
				t.Errorf("racked %v: broker %d leads %d, holds %d (want 2 and 6): plan %v", racked, id, leaders[id], replicas[id], plan)
			}
		}
	}
	if _, err := generatePlan([]brokerRack{{1, ""}}, []plannedPartition{{Topic: "t"}}, 2); err == nil {
		t.Error("RF 2 on one broker planned")
	}
}

// TestDrainPlanMovesEveryReplicaOff: every partition holding the node gets
// a replacement (its rack's broker first, then the least loaded), placed
// last so a partition it led is led by its next replica; partitions
// without it are untouched; a partition with nowhere to go is an error.
func TestDrainPlanMovesEveryReplicaOff(t *testing.T) {
	brokers := []brokerRack{{1, "a"}, {2, "b"}, {3, "c"}, {4, "a"}}
	parts := []plannedPartition{
		{"t", 0, []int32{1, 2, 3}},
		{"t", 1, []int32{2, 3, 4}},
		{"t", 2, []int32{3, 1, 2}},
	}
	plan, err := drainPlan(1, brokers, parts)
	if err != nil {
		t.Fatal(err)
	}
	want := []plannedPartition{{"t", 0, []int32{2, 3, 4}}, {"t", 2, []int32{3, 2, 4}}}
	if len(plan) != len(want) {
		t.Fatalf("plan %v, want %v", plan, want)
	}
	for i := range want {
		if plan[i].Partition != want[i].Partition || !slices.Equal(plan[i].Replicas, want[i].Replicas) {
			t.Errorf("plan %v, want %v", plan, want)
		}
	}
	// No rack-mate: the least loaded other broker.
	plan, err = drainPlan(2, brokers, parts)
	if err != nil || len(plan) != 3 || !slices.Equal(plan[0].Replicas, []int32{1, 3, 4}) || !slices.Equal(plan[1].Replicas, []int32{3, 4, 1}) {
		t.Errorf("drain 2: %v %v", plan, err)
	}
	if _, err := drainPlan(1, brokers[:3], []plannedPartition{{"t", 0, []int32{1, 2, 3}}}); err == nil {
		t.Error("drained a broker from an RF 3 partition on 3 brokers")
	}
}

// TestClusterDrainAndReassign (KIP-455 through the CLI): three brokers, a
// topic at RF 2 over four partitions; `cluster drain 3 --wait` moves every
// replica off broker 3 and reports each partition complete; then a plan
// from `cluster reassign --generate` is executed from stdin and `--status`
// reports it complete, the replicas as planned.
func TestClusterDrainAndReassign(t *testing.T) {
	a := openClusterNode(t, map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "controller.quorum.voters": "1@127.0.0.1:0"})
	for id := 2; id <= 3; id++ {
		openClusterNode(t, map[string]string{"node.id": fmt.Sprint(id), "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0",
			"controller.quorum.voters": "1@" + a.Addrs()["CONTROLLER"]})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Addr()), kgo.RetryTimeout(testWait))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	testutil.Eventually(t, testWait, func() bool {
		m, err := adm.Metadata(testCtx(t))
		return err == nil && len(m.Brokers) == 3
	}, "three brokers registered")
	if resp, err := adm.CreateTopic(testCtx(t), 4, 2, nil, "mv"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	holds := func(id int32) int { // uncached metadata: kadm's may be 5 s old
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("mv")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if slices.Contains(p.Replicas, id) {
					n++
				}
			}
		}
		return n
	}
	testutil.Eventually(t, testWait, func() bool { return holds(3) > 0 }, "broker 3 holds replicas of mv")

	start := time.Now()
	r := cliAt(t, a.Addr(), "", "cluster", "drain", "3", "--wait", "60s", "--format", "json")
	var sts []reassignStatus
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &sts) != nil || len(sts) == 0 {
		t.Fatalf("drain: %v", r)
	}
	for _, s := range sts {
		if s.State != "complete" || slices.Contains(s.Replicas, 3) {
			t.Errorf("drain: %+v", s)
		}
	}
	// Every broker's metadata follows the controller's soon after.
	testutil.Eventually(t, testWait, func() bool { return holds(3) == 0 }, "broker 3 holds no replicas after the drain")
	var empty reassignPlan
	if r := cliAt(t, a.Addr(), "", "cluster", "drain", "3", "--format", "json"); r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &empty) != nil ||
		empty.Partitions == nil || len(empty.Partitions) != 0 {
		t.Errorf("draining an empty broker: %v", r)
	}
	t.Logf("drained in %v", time.Since(start))

	r = cliAt(t, a.Addr(), "", "cluster", "reassign", "--generate", "--topics", "mv", "--format", "json")
	var gen struct {
		Current, Proposed reassignPlan
	}
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &gen) != nil || len(gen.Proposed.Partitions) != 4 {
		t.Fatalf("generate: %v", r)
	}
	plan, _ := json.Marshal(gen.Proposed)
	if r := cliAt(t, a.Addr(), string(plan), "cluster", "reassign", "--execute", "-"); r.code != ExitOK {
		t.Fatalf("execute: %v", r)
	}
	testutil.Eventually(t, testWait, func() bool {
		r := cliAt(t, a.Addr(), string(plan), "cluster", "reassign", "--status", "-", "--format", "json")
		var sts []reassignStatus
		if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &sts) != nil {
			return false
		}
		for _, s := range sts {
			if s.State != "complete" {
				return false
			}
		}
		return len(sts) == 4
	}, "the generated plan complete")
	testutil.Eventually(t, testWait, func() bool { return holds(3) > 0 }, "the generated plan over three brokers puts replicas on broker 3")
	if r := cliAt(t, a.Addr(), "", "cluster", "reassign", "--execute", "-"); r.code != ExitUsage {
		t.Errorf("execute of an empty plan: %v", r)
	}
}

// TestClusterDecommission: drain, stop, unregister. `cluster unregister`
// refuses a broker that still holds replicas or still runs (it would
// register again at its next heartbeat) unless --force; once drained and
// stopped it is unregistered and leaves the cluster's brokers; a second
// unregistration is BROKER_ID_NOT_REGISTERED.
func TestClusterDecommission(t *testing.T) {
	a := openClusterNode(t, map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "controller.quorum.voters": "1@127.0.0.1:0"})
	var third *broker.Node
	for id := 2; id <= 3; id++ {
		third = openClusterNode(t, map[string]string{"node.id": fmt.Sprint(id), "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0",
			"controller.quorum.voters": "1@" + a.Addrs()["CONTROLLER"]})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Addr()), kgo.RetryTimeout(testWait))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	brokers := func() int { // uncached metadata
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			return -1
		}
		return len(resp.Brokers)
	}
	testutil.Eventually(t, testWait, func() bool { return brokers() == 3 }, "three brokers registered")
	if resp, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 3, 2, nil, "dc"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	if r := cliAt(t, a.Addr(), "", "cluster", "unregister", "3"); r.code != ExitFail || !strings.Contains(r.stderr, "holds replicas") {
		t.Fatalf("unregister of a broker holding replicas: %v", r)
	}
	if r := cliAt(t, a.Addr(), "", "cluster", "drain", "3", "--wait", "60s"); r.code != ExitOK {
		t.Fatalf("drain: %v", r)
	}
	testutil.Eventually(t, testWait, func() bool {
		r := cliAt(t, a.Addr(), "", "cluster", "unregister", "3")
		return r.code == ExitFail && strings.Contains(r.stderr, "running")
	}, "unregister of a drained broker still running refused")
	third.Close()
	testutil.Eventually(t, testWait, func() bool { return brokers() == 2 }, "broker 3 stopped and fenced")
	var u unregistered
	if r := cliAt(t, a.Addr(), "", "cluster", "unregister", "3", "--format", "json"); r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &u) != nil || !u.Unregistered || u.Broker != 3 {
		t.Fatalf("unregister: %v", r)
	}
	if r := cliAt(t, a.Addr(), "", "cluster", "unregister", "3", "--force"); r.code != ExitFail || !strings.Contains(r.stderr, "BROKER_ID_NOT_REGISTERED") {
		t.Fatalf("second unregister: %v", r)
	}
}
