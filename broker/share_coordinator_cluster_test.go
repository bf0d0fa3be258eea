package broker

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

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
	model := share.PersistedState{StartOffset: 0}
	var acked atomic.Int64
	done := make(chan error, 1)
	const writes = 120
	go func() {
		for i := int64(0); i < writes; i++ {
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
	for acked.Load() < writes/3 {
		select {
		case err := <-done:
			t.Fatalf("writes ended before the crash: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	c.crash(leader, 0, rand.New(rand.NewPCG(1, 2)))
	at := acked.Load()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.waitNewLeader(shareStateTopic, idx, leader)
	if at == writes {
		t.Fatalf("every write was acknowledged before the crash")
	}
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
