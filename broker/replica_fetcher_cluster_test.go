package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
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
	// Each broker leads one of the three partitions and follows two: its
	// fetchers' figures are on /metrics.
	for id := int32(1); id <= 3; id++ {
		s := scrapeMetrics(t, c.node(id))
		if v := s.get(t, "strata_replica_fetcher_bytes_total"); v <= 0 {
			t.Errorf("broker %d: replicated bytes %v", id, v)
		}
		for _, name := range []string{"strata_replica_fetcher_request_duration_seconds", "strata_replica_fetcher_fetch_gap_seconds",
			"strata_replica_fetcher_append_duration_seconds", "strata_replica_fetcher_records_total", "strata_replica_fetcher_max_lag_records"} {
			s.get(t, name)
		}
		if v := s.get(t, "strata_replica_fetcher_partitions", "state", "fetching"); v != 2 {
			t.Errorf("broker %d follows %v partitions, want 2", id, v)
		}
		s.get(t, "strata_replica_fetcher_lag_records", "topic", "rep")
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
		t.Fatalf("no follower other than broker 1 (leader %d, replicas %v)", st.Leader, st.Replicas)
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

// topicLedElsewhere creates one-partition RF=3 topics named prefix-N until one's
// partition 0 is led by a broker other than 1 (which also runs the
// controller and cannot be stopped), and returns it with its leader.
func (c *testCluster) topicLedElsewhere(t *testing.T, cl *kgo.Client, prefix string, configs map[string]*string) (string, int32) {
	t.Helper()
	for i := range 6 {
		topic := fmt.Sprintf("%s-%d", prefix, i)
		createReplicatedTopic(t, cl, topic, 1, 3, configs)
		var st metadata.PartitionInfo
		testutil.Eventually(t, testWait, func() bool {
			var ok bool
			st, ok = c.partitionState(topic, 0)
			if !ok || st.Leader < 0 {
				return false
			}
			p := c.node(st.Leader).partition(topic, 0)
			return p != nil && p.leader.Load()
		}, "%s has a leader serving it", topic)
		if st.Leader != 1 {
			return topic, st.Leader
		}
	}
	t.Fatal("every topic is led by broker 1")
	return "", -1
}

// TestReplicaFetcherNewLeaderKeepsIdempotence: a follower rebuilds the
// producer state from what it appends, so once the leader is gone and
// the follower leads, a retry of a batch the old leader acknowledged is
// answered as a duplicate at its original offset (nothing appended) and
// the producer's next sequence is accepted.
func TestReplicaFetcherNewLeaderKeepsIdempotence(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "200"})
	cl := c.client()
	topic, leader := c.topicLedElsewhere(t, cl, "idem", nil)
	lc := dialRaw(t, c.node(leader))
	pid := initProducerID(t, lc)
	expectProduce(t, lc, topic, producerBatch(pid, 0, 0, "a", "b"), nil, 0)
	retry := producerBatch(pid, 0, 2, "c")
	expectProduce(t, lc, topic, retry, nil, 2)
	c.waitReplicasIdentical(topic, 0)

	c.stop(leader)
	var next int32
	testutil.Eventually(t, testWait, func() error {
		st, _ := c.partitionState(topic, 0)
		if st.Leader < 0 || st.Leader == leader {
			return fmt.Errorf("leader %d", st.Leader)
		}
		if n := c.node(st.Leader); n == nil || !n.partition(topic, 0).leader.Load() {
			return fmt.Errorf("broker %d does not lead yet", st.Leader)
		}
		next = st.Leader
		return nil
	}, "a new leader")
	nc := dialRaw(t, c.node(next))
	expectProduce(t, nc, topic, producerBatch(pid, 0, 2, "c"), nil, 2)
	if got := leo(c.node(next), topic); got != 3 {
		t.Fatalf("LEO %d after the retried batch, want 3 (a duplicate appends nothing)", got)
	}
	expectProduce(t, nc, topic, producerBatch(pid, 0, 3, "d"), nil, 3)
	expectProduce(t, nc, topic, producerBatch(pid, 0, 5, "gap"), kerr.OutOfOrderSequenceNumber, -1)
}

// TestReplicaFetcherRestartedReplicaTruncatesItsDivergentTail: the
// leader of epoch 0 wrote a tail it never replicated (an acks=1 write),
// then stopped uncleanly (no clean-shutdown marker); another replica was
// elected in epoch 1 and wrote other records at those offsets. The old
// leader comes back as a follower and must truncate its tail by leader
// epoch (DivergingEpoch, or OffsetsForLeaderEpoch with a leader that does
// not check LastFetchedEpoch) and take the new leader's records:
// byte-identical at the end, never the old tail.
func TestReplicaFetcherRestartedReplicaTruncatesItsDivergentTail(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "200"})
	cl := c.client()
	topic, old := c.topicLedElsewhere(t, cl, "tail", nil)
	produceN(t, cl, topic, 0, 50)
	c.waitReplicasIdentical(topic, 0)
	st0, _ := c.partitionState(topic, 0)
	c.stop(old)
	l, err := storage.OpenLog(storage.LogOptions{Dir: filepath.Join(c.dirs[old], topic+"-0"), Topic: topic, Config: storage.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(recordBatch(time.Now().UnixMilli(), vals("ghost", 5)...), storage.AppendOptions{LeaderEpoch: st0.LeaderEpoch, AssignOffsets: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(c.dirs[old], storage.CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testWait, func() error {
		st, _ := c.partitionState(topic, 0)
		if st.Leader < 0 || st.Leader == old || st.LeaderEpoch <= st0.LeaderEpoch {
			return fmt.Errorf("leader %d epoch %d", st.Leader, st.LeaderEpoch)
		}
		if p := c.node(st.Leader).partition(topic, 0); !p.leader.Load() {
			return fmt.Errorf("broker %d does not lead yet", st.Leader)
		}
		return nil
	}, "a new leader")
	produceN(t, cl, topic, 50, 20)
	c.start(old)
	want := c.waitReplicasIdentical(topic, 0)
	if got := c.node(old).partition(topic, 0).log.LogEndOffset(); got != 70 {
		t.Fatalf("restarted replica LEO %d, want 70", got)
	}
	if bytes.Contains(want, []byte("ghost")) {
		t.Fatal("the unreplicated tail reached the leader")
	}
}

// TestListOffsetsLatestIsTheLogEndForReplicas: a follower out of range
// compares its LEO with the leader's, so ListOffsets latest from a replica
// (ReplicaID >= 0, or -2, the debugging replica) answers the log end
// offset, a consumer's (-1) the high watermark, as Kafka does.
func TestListOffsetsLatestIsTheLogEndForReplicas(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "lo", 1, nil)
	c := dialRaw(t, n)
	expectProduce(t, c, "lo", recordBatch(time.Now().UnixMilli(), vals("a", 5)...), nil, 0)
	n.partition("lo", 0).hw.Store(3) // as a leader whose followers have 3
	for _, tc := range []struct {
		replica int32
		want    int64
	}{{-1, 3}, {2, 5}, {-2, 5}} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(7)
		req.ReplicaID = tc.replica
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.ListOffsetsResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != tc.want {
			t.Errorf("replica id %d: offset %d error %d, want %d", tc.replica, p.Offset, p.ErrorCode, tc.want)
		}
	}
}

// TestReplicaFetcherAcknowledgedRecordsSurviveLeaderLoss: acks=all,
// min.insync.replicas=2, an idempotent producer writing while the leader
// is stopped: every acknowledged record is on the new leader and read back
// exactly once (Kafka's validate_delivery rule with idempotence: no loss,
// no duplicate), and offsets are not reused for other records.
func TestReplicaFetcherAcknowledgedRecordsSurviveLeaderLoss(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "200"})
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	two := "2"
	topic, leader := c.topicLedElsewhere(t, cl, "durable", map[string]*string{"min.insync.replicas": &two})

	var mu sync.Mutex
	acked := map[string]int64{}
	var wg sync.WaitGroup
	produce := func(i int) {
		wg.Add(1)
		v := fmt.Sprintf("v-%05d", i)
		cl.Produce(testCtx(t), &kgo.Record{Topic: topic, Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[v] = r.Offset
				mu.Unlock()
			}
		})
	}
	for i := range 200 {
		produce(i)
	}
	wg.Wait()
	start := time.Now()
	c.stop(leader) // while the next records are being written
	t.Logf("leader stopped in %v", time.Since(start))
	for i := 200; i < 400; i++ {
		produce(i)
	}
	wg.Wait()
	t.Logf("200 more records written across the leader's loss in %v", time.Since(start))
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n != 400 {
		// The two replicas left are min.insync.replicas: the producer
		// retries through the failover until each record is acknowledged.
		t.Fatalf("%d of 400 records acknowledged", n)
	}

	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int64{}
	ctx := testCtx(t)
	testutil.Eventually(t, testWait, func() error {
		fs := consumer.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if off, dup := seen[v]; dup {
				t.Errorf("%s read at %d and at %d", v, off, r.Offset)
			}
			seen[v] = r.Offset
		})
		for v, off := range acked {
			got, ok := seen[v]
			if !ok {
				return fmt.Errorf("%d of %d acknowledged records read; %s (acked at %d) missing", len(seen), len(acked), v, off)
			}
			if got != off {
				t.Fatalf("%s acknowledged at %d, read at %d", v, off, got)
			}
		}
		return nil
	}, "every acknowledged record read back")
}
