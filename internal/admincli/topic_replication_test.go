package admincli

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/internal/testutil"
)

// describeJSON runs topic describe --format json against brokers.
func describeJSON(t *testing.T, brokers, topic string) (topicDescribed, result) {
	t.Helper()
	r := cliAt(t, brokers, "", "topic", "describe", topic, "--format", "json")
	var d topicDescribed
	if r.code == ExitOK {
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
	}
	return d, r
}

// TestTopicDescribeShowsReplicationState runs two brokers with an RF=2
// topic, then stops the second: describe (through DescribeTopicPartitions)
// shows every replica and the ISR, then the stopped broker as offline
// replica of every partition, out of the ISR where another broker leads,
// leader -1 and LEADER_NOT_AVAILABLE where it led (no ISR member left:
// no election), and the OFFLINE column in the table.
func TestTopicDescribeShowsReplicationState(t *testing.T) {
	fast := map[string]string{"broker.session.timeout.ms": "1200", "broker.heartbeat.interval.ms": "200"}
	open := func(props map[string]string) *broker.Node {
		t.Helper()
		for k, v := range fast {
			props[k] = v
		}
		return openClusterNode(t, props)
	}
	a := open(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "controller.quorum.voters": "1@127.0.0.1:0"})
	b := open(map[string]string{"node.id": "2", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0",
		"controller.quorum.voters": "1@" + a.Addrs()["CONTROLLER"]})
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
	if resp, err := adm.CreateTopic(testCtx(t), 2, 2, nil, "rep"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}

	var d topicDescribed
	testutil.Eventually(t, testWait, func() bool {
		var r result
		d, r = describeJSON(t, a.Addr(), "rep")
		return r.code == ExitOK && len(d.Partitions) == 2 && d.Partitions[0].Leader >= 1 && d.Partitions[1].Leader >= 1
	}, "topic rep led")
	led2 := map[int32]bool{}
	for _, p := range d.Partitions {
		if len(p.Replicas) != 2 || len(p.ISR) != 2 || len(p.OfflineReplicas) != 0 || p.ELR == nil || p.LastKnownELR == nil {
			t.Fatalf("partition %d before the loss: %+v", p.Partition, p)
		}
		led2[p.Partition] = p.Leader == 2
	}
	r := cliAt(t, a.Addr(), "", "topic", "describe", "rep")
	if strings.Contains(r.stdout, "OFFLINE") || strings.Contains(r.stdout, "ELR") {
		t.Errorf("a healthy topic's table has OFFLINE or ELR columns:\n%s", r.stdout)
	}
	health := func() clusterHealth {
		t.Helper()
		r := cliAt(t, a.Addr(), "", "cluster", "under-replicated", "--format", "json")
		var h clusterHealth
		if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &h) != nil {
			t.Fatalf("cluster under-replicated: %v", r)
		}
		return h
	}
	if h := health(); len(h.Partitions) != 0 {
		t.Errorf("healthy cluster: under-replicated lists %+v", h.Partitions)
	}
	// min.insync.replicas is 1 and rep's ISRs have two: not at it.
	if r := cliAt(t, a.Addr(), "", "cluster", "under-replicated", "--at-min-isr", "--format", "json"); r.code != ExitOK || strings.Contains(r.stdout, `"rep"`) {
		t.Errorf("--at-min-isr: %v", r)
	}

	b.Close()
	testutil.Eventually(t, testWait, func() bool {
		d, r = describeJSON(t, a.Addr(), "rep")
		if r.code != ExitOK {
			return false
		}
		for _, p := range d.Partitions {
			// A partition left without a leader keeps its last ISR
			// member (as Kafka's controller does); the others drop 2.
			if !slices.Equal(p.OfflineReplicas, []int32{2}) || (p.Leader != -1 && slices.Contains(p.ISR, 2)) {
				return false
			}
		}
		return true
	}, "broker 2 offline, and out of the ISR of every led partition: %+v", &d)
	for _, p := range d.Partitions {
		if led2[p.Partition] && p.Leader == 2 {
			t.Errorf("partition %d: still led by the stopped broker 2", p.Partition)
		}
		if p.Leader == -1 && !strings.Contains(p.Error, "LEADER_NOT_AVAILABLE") {
			t.Errorf("leaderless partition %d: error %q", p.Partition, p.Error)
		}
		if len(p.Replicas) != 2 {
			t.Errorf("partition %d: replicas %v, want both still listed", p.Partition, p.Replicas)
		}
	}
	// Every partition of rep is under-replicated now; a leaderless one
	// is unavailable too (its ISR kept broker 2: not under min ISR).
	h := health()
	got := map[int32][]string{}
	for _, p := range h.Partitions {
		if p.Topic == "rep" {
			got[p.Partition] = p.States
		}
	}
	for _, p := range d.Partitions {
		want := []string{stateUnderReplicated}
		if p.Leader == -1 {
			want = []string{stateUnavailable, stateUnderReplicated}
		}
		if !slices.Equal(got[p.Partition], want) {
			t.Errorf("under-replicated: partition %d states %v, want %v (all %+v)", p.Partition, got[p.Partition], want, h.Partitions)
		}
	}
	if r := cliAt(t, a.Addr(), "", "cluster", "under-replicated"); r.code != ExitOK || !strings.Contains(r.stdout, "under-replicated") || !strings.Contains(r.stdout, "MIN-ISR") {
		t.Errorf("cluster under-replicated table:\n%s", r)
	}
	r = cliAt(t, a.Addr(), "", "topic", "describe", "rep")
	if r.code != ExitOK || !tableRow(firstLines(r.stdout, 4)[3], "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "LOG-START", "LOG-END", "ERROR") {
		t.Errorf("table after the loss lacks the OFFLINE column:\n%s", r)
	}
}

func firstLines(s string, n int) []string {
	ls := strings.SplitN(s, "\n", n+1)
	for len(ls) < n {
		ls = append(ls, "")
	}
	return ls
}

// TestTopicDescribeFallsBackToMetadata: against a broker without
// DescribeTopicPartitions (kfake limited to Kafka 3.6's APIs), describe
// still shows leader, replicas and ISR from Metadata, with empty ELR lists.
func TestTopicDescribeFallsBackToMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		vs   *kversion.Versions
	}{{"kafka 3.6, no key 75", kversion.V3_6_0()}, {"kfake's newest, key 75", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(2, "fk"), kfake.Ports(0)}
			if tc.vs != nil {
				opts = append(opts, kfake.MaxVersions(tc.vs))
			}
			c, err := kfake.NewCluster(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			d, r := describeJSON(t, c.ListenAddrs()[0], "fk")
			if r.code != ExitOK {
				t.Fatalf("describe: %v", r)
			}
			if len(d.Partitions) != 2 {
				t.Fatalf("describe %+v", d)
			}
			for _, p := range d.Partitions {
				if p.Leader < 0 || len(p.Replicas) != 1 || !slices.Equal(p.ISR, p.Replicas) || p.ELR == nil || len(p.ELR) != 0 || p.OfflineReplicas == nil {
					t.Errorf("partition %d: %+v", p.Partition, p)
				}
			}
		})
	}
}

// TestTopicDescribeTableShowsELR: the ELR columns appear once a partition
// has eligible leader replicas.
func TestTopicDescribeTableShowsELR(t *testing.T) {
	var b bytes.Buffer
	writeTopicDescribed(&b, topicDescribed{Topic: "t", ID: "id", Partitions: []partitionDetail{
		{Partition: 0, Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, ELR: []int32{2}, LastKnownELR: []int32{}, OfflineReplicas: []int32{}, LogEndOffset: 9},
		{Partition: 1, Leader: 2, LeaderEpoch: 1, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}, ELR: []int32{}, LastKnownELR: []int32{}, OfflineReplicas: []int32{}},
	}})
	out := b.String()
	if !tableRow(out, "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "ELR", "LAST-KNOWN-ELR", "LOG-START", "LOG-END", "ERROR") {
		t.Fatalf("no ELR columns:\n%s", out)
	}
	if !tableRow(out, "0", "1", "3", "1,2,3", "1", "2", "0", "9", "-") {
		t.Fatalf("partition 0 row:\n%s", out)
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// TestHealthStatesAreKafkaTopicsFilters: the states of cluster
// under-replicated, as kafka-topics.sh's filters define them.
func TestHealthStatesAreKafkaTopicsFilters(t *testing.T) {
	for _, tc := range []struct {
		leader             int32
		replicas, isr, min int
		atMin              bool
		want               []string
	}{
		{1, 3, 3, 2, false, nil},
		{1, 3, 3, 3, false, nil},
		{1, 3, 3, 3, true, []string{stateAtMinISR}},
		{1, 3, 2, 2, false, []string{stateUnderReplicated}},
		{1, 3, 2, 2, true, []string{stateUnderReplicated, stateAtMinISR}},
		{1, 3, 1, 2, false, []string{stateUnderReplicated, stateUnderMinISR}},
		{-1, 3, 1, 2, false, []string{stateUnavailable, stateUnderReplicated, stateUnderMinISR}},
		{-1, 1, 1, 1, false, []string{stateUnavailable}},
	} {
		if got := healthStates(tc.leader, tc.replicas, tc.isr, tc.min, tc.atMin); !slices.Equal(got, tc.want) {
			t.Errorf("healthStates(%+v) = %v, want %v", tc, got, tc.want)
		}
	}
}
