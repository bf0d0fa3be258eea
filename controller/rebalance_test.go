package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
)

// TestControllerAutoLeaderRebalance: with auto.leader.rebalance.enable
// the leader's periodic check gives a partition back to its preferred
// replica once that replica is in the ISR, and leaves alone one whose
// preferred replica is out of sync (metadata/testdata/state/rebalance has
// the planner's cases).
func TestControllerAutoLeaderRebalance(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1, tune: func(cfg *Config) {
		cfg.AutoLeaderRebalance = true
		cfg.LeaderImbalanceCheckInterval = 20 * time.Millisecond
		cfg.LeaderImbalancePerBrokerPercentage = 10
	}})
	ctl := c.leader()
	registerBrokers(t, ctl, 2, 0)
	synced, behind := uuid.MustParse("00000000-0000-4000-8000-0000005e7c0d"), uuid.MustParse("00000000-0000-4000-8000-0000000be41d")
	if _, err := ctl.Propose(ctx(t), []metadata.Record{
		&metadata.TopicRecord{Name: "synced", TopicID: synced},
		&metadata.PartitionRecord{TopicID: synced, Replicas: []int32{101, 102}, ISR: []int32{101, 102}, Leader: 102},
		&metadata.TopicRecord{Name: "behind", TopicID: behind},
		&metadata.PartitionRecord{TopicID: behind, Replicas: []int32{101, 102}, ISR: []int32{102}, Leader: 102},
	}); err != nil {
		t.Fatal(err)
	}
	if !waitFor(testWait, func() bool {
		p, _ := ctl.State().Partition(synced, 0)
		return p.Leader == 101
	}) {
		p, _ := ctl.State().Partition(synced, 0)
		t.Fatalf("synced: %+v, want the preferred replica 101 leading", p)
	}
	if p, _ := ctl.State().Partition(behind, 0); p.Leader != 102 || !slices.Equal(p.ISR, []int32{102}) {
		t.Fatalf("behind: %+v, want 102 still leading (101 is not in the ISR)", p)
	}
}
