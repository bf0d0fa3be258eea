package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

// TestShareGroupCoordinatorFailover: on three brokers with
// __consumer_offsets at RF=3, three franz-go share consumers join a group
// and one leaves (group epoch 4); its coordinator is then stopped; the new leader of the group's
// partition loads the group from the replicated records 10-15 as it was
// (group epoch, members, their epochs and shared partitions), and the
// members go on heartbeating there without a new epoch.
func TestShareGroupCoordinatorFailover(t *testing.T) {
	settings := map[string]string{
		"offsets.commit.timeout.ms":             "5000",
		"group.coordinator.rebalance.protocols": "classic,consumer,share",
		"group.share.session.timeout.ms":        "6000",
		"group.share.min.session.timeout.ms":    "100",
		"group.share.min.heartbeat.interval.ms": "50",
		"group.share.heartbeat.interval.ms":     "100",
	}
	for k, v := range replicatedGroupSettings {
		if _, ok := settings[k]; !ok {
			settings[k] = v
		}
	}
	c := startCluster(t, 3, settings)
	c.createTopicRF("t", 3, 3)
	g, idx, leaderID := groupOnFollowerLed(t, c)
	waitLoaded(t, c.node(leaderID), g)
	var clients []*kgo.Client
	for range 3 {
		cl := c.client(kgo.ShareGroup(g), kgo.ConsumeTopics("t"))
		go func() {
			for !cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
		clients = append(clients, cl)
	}
	adm := kadm.NewClient(c.client())
	testutil.Eventually(t, testWait, func() error {
		ds, err := adm.DescribeShareGroups(testCtx(t), g)
		if err == nil && len(ds[g].Members) != 3 {
			err = fmt.Errorf("%d members", len(ds[g].Members))
		}
		return err
	}, "three share members")
	// The third one leaves: the group is at epoch 4, which two members
	// joining afresh would not reach (a coordinator that lost the group).
	clients[2].Close()
	stable := func(adm *kadm.Client) (kadm.DescribedShareGroup, error) {
		ds, err := adm.DescribeShareGroups(testCtx(t), g)
		if err != nil {
			return kadm.DescribedShareGroup{}, err
		}
		d := ds[g]
		if d.Err != nil {
			return d, d.Err
		}
		if len(d.Members) != 2 {
			return d, fmt.Errorf("%d members", len(d.Members))
		}
		held := 0
		for _, m := range d.Members {
			if m.MemberEpoch != d.AssignmentEpoch {
				return d, fmt.Errorf("member %s at epoch %d, assignment epoch %d", m.MemberID, m.MemberEpoch, d.AssignmentEpoch)
			}
			for _, ps := range m.Assignment {
				held += len(ps)
			}
		}
		if held != 3 {
			return d, fmt.Errorf("%d partitions held", held)
		}
		return d, nil
	}
	var before kadm.DescribedShareGroup
	testutil.Eventually(t, testWait, func() (err error) { before, err = stable(adm); return err }, "two share members holding t")
	if before.GroupEpoch != 4 {
		t.Fatalf("group epoch %d after three joins and a leave", before.GroupEpoch)
	}

	c.stop(leaderID)
	testutil.Eventually(t, testWait, func() error {
		st, _ := c.partitionState(offsetsTopic, idx)
		if st.Leader < 1 || st.Leader == leaderID {
			return fmt.Errorf("partition %d: leader %d", idx, st.Leader)
		}
		return nil
	}, "a new leader of %s-%d", offsetsTopic, idx)
	var after kadm.DescribedShareGroup
	adm = kadm.NewClient(c.client()) // a client that never knew the old coordinator
	testutil.Eventually(t, testWait, func() (err error) {
		if after, err = stable(adm); err != nil {
			return err
		}
		if after.Coordinator.NodeID == leaderID {
			return fmt.Errorf("still described by broker %d", leaderID)
		}
		return nil
	}, "the group on its new coordinator")
	if after.GroupEpoch != before.GroupEpoch || after.AssignmentEpoch != before.AssignmentEpoch {
		t.Fatalf("after the failover: epochs %d/%d, before %d/%d (a rebalance)", after.GroupEpoch, after.AssignmentEpoch, before.GroupEpoch, before.AssignmentEpoch)
	}
	for i, m := range after.Members {
		b := before.Members[i]
		if m.MemberID != b.MemberID || m.MemberEpoch != b.MemberEpoch || fmt.Sprint(m.Assignment.Sorted()) != fmt.Sprint(b.Assignment.Sorted()) {
			t.Errorf("member after the failover %+v, before %+v", m, b)
		}
	}
}
