package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// TestKill9TxnCoordinatorBetweenPrepareCommitAndMarkers: a 3-process
// cluster. A transaction writes to a partition whose only replica is on
// broker D; D is killed, then the producer commits: PrepareCommit is
// durable on the coordinator C's ISR, but its marker cannot reach D, so
// the transaction stays PrepareCommit. C is killed -9 there. Once C and D
// run again, the coordinator that loads __transaction_state (C or the
// third broker) sends the commit marker itself: the transaction ends
// CompleteCommit and a read_committed consumer reads its records, those
// of an earlier committed one, and none of an aborted one.
func TestKill9TxnCoordinatorBetweenPrepareCommitAndMarkers(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startProcCluster(t, 3, "transaction.state.log.num.partitions=1")
	_, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 4*procWait)
	defer cancel()

	// The coordinator of "k9" (the one __transaction_state partition).
	var coord int32
	deadline := time.Now().Add(procWait)
	for {
		r := adm.FindTxnCoordinators(ctx, "k9")["k9"]
		if r.Err == nil {
			coord = r.NodeID
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("find coordinator: %v", r.Err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Another broker holds the data partition, alone: one that does not
	// lead the controller quorum, so killing it is one fault. (Killing the
	// data broker when it is also the quorum leader hangs the commit: the
	// EndTxn never answers, a double fault this test does not claim to
	// survive yet; see the closing note of issue 17's session.)
	var leader int32
	if err := testutil.Within(procWait, func() error {
		leader = int32(metricSum(t, c.node(coord).listenerAddr(t, "ADMIN"), "strata_controller_raft_leader_id"))
		if leader == 0 {
			return errors.New("no quorum leader known yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	data := coord%3 + 1
	if data == leader {
		data = data%3 + 1
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "tx9", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{data}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	cl0, _ := c.client()
	resp, err := req.RequestWith(ctx, cl0)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create tx9: %v %+v", err, resp)
	}

	newProducer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.TransactionalID("k9"),
			kgo.DefaultProduceTopic("tx9"), kgo.RetryTimeout(procWait), kgo.TransactionTimeout(2*procWait))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	txn := func(cl *kgo.Client, prefix string, n int, commit bool) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", prefix, err)
			}
		}
		if commit {
			return
		}
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatalf("abort %s: %v", prefix, err)
		}
	}
	cl := newProducer()
	txn(cl, "c1", 10, true)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	txn(cl, "a2", 10, false)
	txn(cl, "c3", 10, true)
	c.node(data).kill()
	// The commit's PrepareCommit waits for the ISR of __transaction_state
	// to drop D (its fencing, broker.session.timeout.ms). If the client's
	// first EndTxn gives up before that, its retries find the transaction
	// in PrepareCommit, whose markers cannot complete while D is down:
	// CONCURRENT_TRANSACTIONS, as Kafka answers (seen in CI). Either way
	// the commit is durable, which waitTxn checks.
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil && !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("commit with the data broker down: %v", err)
	}
	waitTxn(t, ctx, adm, "k9", "PrepareCommit")
	c.node(coord).kill()
	c.restart(data)
	c.restart(coord)

	_, adm = c.client()
	waitTxn(t, ctx, adm, "k9", "CompleteCommit")
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tx9": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]bool{}
	for len(got) < 20 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if strings.HasPrefix(v, "a2-") {
				t.Fatalf("read_committed returned aborted %q", v)
			}
			got[v] = true
		})
	}
	for _, p := range []string{"c1", "c3"} {
		for i := 0; i < 10; i++ {
			if !got[fmt.Sprintf("%s-%d", p, i)] {
				t.Fatalf("committed %s-%d not read (got %d records)", p, i, len(got))
			}
		}
	}
	// The producer goes on with a new instance: fenced and resumed.
	cl2 := newProducer()
	txn(cl2, "c4", 1, true)
	if err := cl2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("a new transaction after the restarts: %v", err)
	}
}

// waitTxn polls DescribeTransactions until id is in state want.
func waitTxn(t *testing.T, ctx context.Context, adm *kadm.Client, id, want string) {
	t.Helper()
	var seen []string // every distinct answer, in order, for the failure message
	note := func(s string) {
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
	}
	for ctx.Err() == nil {
		ds, err := adm.DescribeTransactions(ctx, id)
		if err == nil {
			d := ds[id]
			if d.Err == nil && d.State == want {
				return
			}
			if d.Err != nil {
				note("error " + d.Err.Error())
			} else {
				note(fmt.Sprintf("state %q (epoch %d)", d.State, d.ProducerEpoch))
			}
		} else {
			note("request " + err.Error())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("transaction %s: answers %q, want %s", id, seen, want)
}
