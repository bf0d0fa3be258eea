package broker

import (
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/tiering"
)

// TestTieredZombieLeaderIsFencedFromTheTier: broker 2 leads a tiered
// partition and uploads; it goes away and broker 3 is elected; broker 2
// comes back as a follower, and its uploader is then driven as a zombie
// leader would drive it: in the old leader epoch, on its own log, with a
// sealed segment the new leader has not uploaded yet. The controller
// refuses every write it tries (a copy's COPY_STARTED, or the new
// leader's in-flight copy taken for an orphan: DELETE_STARTED), its task
// stops, and nothing of broker 2 is registered after the failover; the
// new leader's uploads go on, and the remote tier and the bucket's
// manifest tile the log with no overlap.
func TestTieredZombieLeaderIsFencedFromTheTier(t *testing.T) {
	settings, _ := tierClusterSettings(t, nil)
	c := startCluster(t, 3, settings)
	const topic = "tier-zombie"
	c.createAssigned(topic, tierTopicConfigs(), []int32{2, 3, 1})

	const first = 300
	produceTier(t, c.client(), topic, 0, first)
	rollPartition(t, c.node(2), topic, 0)
	c.waitRemoteEnd(topic, 0, first-1)
	st, _ := c.partitionState(topic, 0)
	if st.Leader != 2 {
		t.Fatalf("leader %d, want 2", st.Leader)
	}
	oldEpoch := st.LeaderEpoch
	before := map[uuid.UUID]bool{}
	for _, s := range c.remoteSegmentsAll(topic, 0) {
		before[s.SegmentID] = true
	}

	c.stop(2)
	leader := c.waitLeader(topic, 0, 2)
	c.start(2)
	cl := c.client()
	const second = 350 // not a segment boundary: the leader's active segment holds the tail
	produceTier(t, cl, topic, first, second)
	var zp *partition
	testutil.Eventually(t, testWait, func() error {
		zp = c.node(2).partition(topic, 0)
		if zp == nil || zp.leader.Load() {
			return fmt.Errorf("broker 2 not a follower of %s-0 yet", topic)
		}
		if leo, hw := zp.log.LogEndOffset(), zp.hw.Load(); leo != second || hw != second {
			return fmt.Errorf("broker 2: log end %d, HW %d, want %d", leo, hw, second)
		}
		return nil
	}, "broker 2 caught up as a follower")
	// Sealed on broker 2 only: a copy the new leader has not made.
	rollPartition(t, c.node(2), topic, 0)

	part := tiering.Partition{Topic: topic, TopicID: zp.topicID, Index: 0}
	up := c.node(2).tier.up
	up.Lead(tiering.LeaderPartition{
		Partition: part, Log: zp.log, HighWatermark: zp.hw.Load,
		LeaderEpoch: func() int32 { return oldEpoch },
	})
	testutil.Eventually(t, testWait, func() error {
		if !up.Fenced(part) {
			return fmt.Errorf("broker 2's uploader in epoch %d not fenced (segments %v)", oldEpoch, segRanges(c.remoteSegmentsAll(topic, 0)))
		}
		return nil
	}, "the zombie's uploader fenced by the controller")
	for _, s := range c.remoteSegmentsAll(topic, 0) {
		if s.BrokerID == 2 && !before[s.SegmentID] {
			t.Fatalf("the zombie registered segment [%d, %d] %s (segments %v)", s.BaseOffset, s.EndOffset, s.State, segRanges(c.remoteSegmentsAll(topic, 0)))
		}
	}

	const third = 500
	produceTier(t, cl, topic, second, third)
	rollPartition(t, c.node(leader), topic, 0)
	c.waitRemoteEnd(topic, 0, third-1)
	testutil.Eventually(t, testWait, func() error {
		return c.checkTierContiguous(c.node(leader), topic, 0, third-1)
	}, "a contiguous remote tier, its manifest naming exactly the controller's segments")
	for _, s := range c.remoteSegmentsAll(topic, 0) {
		if s.BrokerID == 2 && !before[s.SegmentID] {
			t.Fatalf("a segment [%d, %d] of broker 2 after the failover", s.BaseOffset, s.EndOffset)
		}
	}
	consumeTier(t, c.client(), topic, third)
}
