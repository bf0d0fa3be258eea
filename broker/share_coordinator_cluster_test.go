package broker

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
)

// shareKeyLedBy returns a key of group prefix-i whose __share_group_state
// partition is led by a broker other than not.
func (c *testCluster) shareKeyLedBy(prefix string, topic [16]byte, not int32) (share.Key, int32, int32) {
	c.t.Helper()
	for i := 0; i < 1000; i++ {
		k := share.Key{Group: fmt.Sprintf("%s-%d", prefix, i), TopicID: topic, Partition: 0}
		idx := sharePartitionFor(k, 3)
		if l := c.leaderOf(shareStateTopic, idx); l > 0 && l != not {
			return k, idx, l
		}
	}
	c.t.Fatalf("no share key led elsewhere than %d", not)
	return share.Key{}, 0, 0
}

// TestShareStateFailoverKeepsAcknowledgedWrites: the durability claim of
// the share coordinator. On a 3-node cluster, broker 1's persister writes
// share state (over the inter-broker listener) to a key coordinated by
// another broker, which loses power (its unsynced bytes gone) in the
// middle of the writes; the writes go on (the persister finds the new
// leader of the __share_group_state partition, which replays it), and
// every acknowledged write is read back from the new coordinator, exactly
// as the model built from the acknowledged updates says.
func TestShareStateFailoverKeepsAcknowledgedWrites(t *testing.T) {
	c := startMemCluster(t, 3, shareProps, 2, 3)
	c.createTopicRF("t", 1, 1)
	n1 := c.node(1)
	ctx := testCtx(t)
	if err := n1.shares.ensureTopic(ctx); err != nil {
		t.Fatal(err)
	}
	k, idx, leader := c.shareKeyLedBy("fo", topicID(t, n1, "t"), 1)
	c.waitFullISR(shareStateTopic, idx)
	p := n1.sharePersister
	if err := p.Initialize(ctx, k, 0, 0); err != nil {
		t.Fatal(err)
	}
	// Broker 1 does not coordinate k: NOT_COORDINATOR (its persister went
	// to the leader).
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	rt.TopicID = k.TopicID
	rt.Partitions = append(rt.Partitions, kmsg.NewReadShareGroupStateSummaryRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	req.SetVersion(1)
	resp := dialRaw(t, n1).roundTrip(req).(*kmsg.ReadShareGroupStateSummaryResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("summary on a broker not coordinating the key: %v", kerr.ErrorForCode(code))
	}
	model := share.PersistedState{StartOffset: 0}
	var acked atomic.Int64
	var stop atomic.Bool
	done := make(chan error, 1)
	go func() {
		for i := int64(0); !stop.Load(); i++ {
			u := share.Update{StartOffset: -1, DeliveryCompleteCount: -1,
				Batches: []share.StateBatch{{FirstOffset: i, LastOffset: i, DeliveryState: share.Acknowledged, DeliveryCount: 1}}}
			if i%10 == 9 {
				u.StartOffset = i - 5
			}
			if err := p.Write(ctx, k, 0, 1, u); err != nil {
				done <- fmt.Errorf("write %d: %w", i, err)
				return
			}
			model.Apply(u)
			acked.Add(1)
		}
		done <- nil
	}()
	waitAcked := func(n int64) {
		for acked.Load() < n {
			select {
			case err := <-done:
				t.Fatalf("writes ended after %d: %v", acked.Load(), err)
			case <-time.After(time.Millisecond):
			}
		}
	}
	waitAcked(40)
	at := acked.Load()
	c.crash(leader, 0, rand.New(rand.NewPCG(1, 2)))
	c.waitNewLeader(shareStateTopic, idx, leader)
	waitAcked(acked.Load() + 40) // acknowledged by the new coordinator
	stop.Store(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	writes := acked.Load()
	st, err := p.Read(ctx, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.StartOffset != model.StartOffset || !reflect.DeepEqual(st.Batches, model.Batches) {
		t.Fatalf("after the failover (crash after %d of %d writes): start %d batches %+v, want start %d batches %+v",
			at, writes, st.StartOffset, st.Batches, model.StartOffset, model.Batches)
	}
	if now := c.leaderOf(shareStateTopic, idx); now == leader || now < 0 {
		t.Fatalf("state partition led by %d after the crash of %d", now, leader)
	}
}
