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
	kill9TxnCommit(t, false)
}

// TestKill9TxnDataBrokerAndQuorumLeaderDuringCommit is the same story
// with a double fault: the data broker D killed before the commit also
// leads the controller quorum, so the commit's PrepareCommit waits for a
// new quorum leader to be elected and to fence D out of the ISR of
// __transaction_state.
func TestKill9TxnDataBrokerAndQuorumLeaderDuringCommit(t *testing.T) {
	kill9TxnCommit(t, true)
}

// kill9TxnCommit runs the story of
// TestKill9TxnCoordinatorBetweenPrepareCommitAndMarkers. The data broker
// is chosen, never left to chance: with quorumLeader, the controller
// quorum's leader (the transactional id is one whose coordinator is
// another broker); without, a broker that is neither the coordinator nor
// the quorum leader.
func kill9TxnCommit(t *testing.T, quorumLeader bool) {
	if testing.Short() {
		t.Skip("process test")
	}
	// Three __transaction_state partitions give a double-fault run an
	// id whose coordinator is not the quorum leader.
	partitions := "1"
	if quorumLeader {
		partitions = "3"
	}
	c := startProcCluster(t, 3, "transaction.state.log.num.partitions="+partitions)
	_, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 4*procWait)
	defer cancel()

	var leader int32 // the controller quorum's leader
	if err := testutil.Within(procWait, func() error {
		leader = int32(metricSum(t, c.node(1).listenerAddr(t, "ADMIN"), "strata_controller_raft_leader_id"))
		if leader == 0 {
			return errors.New("no quorum leader known yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The transactional id and its coordinator (the leader of its
	// __transaction_state partition).
	var id string
	var coord int32
	for i := 0; id == ""; i++ {
		if i == 30 {
			t.Fatalf("no transactional id whose coordinator is not the quorum leader %d", leader)
		}
		cand := "k9"
		if quorumLeader {
			cand = fmt.Sprintf("k9-%d", i)
		}
		if err := testutil.Within(procWait, func() error {
			r := adm.FindTxnCoordinators(ctx, cand)[cand]
			coord = r.NodeID
			return r.Err
		}); err != nil {
			t.Fatalf("find coordinator: %v", err)
		}
		if !quorumLeader || coord != leader {
			id = cand
		}
	}
	// Another broker holds the data partition, alone.
	data := leader
	if !quorumLeader {
		data = coord%3 + 1
		if data == leader {
			data = data%3 + 1
		}
	}
	t.Logf("transactional id %s: coordinator %d, data broker %d, quorum leader %d", id, coord, data, leader)
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

	newProducer := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...), kgo.TransactionalID(id),
			kgo.DefaultProduceTopic("tx9"), kgo.RetryTimeout(procWait), kgo.TransactionTimeout(2 * procWait)}, opts...)...)
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
	// The double fault's PrepareCommit is durable only once the new
	// quorum leader has fenced D: an election plus a fresh
	// broker.session.timeout.ms (9 s), more than franz-go's read deadline
	// for a request without a timeout field (RequestTimeoutOverhead, 10 s;
	// Kafka's Java client waits request.timeout.ms, 30 s). That first
	// answer is lost and the retry path is the one taken; a 2 s deadline
	// makes it the one taken in every run.
	var opts []kgo.Opt
	if quorumLeader {
		opts = append(opts, kgo.RequestTimeoutOverhead(2*time.Second))
	}
	cl := newProducer(opts...)
	txn(cl, "c1", 10, true)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	txn(cl, "a2", 10, false)
	txn(cl, "c3", 10, true)
	if quorumLeader {
		// Still the double fault: D leads the quorum as it is killed.
		if l := int32(metricSum(t, c.node(coord).listenerAddr(t, "ADMIN"), "strata_controller_raft_leader_id")); l != data {
			t.Fatalf("the quorum leader moved from %d to %d before the kill", data, l)
		}
	}
	killed := time.Now()
	c.node(data).kill()
	// The commit's PrepareCommit waits for the ISR of __transaction_state
	// to drop D (its fencing, broker.session.timeout.ms). If the client's
	// first EndTxn gives up before that (its read deadline), its retries
	// find the transaction in PrepareCommit, whose markers cannot complete
	// while D is down: CONCURRENT_TRANSACTIONS, as Kafka answers, which
	// franz-go's EndTransaction retries until its context ends. So the
	// commit runs beside the story, as an application's would, and the
	// cluster heals under it: C is killed once PrepareCommit is durable,
	// then D and C restart, and the commit must then be confirmed.
	committed := make(chan error, 1)
	go func() { committed <- cl.EndTransaction(ctx, kgo.TryCommit) }()
	waitTxn(t, ctx, adm, id, "PrepareCommit")
	t.Logf("PrepareCommit durable %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	c.node(coord).kill()
	c.restart(data)
	c.restart(coord)

	_, adm = c.client()
	waitTxn(t, ctx, adm, id, "CompleteCommit")
	// The producer's commit returns: nil once a retry reaches the
	// coordinator that completed it, or, when franz-go gave up on its way
	// there (a FindCoordinator it sent to a broker still down fails the
	// EndTransaction: 6 of 8 runs of the double fault here), an
	// unconfirmed outcome. Never a broker's error: that would deny a
	// commit that is durable.
	select {
	case err := <-committed:
		var ke *kerr.Error
		if errors.As(err, &ke) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Fatalf("the commit through the faults: %v", err)
		}
		if err != nil {
			t.Logf("the commit through the faults returned %v (unconfirmed; it is CompleteCommit)", err)
		}
	case <-time.After(procWait):
		t.Fatalf("the commit is CompleteCommit but EndTransaction has not returned %v later", procWait)
	}
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
