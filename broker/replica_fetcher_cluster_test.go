package broker

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

// replicaLog is one replica's stored log of a partition, from its log
// start to its LEO, as bytes.
func replicaLog(n *Node, topic string, part int32) (leo int64, b []byte, err error) {
	p := n.partition(topic, part)
	if p == nil {
		return -1, nil, fmt.Errorf("node %d hosts no %s-%d", n.cfg.NodeID, topic, part)
	}
	leo = p.log.LogEndOffset()
	var out bytes.Buffer
	for off := p.log.LogStartOffset(); off < leo; {
		v, err := p.log.Read(off, 64<<20, leo)
		if err != nil {
			return leo, nil, err
		}
		bs, err := v.Bytes()
		next := v.NextOffset
		v.Release()
		if err != nil {
			return leo, nil, err
		}
		if next <= off {
			return leo, nil, fmt.Errorf("read at %d made no progress", off)
		}
		out.Write(bs)
		off = next
	}
	return leo, out.Bytes(), nil
}

// waitReplicasIdentical waits until every replica of topic-part has the
// leader's LEO and the same bytes.
func (c *testCluster) waitReplicasIdentical(topic string, part int32) []byte {
	c.t.Helper()
	var want []byte
	testutil.Eventually(c.t, testWait, func() error {
		st, ok := c.partitionState(topic, part)
		if !ok {
			return fmt.Errorf("no partition %s-%d", topic, part)
		}
		ln := c.node(st.Leader)
		if ln == nil {
			return fmt.Errorf("leader %d not running", st.Leader)
		}
		leo, lb, err := replicaLog(ln, topic, part)
		if err != nil {
			return err
		}
		for _, r := range st.Replicas {
			n := c.node(r)
			if n == nil || r == st.Leader {
				continue
			}
			fleo, fb, err := replicaLog(n, topic, part)
			if err != nil {
				return err
			}
			if fleo != leo || !bytes.Equal(fb, lb) {
				return fmt.Errorf("replica %d: LEO %d (%d bytes), leader %d: LEO %d (%d bytes)", r, fleo, len(fb), st.Leader, leo, len(lb))
			}
		}
		want = lb
		return nil
	}, "replicas of %s-%d identical", topic, part)
	return want
}

func createReplicatedTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(context.Background(), partitions, rf, configs, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
}

func produceN(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx := testCtx(t)
	for i := from; i < from+n; i++ {
		r := &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("value-%06d", i))}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %d: %v", i, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReplicaFetcherFollowersHoldTheLeadersBytes: on three brokers, a
// topic at RF=3 with several partitions; records produced to the leaders
// appear on both followers byte for byte (offsets, epochs, CRCs and
// producer fields as the leader stored them), for compressed and
// uncompressed batches.
func TestReplicaFetcherFollowersHoldTheLeadersBytes(t *testing.T) {
	c := startCluster(t, 3, nil)
	cl := c.client(kgo.ProducerBatchCompression(kgo.SnappyCompression(), kgo.NoCompression()))
	createReplicatedTopic(t, cl, "rep", 3, 3, nil)
	produceN(t, cl, "rep", 0, 300)
	plain := c.client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DisableIdempotentWrite())
	produceN(t, plain, "rep", 300, 200)
	total := 0
	for p := int32(0); p < 3; p++ {
		b := c.waitReplicasIdentical("rep", p)
		total += len(b)
		st, _ := c.partitionState("rep", p)
		if len(st.Replicas) != 3 {
			t.Fatalf("partition %d: replicas %v", p, st.Replicas)
		}
	}
	if total == 0 {
		t.Fatal("no bytes replicated")
	}
}

// TestReplicaFetcherRestartedFollowerCatchesUp: a follower stopped while
// records keep arriving catches up from its own log end when it comes
// back, and ends byte-identical to the leader.
func TestReplicaFetcherRestartedFollowerCatchesUp(t *testing.T) {
	c := startCluster(t, 3, nil)
	cl := c.client()
	// Broker 1 leads (replica order starts there for partition 0 of a
	// one-partition topic is not guaranteed): find a follower to stop.
	createReplicatedTopic(t, cl, "catch", 1, 3, nil)
	produceN(t, cl, "catch", 0, 100)
	c.waitReplicasIdentical("catch", 0)
	st, _ := c.partitionState("catch", 0)
	var victim int32 = -1
	for _, r := range st.Replicas {
		if r != st.Leader && r != 1 {
			victim = r
			break
		}
	}
	if victim < 0 {
		t.Skipf("no stoppable follower (leader %d, replicas %v)", st.Leader, st.Replicas)
	}
	c.stop(victim)
	produceN(t, cl, "catch", 100, 400)
	c.start(victim)
	c.waitReplicasIdentical("catch", 0)
	leo := c.node(victim).partition("catch", 0).log.LogEndOffset()
	if leo != 500 {
		t.Fatalf("restarted follower LEO %d, want 500", leo)
	}
}
