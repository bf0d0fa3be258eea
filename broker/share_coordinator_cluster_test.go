package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/internal/netfault"
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
// the share coordinator. On a 3-node cluster with every link through a
// proxy, broker 1's persister writes share state (over the inter-broker
// listener) to a key coordinated by another broker, which loses power
// (its links cut at once, its unsynced bytes gone) in the middle of the
// writes; the writes go on (the persister finds the new
// leader of the __share_group_state partition, which replays it), and
// every acknowledged write is read back from the new coordinator, exactly
// as the model built from the acknowledged updates says.
func TestShareStateFailoverKeepsAcknowledgedWrites(t *testing.T) {
	nw := netfault.New(netfault.Refuse)
	t.Cleanup(func() { nw.Close() })
	props := map[string]string{}
	for _, m := range []map[string]string{faultSettings, shareProps} {
		for k, v := range m {
			props[k] = v
		}
	}
	c := startProxiedCluster(t, 3, props, nw, 2, 3)
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

// TestShareStateWriteWaitsForISR: a share-state write is acknowledged only
// once the ISR of its __share_group_state partition has it (acks=all).
// With the followers unable to fetch, a write is not acknowledged within
// its deadline, and nothing is read until its fate is known (the
// coordinator reloads the partition, waiting for the ISR to have the log
// end, so its journal follows the log); once they fetch again it commits
// and the next write is acknowledged with both in the state.
func TestShareStateWriteWaitsForISR(t *testing.T) {
	nw := netfault.New(netfault.Refuse)
	t.Cleanup(func() { nw.Close() })
	props := map[string]string{"replica.lag.time.max.ms": "30000"}
	for k, v := range shareProps {
		props[k] = v
	}
	c := startProxiedCluster(t, 3, props, nw)
	c.createTopicRF("t", 1, 1)
	n1 := c.node(1)
	ctx := testCtx(t)
	if err := n1.shares.ensureTopic(ctx); err != nil {
		t.Fatal(err)
	}
	k, idx, leader := c.shareKeyLedBy("isr", topicID(t, n1, "t"), 1)
	c.waitFullISR(shareStateTopic, idx)
	p := c.node(leader).sharePersister // in process: only replication is cut
	if err := p.Initialize(ctx, k, 0, 0); err != nil {
		t.Fatal(err)
	}
	ack := func(o int64) share.Update {
		return share.Update{StartOffset: -1, DeliveryCompleteCount: -1,
			Batches: []share.StateBatch{{FirstOffset: o, LastOffset: o, DeliveryState: share.Acknowledged, DeliveryCount: 1}}}
	}
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			nw.Cut(nodeIP(id), nodeIP(leader))
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	err := p.Write(wctx, k, 0, 1, ack(0))
	cancel()
	if err == nil {
		t.Fatal("a write was acknowledged while no follower could fetch it")
	}
	// Its fate unknown, the partition reloads until the ISR has the log
	// end: nothing uncommitted is read meanwhile.
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	st, err := p.Read(rctx, k, 1)
	cancel()
	if err == nil {
		t.Fatalf("read the state %+v while a write was not committed", st)
	}
	nw.Heal()
	if err := p.Write(ctx, k, 0, 1, ack(1)); err != nil {
		t.Fatal(err)
	}
	st, err = p.Read(ctx, k, 1)
	want := []share.StateBatch{{FirstOffset: 0, LastOffset: 1, DeliveryState: share.Acknowledged, DeliveryCount: 1}}
	if err != nil || !reflect.DeepEqual(st.Batches, want) {
		t.Fatalf("state: %+v %v, want batches %+v", st, err, want)
	}
}

// TestShareGroupFranzGoThreeNodes runs franz-go's share group tests
// against a 3-node cluster (topics and __share_group_state replicated 3
// times): share-partition leaders reach the share coordinator of each key
// over the inter-broker listener, and groups' coordinators sit on other
// brokers than their partitions' leaders. As TestShareGroupFranzGoOneNode
// it runs when CI=true or STRATA_TEST_KGO=1, and skips while the cluster
// does not advertise ShareFetch and ShareAcknowledge v2 (asked of it).
func TestShareGroupFranzGoThreeNodes(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KGO") != "1" {
		t.Skip("set STRATA_TEST_KGO=1 (or CI=true) to run franz-go's share group tests against a cluster")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	settings := withSettings(map[string]string{
		"group.coordinator.rebalance.protocols": "classic,consumer,share",
		"group.share.heartbeat.interval.ms":     "1000",
		"group.share.min.heartbeat.interval.ms": "1000",
		"offsets.topic.replication.factor":      "3",
	})
	for k, v := range shareProps {
		settings[k] = v
	}
	c := startCluster(t, 3, settings)
	vresp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), c.client())
	if err != nil {
		t.Fatal(err)
	}
	advertised := map[int16]int16{}
	for _, k := range vresp.ApiKeys {
		advertised[k.ApiKey] = k.MaxVersion
	}
	for _, key := range []int16{78, 79} {
		if v, ok := advertised[key]; !ok || v < 2 {
			t.Fatalf("key %d not advertised at v2 with share groups on (franz-go's share tests would skip)", key)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	src := kgoSource(t, ctx)
	tests := []string{"TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal"}
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "-timeout", "6m",
		"-run", "^("+strings.Join(tests, "|")+")$", ".")
	cmd.Dir = filepath.Join(src, "pkg", "kgo")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "KGO_SEEDS="+strings.Join(c.seeds(), ","), "KGO_TEST_RF=3",
		"KGO_TEST_RECORDS=20000", "KGO_LOG_LEVEL=none")
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	re := regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): (\S+) `)
	var pass, skip []string
	for _, m := range re.FindAllSubmatch(out, -1) {
		switch string(m[1]) {
		case "PASS":
			pass = append(pass, string(m[2]))
		case "SKIP":
			skip = append(skip, string(m[2]))
		}
	}
	t.Logf("franz-go share tests on 3 nodes: passed %v, skipped %v, in %v", pass, skip, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("franz-go share tests: %v\n%s", err, out[max(0, len(out)-16<<10):])
	}
	for _, want := range tests {
		if !slices.Contains(pass, want) {
			t.Errorf("%s did not pass (skipped: %v)", want, skip)
		}
	}
}
