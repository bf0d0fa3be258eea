package admincli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/testutil"
)

func electJSON(t *testing.T, brokers string, args ...string) ([]electedPartition, result) {
	t.Helper()
	r := cliAt(t, brokers, "", "cluster", append([]string{"elect-leaders", "--format", "json"}, args...)...)
	var out []electedPartition
	if r.stdout != "" {
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v: %s", err, r)
		}
	}
	return out, r
}

// TestClusterElectLeaders: two brokers, an RF=2 topic whose partition 0
// prefers broker 2. Broker 2 restarts (its leadership moves to 1);
// elect-leaders --topic --partition is PREFERRED_LEADER_NOT_AVAILABLE
// (exit 1) until broker 2 is back in the ISR, then elects it (exit 0);
// again, and --all, it is not needed; usage errors exit 2.
func TestClusterElectLeaders(t *testing.T) {
	dir2 := t.TempDir()
	open := func(props map[string]string) *broker.Node {
		t.Helper()
		props["auto.leader.rebalance.enable"] = "false"
		return openClusterNode(t, props)
	}
	a := open(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "controller.quorum.voters": "1@127.0.0.1:0"})
	props2 := map[string]string{"node.id": "2", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0",
		"controller.quorum.voters": "1@" + a.Addrs()["CONTROLLER"], "log.dirs": dir2}
	b := open(props2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Addr()), kgo.RetryTimeout(testWait))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	testutil.Eventually(t, testWait, func() bool {
		m, err := adm.Metadata(testCtx(t))
		return err == nil && len(m.Brokers) == 2
	}, "both brokers registered")
	// Partition 0 prefers broker 2, partition 1 broker 1.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "el", -1, -1
	for i, a := range [][]int32{{2, 1}, {1, 2}} {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(i), a
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(testCtx(t), cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	// state is el-0 as a fresh client of broker 1 sees it (topic
	// describe), so no client's cached connection to the restarted broker
	// 2 slows the polls.
	state := func() (leader int32, isr []int32) {
		d, r := describeJSON(t, a.Addr(), "el")
		if r.code != ExitOK || len(d.Partitions) != 2 {
			return -1, nil
		}
		return d.Partitions[0].Leader, d.Partitions[0].ISR
	}
	testutil.Eventually(t, testWait, func() bool { l, isr := state(); return l == 2 && len(isr) == 2 }, "el-0 led by 2 with both in the ISR")

	b.Close()
	testutil.Eventually(t, testWait, func() bool { l, _ := state(); return l == 1 }, "el-0 led by 1")
	out, r := electJSON(t, a.Addr(), "--topic", "el", "--partition", "0")
	if r.code != ExitFail || len(out) != 1 || out[0].Status != "failed" || !strings.Contains(out[0].Error, "PREFERRED_LEADER_NOT_AVAILABLE") ||
		!strings.Contains(r.stderr, "el-0") {
		t.Fatalf("broker 2 down: %+v %v", out, r)
	}
	open(props2)
	testutil.Eventually(t, testWait, func() bool { _, isr := state(); return slices.Contains(isr, 2) }, "broker 2 back in el-0's ISR")
	if l, _ := state(); l != 1 {
		t.Fatalf("el-0 led by %d before any election", l)
	}
	r = cliAt(t, a.Addr(), "", "cluster", "elect-leaders", "--topic", "el", "--partition", "0")
	if r.code != ExitOK || !tableRow(firstLines(r.stdout, 2)[0], "TOPIC", "PARTITION", "STATUS") || !tableRow(firstLines(r.stdout, 2)[1], "el", "0", "elected") {
		t.Fatalf("broker 2 back: %v", r)
	}
	testutil.Eventually(t, testWait, func() bool { l, _ := state(); return l == 2 }, "el-0 led by 2 again")
	// The whole topic: both partitions have their preferred leader.
	out, r = electJSON(t, a.Addr(), "--topic", "el")
	if r.code != ExitOK || len(out) != 2 || out[0].Status != "not-needed" || out[1].Status != "not-needed" {
		t.Fatalf("--topic el: %+v %v", out, r)
	}
	// Unclean where a leader leads: not needed either.
	out, r = electJSON(t, a.Addr(), "--type", "unclean", "--topic", "el", "--partition", "1")
	if r.code != ExitOK || len(out) != 1 || out[0].Status != "not-needed" {
		t.Fatalf("--type unclean: %+v %v", out, r)
	}
	r = cliAt(t, a.Addr(), "", "cluster", "elect-leaders", "--all")
	if r.code != ExitOK || !strings.Contains(r.stdout, "nothing to elect") {
		t.Fatalf("--all: %v", r)
	}
	wantFail(t, cliAt(t, a.Addr(), "", "cluster", "elect-leaders", "--topic", "nope"), ExitFail, "UNKNOWN_TOPIC_OR_PARTITION")
	wantFail(t, cliAt(t, a.Addr(), "", "cluster", "elect-leaders"), ExitUsage, "--topic and --all")
	wantFail(t, cliAt(t, a.Addr(), "", "cluster", "elect-leaders", "--all", "--topic", "el"), ExitUsage, "--topic and --all")
	wantFail(t, cliAt(t, a.Addr(), "", "cluster", "elect-leaders", "--all", "--type", "clean"), ExitUsage, "--type")
	wantFail(t, cliAt(t, a.Addr(), "", "cluster", "elect-leaders", "--all", "--partition", "1"), ExitUsage, "--partition")
}
