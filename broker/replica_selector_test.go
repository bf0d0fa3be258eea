package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

// TestSelectReadReplicaIsKafkasRackAwareSelector: the leader when the
// client names no rack, when no replica is in its rack, or when the leader
// is; otherwise the most caught-up same-rack replica that holds the fetch
// offset.
func TestSelectReadReplicaIsKafkasRackAwareSelector(t *testing.T) {
	leader := readReplica{id: 1, rack: "a", leo: 100}
	f := func(id int32, rack string, leo, start, caught int64) readReplica {
		return readReplica{id: id, rack: rack, leo: leo, logStart: start, lastCaughtUpMs: caught}
	}
	for _, tc := range []struct {
		name   string
		rack   string
		leader readReplica
		cands  []readReplica
		offset int64
		want   int32
	}{
		{"no client rack", "", leader, []readReplica{f(2, "b", 100, 0, 5)}, 50, 1},
		{"no replica in the rack", "c", leader, []readReplica{f(2, "b", 100, 0, 5)}, 50, 1},
		{"leader in the rack", "a", leader, []readReplica{f(2, "a", 100, 0, 5)}, 50, 1},
		{"the follower in the rack", "b", leader, []readReplica{f(2, "b", 90, 0, 5), f(3, "c", 100, 0, 5)}, 50, 2},
		{"most caught up of the rack", "b", leader, []readReplica{f(2, "b", 90, 0, 9), f(3, "b", 95, 0, 1)}, 50, 3},
		{"same LEO: latest caught up", "b", leader, []readReplica{f(2, "b", 95, 0, 9), f(3, "b", 95, 0, 1)}, 50, 2},
		{"follower without the offset (behind)", "b", leader, []readReplica{f(2, "b", 40, 0, 9)}, 50, 1},
		{"follower without the offset (retention)", "b", leader, []readReplica{f(2, "b", 100, 60, 9)}, 50, 1},
		{"unregistered rack never matches", "b", leader, []readReplica{f(2, "", 100, 0, 9)}, 50, 1},
	} {
		if got := selectReadReplica(tc.rack, tc.leader, tc.cands, tc.offset); got != tc.want {
			t.Errorf("%s: selected %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestConsumerFetchesFromTheReplicaInItsRack (KIP-392): three brokers on
// racks r1..r3, the leader's replica.selector.class rack-aware; a franz-go
// consumer with client.rack r3 reads everything acknowledged, and the
// bytes come from broker 3 as a follower after the leader sent it there.
func TestConsumerFetchesFromTheReplicaInItsRack(t *testing.T) {
	own := map[int32]map[string]string{}
	for id := int32(1); id <= 3; id++ {
		own[id] = map[string]string{"broker.rack": fmt.Sprintf("r%d", id)}
	}
	c := startClusterWith(t, 3, map[string]string{"replica.selector.class": rackAwareSelector}, own)
	const topic = "closest"
	createAssigned(t, c.client(), topic, nil, []int32{2, 3, 1})
	c.waitFullISR(topic, 0)
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	const n = 200
	for i := range n {
		if err := prod.ProduceSync(context.Background(), kgo.StringRecord(fmt.Sprintf("v%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Rack("r3"),
		kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(seen), n)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	// The leader (broker 2) sent the consumer away at least once, and
	// broker 3 served records as a follower; more produced now goes the
	// same way.
	if got := counterValue(t, c.node(2).metrics.preferredReplica); got < 1 {
		t.Fatalf("leader answered %v preferred read replicas", got)
	}
	for i := range 50 {
		if err := prod.ProduceSync(context.Background(), kgo.StringRecord(fmt.Sprintf("w%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := testutil.Within(testWait, func() error {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		if len(seen) < n+50 {
			return fmt.Errorf("read %d of %d", len(seen), n+50)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fromFollower := counterValue(t, c.node(3).metrics.consumerFetchBytes[1])
	fromLeader := counterValue(t, c.node(2).metrics.consumerFetchBytes[0])
	t.Logf("consumer bytes: %v from broker 3 as follower, %v from the leader", fromFollower, fromLeader)
	if fromFollower == 0 || fromFollower < fromLeader {
		t.Fatalf("consumer bytes: %v from broker 3 as follower, %v from the leader: want most from its rack's follower", fromFollower, fromLeader)
	}
}
