package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/internal/testutil"
)

// replicatedGroupSettings: a replicated __consumer_offsets of three
// partitions on three brokers, commits failing after a second without
// the ISR.
var replicatedGroupSettings = map[string]string{
	"offsets.topic.num.partitions":     "3",
	"offsets.topic.replication.factor": "3",
	"offsets.commit.timeout.ms":        "1000",
	"group.initial.rebalance.delay.ms": "0",
	"group.min.session.timeout.ms":     "100",
}

// groupOnFollowerLed creates __consumer_offsets (through FindCoordinator)
// and returns a group id whose partition a broker other than 1 (which
// cannot be stopped) leads, with that partition and leader.
func groupOnFollowerLed(t *testing.T, c *testCluster) (string, int32, int32) {
	t.Helper()
	findCoordinator(t, dialRaw(t, c.node(1)), "first")
	for _, n := range c.nodes {
		testutil.Eventually(t, testWait, func() bool { return n.groups.numPartitions() == 3 }, "__consumer_offsets everywhere")
	}
	for i := range 100 {
		g := fmt.Sprintf("g%d", i)
		idx := group.PartitionFor(g, 3)
		st, ok := c.partitionState(offsetsTopic, idx)
		if ok && st.Leader > 1 && len(st.ISR) == 3 {
			return g, idx, st.Leader
		}
	}
	t.Fatal("no __consumer_offsets partition led by broker 2 or 3 with a full ISR")
	return "", 0, 0
}

// fetchCommitted asks n for group's committed offset of topic-0 (-1:
// none); code is the partition's or the group's error.
func fetchCommitted(t *testing.T, rc *rawConn, groupID, topic string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group = groupID
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp := rc.roundTrip(req).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestOffsetCommitWaitsForTheISR: with __consumer_offsets at RF=3, a
// commit is answered only once its partition's followers have it, as an
// acks=all produce: with the followers not fetching, it times out after
// offsets.commit.timeout.ms with REQUEST_TIMED_OUT and stays invisible
// (SyncGroup's group metadata write too: COORDINATOR_NOT_AVAILABLE);
// a reload of the partition replays only what the HW covers; once the
// followers fetch again commits succeed and a reload sees them.
func TestOffsetCommitWaitsForTheISR(t *testing.T) {
	c := startCluster(t, 3, replicatedGroupSettings)
	c.createTopicRF("data", 1, 1)
	g, idx, leaderID := groupOnFollowerLed(t, c)
	leader := c.node(leaderID)
	waitLoaded(t, leader, g)
	rc := dialRaw(t, leader)
	// The followers start fetching the new partition within a fetch
	// backoff: until then a commit may time out (a client retries).
	testutil.Eventually(t, testWait, func() error {
		return kerr.ErrorForCode(commitRaw(t, rc, 8, g, "data", 0, 5, nil))
	}, "a commit with the ISR fetching")

	// Freeze the followers of the group's partition (they stay in the ISR
	// for replica.lag.time.max.ms, 30 s).
	for id, n := range c.nodes {
		if id != leaderID {
			n.stopFollowing(n.partition(offsetsTopic, idx))
		}
	}
	start := time.Now()
	if code := commitRaw(t, rc, 8, g, "data", 0, 9, nil); code != kerr.RequestTimedOut.Code {
		t.Fatalf("commit without the followers: %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(code))
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("answered after %v, before offsets.commit.timeout.ms (1s)", took)
	}
	if off, code := fetchCommitted(t, rc, g, "data"); code != 0 || off != 5 {
		t.Fatalf("after the timed-out commit: offset %d code %d, want 5 (the write is not committed)", off, code)
	}
	// SyncGroup's group metadata write waits the same way; Kafka answers
	// its timeout COORDINATOR_NOT_AVAILABLE.
	gs := ""
	for i := 0; gs == ""; i++ {
		if name := fmt.Sprintf("s%d", i); group.PartitionFor(name, 3) == idx {
			gs = name
		}
	}
	ctx := testCtx(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(5)
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = gs, 10000, 10000, "consumer"
	proto := kmsg.NewJoinGroupRequestProtocol()
	meta := kmsg.NewConsumerMemberMetadata()
	proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = []kmsg.JoinGroupRequestProtocol{proto}
	jr := leader.groups.members.JoinGroup(ctx, join)
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		join.MemberID = jr.MemberID
		jr = leader.groups.members.JoinGroup(ctx, join)
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(3)
	sync.Group, sync.Generation, sync.MemberID = gs, jr.Generation, jr.MemberID
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = jr.MemberID, []byte{}
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{sa}
	start = time.Now()
	if sr := leader.groups.members.SyncGroup(ctx, sync); sr.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("sync without the followers: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(sr.ErrorCode))
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("sync answered after %v, before offsets.commit.timeout.ms (1s)", took)
	}

	p := leader.partition(offsetsTopic, idx)
	if p.log.LogEndOffset() <= p.hw.Load() {
		t.Fatalf("LEO %d HW %d: the timed-out commit should sit above the HW", p.log.LogEndOffset(), p.hw.Load())
	}
	reload := func() {
		t.Helper()
		leader.groups.offsetsPartitionChanged(idx, nil)
		leader.groups.offsetsPartitionChanged(idx, p)
		waitLoaded(t, leader, g)
	}
	reload()
	if off, code := fetchCommitted(t, rc, g, "data"); code != 0 || off != 5 {
		t.Fatalf("reloaded with the commit above the HW: offset %d code %d, want 5 (replay stops at the HW)", off, code)
	}

	// A metadata change makes every broker reconcile: the followers fetch
	// again.
	c.createTopicRF("nudge", 1, 1)
	testutil.Eventually(t, testWait, func() bool { return p.hw.Load() == p.log.LogEndOffset() }, "followers caught up")
	if code := commitRaw(t, rc, 8, g, "data", 0, 11, nil); code != 0 {
		t.Fatalf("commit with the ISR back: %v", kerr.ErrorForCode(code))
	}
	reload()
	if off, code := fetchCommitted(t, rc, g, "data"); code != 0 || off != 11 {
		t.Fatalf("reloaded: offset %d code %d, want 11", off, code)
	}
}

// TestGroupCoordinatorMovesWithTheOffsetsLeader: stopping the broker that
// coordinates a group moves the coordinator to the new leader of the
// group's __consumer_offsets partition, which has the committed offsets
// (as durable as acks=all records).
func TestGroupCoordinatorMovesWithTheOffsetsLeader(t *testing.T) {
	settings := map[string]string{"offsets.commit.timeout.ms": "5000"}
	for k, v := range replicatedGroupSettings {
		if _, ok := settings[k]; !ok {
			settings[k] = v
		}
	}
	c := startCluster(t, 3, settings)
	c.createTopicRF("data", 1, 3)
	g, idx, leaderID := groupOnFollowerLed(t, c)
	waitLoaded(t, c.node(leaderID), g)
	old := dialRaw(t, c.node(leaderID))
	testutil.Eventually(t, testWait, func() error {
		return kerr.ErrorForCode(commitRaw(t, old, 8, g, "data", 0, 42, kmsg.StringPtr("md")))
	}, "the commit on broker %d", leaderID)
	c.stop(leaderID)

	var newLeader int32
	testutil.Eventually(t, testWait, func() error {
		st, _ := c.partitionState(offsetsTopic, idx)
		if st.Leader < 1 || st.Leader == leaderID {
			return fmt.Errorf("partition %d: leader %d", idx, st.Leader)
		}
		newLeader = st.Leader
		resp := findCoordinator(t, dialRaw(t, c.node(1)), g)
		if resp.ErrorCode != 0 || resp.NodeID != newLeader {
			return fmt.Errorf("FindCoordinator: %+v, want node %d", resp, newLeader)
		}
		return nil
	}, "the coordinator of %s to move off broker %d", g, leaderID)
	rc := dialRaw(t, c.node(newLeader))
	testutil.Eventually(t, testWait, func() error {
		off, code := fetchCommitted(t, rc, g, "data")
		if code != 0 || off != 42 {
			return fmt.Errorf("offset %d code %v", off, kerr.ErrorForCode(code))
		}
		return nil
	}, "the committed offset on the new coordinator %d", newLeader)
	// The remaining follower switches to the new leader within
	// replica.fetch.backoff.ms; until then a commit may time out, and a
	// client retries it.
	testutil.Eventually(t, testWait, func() error {
		return kerr.ErrorForCode(commitRaw(t, rc, 8, g, "data", 0, 43, nil))
	}, "a commit on the new coordinator")
	if off, _ := fetchCommitted(t, rc, g, "data"); off != 43 {
		t.Fatalf("after a commit on the new coordinator: %d", off)
	}
	// The old coordinator is not answering for it (it is stopped) and the
	// others refuse the group.
	for id, n := range c.nodes {
		if n == nil || id == newLeader {
			continue
		}
		if _, code := fetchCommitted(t, dialRaw(t, n), g, "data"); code != kerr.NotCoordinator.Code {
			t.Errorf("broker %d answers the group: %v, want NOT_COORDINATOR", id, kerr.ErrorForCode(code))
		}
	}
}
