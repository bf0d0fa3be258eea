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

// TestControllerElectLeadersInSteps: an ElectLeaders over 2 500
// partitions (every one led by its second replica) commits as several
// entries of at most metadata.MaxElectionsPerStep elections, the decider
// free between them, rather than one entry of 2 500; it answers once all
// are applied, every partition elected.
func TestControllerElectLeadersInSteps(t *testing.T) {
	const n = 2*metadata.MaxElectionsPerStep + 500
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	registerBrokers(t, ctl, 2, 0)
	id := uuid.MustParse("00000000-0000-4000-8000-0000000e1ec5")
	recs := []metadata.Record{&metadata.TopicRecord{Name: "big", TopicID: id}}
	for p := range n {
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: int32(p), Replicas: []int32{101, 102}, ISR: []int32{101, 102}, Leader: 102})
	}
	from, err := ctl.Propose(ctx(t), recs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ctl.ElectLeaders(ctx(t), metadata.ElectLeadersRequest{Type: metadata.ElectPreferred})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || len(res[0].Partitions) != n {
		t.Fatalf("answers for %d topics, want 1 with %d partitions", len(res), n)
	}
	for _, p := range res[0].Partitions {
		if p.Err != nil {
			t.Fatalf("big-%d: %v", p.Partition, p.Err)
		}
	}
	if imb := ctl.State().PreferredReplicaImbalance(); imb != 0 {
		t.Fatalf("%d partitions not led by their preferred replica once answered", imb)
	}
	last := ctl.State().Offset()
	w, err := ctl.Watch(ctx(t), from+1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var entries []int
	for total := 0; total < n; {
		d, err := w.Next(ctx(t))
		if err != nil {
			t.Fatalf("watch: %v (elections seen %v)", err, entries)
		}
		if d.Offset > last {
			t.Fatalf("elections seen %v, %d of %d, up to offset %d", entries, total, n, last)
		}
		k := 0
		for _, r := range d.Records {
			if _, ok := r.(*metadata.PartitionChangeRecord); ok {
				k++
			}
		}
		if k > 0 {
			entries = append(entries, k)
			total += k
		}
	}
	if len(entries) < 3 || slices.Max(entries) > metadata.MaxElectionsPerStep {
		t.Fatalf("elections per entry %v, want at least 3 entries of at most %d", entries, metadata.MaxElectionsPerStep)
	}
}

// TestPreferredReplicaImbalanceGaugeOnTheLeaderAlone: the active
// controller exports the count of partitions led by another than their
// preferred replica (offline ones too); the other controllers, whose
// images are the same, export 0, so a sum over the quorum is the count.
func TestPreferredReplicaImbalanceGaugeOnTheLeaderAlone(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	ctl := c.leader()
	registerBrokers(t, ctl, 2, 0)
	id := uuid.MustParse("00000000-0000-4000-8000-0000000001b2")
	recs := []metadata.Record{&metadata.TopicRecord{Name: "imb", TopicID: id}}
	for p, leader := range []int32{101, 102, metadata.NoLeader} {
		recs = append(recs, &metadata.PartitionRecord{TopicID: id, Partition: int32(p), Replicas: []int32{101, 102}, ISR: []int32{101, 102}, Leader: leader})
	}
	off, err := ctl.Propose(ctx(t), recs)
	if err != nil {
		t.Fatal(err)
	}
	const name = "strata_controller_preferred_replica_imbalance_partitions"
	for cid, reg := range c.regs {
		want := 0.0
		if c.ctrls[cid] == ctl {
			want = 2
		}
		if !waitFor(testWait, func() bool {
			if c.ctrls[cid].Status().Applied < uint64(off) {
				return false
			}
			mfs, err := reg.Gather()
			if err != nil {
				return false
			}
			for _, mf := range mfs {
				if mf.GetName() == name {
					return mf.GetMetric()[0].GetGauge().GetValue() == want
				}
			}
			return false
		}) {
			t.Fatalf("controller %d (leader %t): %s is not %v", cid, c.ctrls[cid] == ctl, name, want)
		}
	}
}
