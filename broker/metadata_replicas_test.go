package broker

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
)

// fastFencing makes a stopped broker fenced within about a second, so a
// test can watch the metadata of a cluster that lost a node.
var fastFencing = map[string]string{
	"broker.session.timeout.ms":    "1200",
	"broker.heartbeat.interval.ms": "200",
}

// createTopicRF creates topic with partitions partitions at replication
// factor rf (and configs) through broker 1, and waits until every running broker's view
// has it with a leader per partition.
func (c *testCluster) createTopicRF(topic string, partitions int32, rf int16, configs ...map[string]*string) {
	c.t.Helper()
	var cfg map[string]*string
	if len(configs) > 0 {
		cfg = configs[0]
	}
	resp, err := kadm.NewClient(c.client()).CreateTopic(testCtx(c.t), partitions, rf, cfg, topic)
	if err != nil || resp.Err != nil {
		c.t.Fatalf("create topic %s: %v / %v", topic, err, resp.Err)
	}
	for id, n := range c.nodes {
		if n == nil {
			continue
		}
		testutil.Eventually(c.t, testWait, func() bool {
			led, hosts := false, false
			n.view(func(st *metadata.State) {
				t, ok := st.TopicByName(topic)
				if !ok {
					return
				}
				led = true
				for _, p := range st.Partitions(t.ID) {
					led = led && p.Leader != metadata.NoLeader
					hosts = hosts || (p.Partition == 0 && slices.Contains(p.Replicas, id))
				}
			})
			return led && (!hosts || n.partition(topic, 0) != nil)
		}, "broker %d to see topic %s led", id, topic)
	}
}

// createTopicAssigned creates topic with the given replica assignment
// (one replica list per partition) and waits as createTopicRF does.
func (c *testCluster) createTopicAssigned(topic string, assignment [][]int32) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(testWait.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, replicas := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(c.t), c.client())
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		c.t.Fatalf("create topic %s with assignment %v: %v %+v", topic, assignment, err, resp)
	}
	for id, n := range c.nodes {
		if n == nil {
			continue
		}
		testutil.Eventually(c.t, testWait, func() bool {
			led := false
			n.view(func(st *metadata.State) {
				t, ok := st.TopicByName(topic)
				led = ok && len(st.Partitions(t.ID)) == len(assignment)
			})
			return led
		}, "broker %d to see topic %s", id, topic)
	}
}

// waitFenced waits until the controller has fenced broker id.
func (c *testCluster) waitFenced(id int32) {
	c.t.Helper()
	testutil.Eventually(c.t, testWait, func() bool {
		fenced := false
		c.ctl.view(func(st *metadata.State) {
			b, ok := st.Broker(id)
			fenced = ok && b.Fenced
		})
		return fenced
	}, "broker %d fenced", id)
}

// waitCaughtUp waits until broker id's view has reached the controller's
// metadata offset.
func (c *testCluster) waitCaughtUp(id int32) {
	c.t.Helper()
	want := c.ctl.appliedOffset()
	testutil.Eventually(c.t, testWait, func() bool {
		return c.node(id).metadataOffset() >= want
	}, "broker %d caught up to metadata offset %d", id, want)
}

// TestMetadataReportsOfflineReplicasAndLeaderlessPartitions stops one
// broker of three and checks what Metadata says once it is fenced, as
// Kafka's KRaftMetadataCache does: the broker list leaves it out; a
// partition it led answers LEADER_NOT_AVAILABLE with leader -1 and its
// full replica list; every partition lists it as an offline replica
// (v5+); v0 leaves it out of replicas and ISR (REPLICA_NOT_AVAILABLE).
func TestMetadataReportsOfflineReplicasAndLeaderlessPartitions(t *testing.T) {
	c := startCluster(t, 3, fastFencing)
	c.createTopicRF("off", 3, 3)
	c.createTopicAssigned("solo", [][]int32{{3}, {2}}) // partition 0 has no replica left once 3 stops
	ledBy3 := map[int32]bool{}
	for i := int32(0); i < 3; i++ {
		p, _ := c.partitionState("off", i)
		ledBy3[i] = p.Leader == 3
	}
	if !slices.Contains(mapValues(ledBy3), true) {
		t.Fatalf("placement gave broker 3 no leadership")
	}
	c.stop(3)
	c.waitFenced(3)
	c.waitCaughtUp(2)

	for _, id := range []int32{1, 2} {
		raw := dialRaw(t, c.node(id))
		for _, v := range []int16{0, 1, 5, 7, 12} {
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(v)
			req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("off")}}
			resp := raw.roundTrip(req).(*kmsg.MetadataResponse)
			var brokers []int32
			for _, b := range resp.Brokers {
				brokers = append(brokers, b.NodeID)
			}
			slices.Sort(brokers)
			if !slices.Equal(brokers, []int32{1, 2}) {
				t.Errorf("broker %d v%d: brokers %v, want [1 2] (fenced broker 3 left out)", id, v, brokers)
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
				t.Fatalf("broker %d v%d: topics %+v", id, v, resp.Topics)
			}
			for _, mp := range resp.Topics[0].Partitions {
				what := fmt.Sprintf("broker %d v%d partition %d", id, v, mp.Partition)
				st, _ := c.partitionState("off", mp.Partition)
				wantReplicas := st.Replicas
				wantISR := st.ISR
				if v == 0 {
					wantReplicas = without(st.Replicas, 3)
					wantISR = without(st.ISR, 3)
				}
				if !slices.Equal(mp.Replicas, wantReplicas) || !slices.Equal(mp.ISR, wantISR) {
					t.Errorf("%s: replicas %v ISR %v, want %v %v", what, mp.Replicas, mp.ISR, wantReplicas, wantISR)
				}
				if v >= 5 && !slices.Equal(mp.OfflineReplicas, []int32{3}) {
					t.Errorf("%s: offline replicas %v, want [3]", what, mp.OfflineReplicas)
				}
				if v >= 7 && mp.LeaderEpoch != st.LeaderEpoch {
					t.Errorf("%s: leader epoch %d, want %d", what, mp.LeaderEpoch, st.LeaderEpoch)
				}
				switch {
				case st.Leader == metadata.NoLeader:
					if mp.Leader != -1 || mp.ErrorCode != kerr.LeaderNotAvailable.Code {
						t.Errorf("%s: leaderless partition answered leader %d code %d, want -1 LEADER_NOT_AVAILABLE", what, mp.Leader, mp.ErrorCode)
					}
				case v == 0:
					if mp.Leader != st.Leader || mp.ErrorCode != kerr.ReplicaNotAvailable.Code {
						t.Errorf("%s: leader %d code %d, want %d REPLICA_NOT_AVAILABLE", what, mp.Leader, mp.ErrorCode, st.Leader)
					}
				default:
					if mp.Leader != st.Leader || mp.ErrorCode != 0 {
						t.Errorf("%s: leader %d code %d, want %d and no error", what, mp.Leader, mp.ErrorCode, st.Leader)
					}
				}
				if ledBy3[mp.Partition] && st.Leader == 3 {
					t.Errorf("%s: still led by the fenced broker 3", what)
				}
			}
			// solo-0's only replica is gone: no leader, offline [3].
			req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("solo")}}
			solo := raw.roundTrip(req).(*kmsg.MetadataResponse)
			if len(solo.Topics) != 1 || len(solo.Topics[0].Partitions) != 2 {
				t.Fatalf("broker %d v%d: solo %+v", id, v, solo.Topics)
			}
			for _, mp := range solo.Topics[0].Partitions {
				wantLeader, wantCode, wantOffline, wantReplicas := int32(2), int16(0), []int32{}, []int32{2}
				if mp.Partition == 0 {
					wantLeader, wantCode, wantOffline, wantReplicas = -1, kerr.LeaderNotAvailable.Code, []int32{3}, []int32{3}
					if v == 0 {
						wantReplicas = []int32{}
					}
				}
				if v < 5 {
					wantOffline = nil
				}
				if mp.Leader != wantLeader || mp.ErrorCode != wantCode || !slices.Equal(mp.Replicas, wantReplicas) || (v >= 5 && !slices.Equal(mp.OfflineReplicas, wantOffline)) {
					t.Errorf("broker %d v%d solo-%d: leader %d code %d replicas %v offline %v, want %d %d %v %v",
						id, v, mp.Partition, mp.Leader, mp.ErrorCode, mp.Replicas, mp.OfflineReplicas, wantLeader, wantCode, wantReplicas, wantOffline)
				}
			}
		}
	}
}

// TestMetadataOfflineReplicaForAFailedLogDir: a broker whose log dir
// went offline (a log's write failed) reports itself as an offline replica
// of the partitions it hosts there (Kafka: isReplicaInOfflineDir), and
// only those: its other log dir serves on.
func TestMetadataOfflineReplicaForAFailedLogDir(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	n := startNode(t, a, map[string]string{"log.dirs": a + "," + b})
	createTopic(t, newAdmin(t, n), "dirfail", 2, nil) // one partition per dir
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "dirfail", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	raw := dialRaw(t, n)
	metadataOffline := func() map[int32][]int32 {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("dirfail")}}
		resp := raw.roundTrip(req).(*kmsg.MetadataResponse)
		out := map[int32][]int32{}
		for _, mp := range resp.Topics[0].Partitions {
			out[mp.Partition] = mp.OfflineReplicas
		}
		return out
	}
	if got := metadataOffline(); len(got[0]) != 0 || len(got[1]) != 0 {
		t.Fatalf("offline replicas %v before any failure", got)
	}
	// Take partition 0's directory away under it: its next roll cannot
	// write, the log latches failed and its log dir goes offline.
	l := n.partition("dirfail", 0).log
	l1 := n.partition("dirfail", 1).log
	if n.store.DirOf(l) == n.store.DirOf(l1) {
		t.Fatalf("both partitions in %s", n.store.DirOf(l))
	}
	if err := os.Rename(l.Dir(), l.Dir()+".gone"); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err == nil || !l.Failed() {
		t.Fatalf("roll in a removed dir: err %v, failed %v", err, l.Failed())
	}
	got := metadataOffline()
	if !slices.Equal(got[0], []int32{1}) || !slices.Equal(got[1], []int32{}) {
		t.Errorf("offline replicas %v, want partition 0 [1] (its dir is offline), partition 1 []", got)
	}
}

func without(ids []int32, drop int32) []int32 {
	out := []int32{}
	for _, id := range ids {
		if id != drop {
			out = append(out, id)
		}
	}
	return out
}

func mapValues[K comparable, V any](m map[K]V) []V {
	var out []V
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
