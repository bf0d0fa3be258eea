package broker

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
)

// electOne runs ElectLeaders of how for topic-p through kadm and returns
// that partition's error (nil: elected).
func electOne(t *testing.T, adm *kadm.Client, how kadm.ElectLeadersHow, topic string, p int32) error {
	t.Helper()
	s := kadm.TopicsSet{}
	s.Add(topic, p)
	res, err := adm.ElectLeaders(testCtx(t), how, s)
	if err != nil {
		t.Fatalf("ElectLeaders %s-%d: %v", topic, p, err)
	}
	r, ok := res[topic][p]
	if !ok {
		t.Fatalf("ElectLeaders %s-%d: no result in %+v", topic, p, res)
	}
	return r.Err
}

// TestElectLeadersPreferredGivesLeadershipBack: a restarted broker leads
// nothing (its leaderships moved when it stopped); ElectLeaders PREFERRED
// through kadm is PREFERRED_LEADER_NOT_AVAILABLE while it is down or out
// of the ISR, gives the partition back once it is in the ISR, and is then
// ELECTION_NOT_NEEDED; UNKNOWN_TOPIC_OR_PARTITION for what does not
// exist; null topics leave out the partitions already led by their
// preferred replica. The controller's
// strata_controller_preferred_replica_imbalance_partitions (Kafka's
// PreferredReplicaImbalanceCount) counts el-0 while it is led elsewhere.
// auto.leader.rebalance.enable is off so only the request moves leaders.
func TestElectLeadersPreferredGivesLeadershipBack(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"auto.leader.rebalance.enable": "false", "broker.heartbeat.interval.ms": "200"})
	adm := kadm.NewClient(c.client())
	c.createAssigned("el", nil, []int32{3, 2, 1}, []int32{1, 2, 3})
	c.waitFullISR("el", 0)
	c.waitFullISR("el", 1)
	imbalance := func(want float64, when string) {
		t.Helper()
		var v float64
		var ok bool
		if err := testutil.Within(testWait, func() bool {
			v, ok = scrapeMetrics(t, c.ctl).value("strata_controller_preferred_replica_imbalance_partitions")
			return ok && v == want
		}); err != nil {
			t.Fatalf("%s: preferred replica imbalance %v (exported %t), want %v", when, v, ok, want)
		}
	}
	imbalance(0, "every preferred replica leading")
	if err := electOne(t, adm, kadm.ElectPreferredReplica, "el", 0); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("preferred replica leading: %v, want ELECTION_NOT_NEEDED", err)
	}

	c.stop(3)
	c.waitNewLeader("el", 0, 3)
	imbalance(1, "el-0 led by another than 3")
	if err := electOne(t, adm, kadm.ElectPreferredReplica, "el", 0); !errors.Is(err, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("preferred replica stopped: %v, want PREFERRED_LEADER_NOT_AVAILABLE", err)
	}
	// v0 has no ElectionType: always PREFERRED (an UNCLEAN election of a
	// led partition would be ELECTION_NOT_NEEDED).
	v0 := kmsg.NewPtrElectLeadersRequest()
	v0.ElectionType, v0.TimeoutMillis = 1, 10000
	v0.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "el", Partitions: []int32{0}}}
	resp, err := v0.RequestWith(testCtx(t), c.client(kgo.MaxVersions(kversion.V2_3_0())))
	if err != nil || resp.Version != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("v0: %v %+v, want v0 PREFERRED_LEADER_NOT_AVAILABLE", err, resp)
	}
	c.start(3)
	c.waitFullISR("el", 0)
	if l := c.leaderOf("el", 0); l == 3 {
		t.Fatal("broker 3 leads el-0 again before any election")
	}
	if err := electOne(t, adm, kadm.ElectPreferredReplica, "el", 0); err != nil {
		t.Fatalf("preferred replica back in the ISR: %v, want elected", err)
	}
	c.waitPartition("el", 0, "broker 3 leading", func(p metadata.PartitionInfo) bool { return p.Leader == 3 })
	imbalance(0, "broker 3 elected again")
	// The elected leader serves: a client's metadata names it.
	testutil.Eventually(t, testWait, func() bool {
		md, err := adm.Metadata(testCtx(t), "el")
		return err == nil && md.Topics["el"].Partitions[0].Leader == 3
	}, "metadata naming broker 3 the leader of el-0")
	if err := electOne(t, adm, kadm.ElectPreferredReplica, "el", 0); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("again: %v, want ELECTION_NOT_NEEDED", err)
	}
	// UNCLEAN on a partition with a leader is not needed either.
	if err := electOne(t, adm, kadm.ElectLiveReplica, "el", 1); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("unclean with a leader: %v, want ELECTION_NOT_NEEDED", err)
	}
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"el", 7}, {"nope", 0}} {
		if err := electOne(t, adm, kadm.ElectPreferredReplica, tp.topic, tp.p); !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("%s-%d: %v, want UNKNOWN_TOPIC_OR_PARTITION", tp.topic, tp.p, err)
		}
	}
	all, err := adm.ElectLeaders(testCtx(t), kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ps := all["el"]; len(ps) != 0 {
		t.Fatalf("null topics: %+v, want el with no partitions (every preferred replica leads)", all)
	}
}

// TestElectLeadersUnclean: a partition whose only ISR member is down is
// offline; ElectLeaders UNCLEAN is ELIGIBLE_LEADERS_NOT_AVAILABLE while
// no replica is live, and once an out-of-sync replica is back it elects
// it (ISR {it}), although the topic does not enable
// unclean.leader.election.enable; the leader recovers (KIP-704) and
// serves.
func TestElectLeadersUnclean(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"auto.leader.rebalance.enable": "false", "broker.heartbeat.interval.ms": "200"})
	adm := kadm.NewClient(c.client())
	c.createAssigned("un", nil, []int32{2, 3})
	c.waitFullISR("un", 0)
	c.stop(3)
	c.waitPartition("un", 0, "ISR [2]", func(p metadata.PartitionInfo) bool { return p.Leader == 2 && slices.Equal(p.ISR, []int32{2}) })
	c.stop(2)
	c.waitPartition("un", 0, "offline", func(p metadata.PartitionInfo) bool { return p.Leader == metadata.NoLeader })
	if err := electOne(t, adm, kadm.ElectLiveReplica, "un", 0); !errors.Is(err, kerr.EligibleLeadersNotAvailable) {
		t.Fatalf("no live replica: %v, want ELIGIBLE_LEADERS_NOT_AVAILABLE", err)
	}
	c.start(3)
	testutil.Eventually(t, testWait, func() bool {
		live := false
		c.ctl.view(func(st *metadata.State) { b, ok := st.Broker(3); live = ok && !b.Fenced })
		return live
	}, "broker 3 unfenced")
	if p, _ := c.partitionState("un", 0); p.Leader != metadata.NoLeader {
		t.Fatalf("un-0 %+v: an out-of-sync replica led without an unclean election", p)
	}
	if err := electOne(t, adm, kadm.ElectPreferredReplica, "un", 0); !errors.Is(err, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("preferred, 2 down: %v, want PREFERRED_LEADER_NOT_AVAILABLE", err)
	}
	if err := electOne(t, adm, kadm.ElectLiveReplica, "un", 0); err != nil {
		t.Fatalf("unclean, 3 live: %v, want elected", err)
	}
	p := c.waitPartition("un", 0, "broker 3 leading", func(p metadata.PartitionInfo) bool { return p.Leader == 3 })
	if !slices.Equal(p.ISR, []int32{3}) {
		t.Fatalf("un-0 after the unclean election: %+v, want ISR [3]", p)
	}
	c.waitPartition("un", 0, "recovered", func(p metadata.PartitionInfo) bool { return p.LeaderRecoveryState == metadata.LeaderRecovered })
	if err := electOne(t, adm, kadm.ElectLiveReplica, "un", 0); !errors.Is(err, kerr.ElectionNotNeeded) {
		t.Fatalf("again: %v, want ELECTION_NOT_NEEDED", err)
	}
}

// TestAutoLeaderRebalanceGivesLeadershipBack: with
// auto.leader.rebalance.enable (a 1 s check) a restarted broker gets the
// leadership of the partitions it prefers back once it is in their ISRs,
// by one election each (the leader epoch moves once when it stops, once
// when it is given back), and the partitions other brokers prefer and
// lead are not touched.
func TestAutoLeaderRebalanceGivesLeadershipBack(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"leader.imbalance.check.interval.seconds": "1", "broker.heartbeat.interval.ms": "200"})
	c.createAssigned("ar", nil, []int32{3, 2, 1}, []int32{3, 1, 2}, []int32{2, 3, 1})
	for p := int32(0); p < 3; p++ {
		c.waitFullISR("ar", p)
	}
	before := map[int32]metadata.PartitionInfo{}
	for p := int32(0); p < 3; p++ {
		before[p], _ = c.partitionState("ar", p)
	}
	c.stop(3)
	c.waitNewLeader("ar", 0, 3)
	c.waitNewLeader("ar", 1, 3)
	c.start(3)
	for p := int32(0); p < 2; p++ {
		st := c.waitPartitionWithin(3*testWait, "ar", p, "broker 3 leading again", func(st metadata.PartitionInfo) bool { return st.Leader == 3 })
		if st.LeaderEpoch != before[p].LeaderEpoch+2 {
			t.Errorf("ar-%d: leader epoch %d, want %d (one election away, one back)", p, st.LeaderEpoch, before[p].LeaderEpoch+2)
		}
	}
	if st, _ := c.partitionState("ar", 2); st.Leader != 2 || st.LeaderEpoch != before[2].LeaderEpoch {
		t.Errorf("ar-2: %+v, want broker 2 still leading in leader epoch %d", st, before[2].LeaderEpoch)
	}
}
