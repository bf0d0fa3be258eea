package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnOutcome is what a transactional producer knows of its transactions:
// committed (EndTransaction commit answered), aborted (EndTransaction
// abort answered), or uncertain (the end itself failed: either outcome,
// but all of the transaction or none of it).
type txnOutcome struct {
	committed, aborted, uncertain [][]string
}

// runTxns runs transactions of per records each on partition 0 of topic
// with cl until stop returns true after a transaction; every third is
// aborted on purpose. A failed produce or commit aborts. mid, if not nil,
// runs in each transaction once its records are handed to the client,
// before they are flushed.
func runTxns(t *testing.T, cl *kgo.Client, topic string, per int, first int, out *txnOutcome, mid func(i int), stop func(i int) bool) int {
	t.Helper()
	i := first
	for ; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), procWait)
		vals := make([]string, per)
		for j := range vals {
			vals[j] = fmt.Sprintf("t%d-%d", i, j)
		}
		if err := cl.BeginTransaction(); err != nil {
			cancel()
			t.Fatalf("begin %d: %v", i, err)
		}
		var perr error
		for _, v := range vals {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err != nil && perr == nil {
					perr = err
				}
			})
		}
		if mid != nil {
			mid(i)
		}
		if err := cl.Flush(ctx); err != nil && perr == nil {
			perr = err
		}
		commit := perr == nil && i%3 != 2
		err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
		cancel()
		switch {
		case err == nil && commit:
			out.committed = append(out.committed, vals)
		case err == nil:
			out.aborted = append(out.aborted, vals)
		default:
			t.Logf("transaction %d (commit %v, produce error %v): end: %v", i, commit, perr, err)
			out.uncertain = append(out.uncertain, vals)
			if kgoFatalTxn(err) {
				t.Fatalf("transaction %d: fatal: %v", i, err)
			}
		}
		if stop(i) {
			return i + 1
		}
	}
}

// kgoFatalTxn reports an error after which the producer cannot go on.
func kgoFatalTxn(err error) bool {
	return err != nil && strings.Contains(err.Error(), "FENCED")
}

// TestTxnKill9PartitionLeaderMidTransaction: a franz-go transactional
// producer commits and aborts transactions on an RF=3 partition (min ISR 2)
// while the partition's leader is killed with SIGKILL mid-transaction and
// later restarted; a read_committed consumer then reads every committed
// record exactly once, in order, no record of an aborted transaction, and
// each uncertain transaction whole or not at all.
func TestTxnKill9PartitionLeaderMidTransaction(t *testing.T) {
	c := startProcCluster(t, 3, append(slices.Clone(faultProcSettings),
		"transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
		"offsets.topic.replication.factor=3")...)
	_, adm := c.client()
	const topic = "txn-kill9"
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v / %v", err, resp.Err)
	}
	p := waitPartition0(t, adm, topic, "all three replicas in sync", func(p kadm.PartitionDetail, _ []int32) bool {
		return len(p.ISR) == 3 && p.Leader >= 0
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.TransactionalID("txn-kill9"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(20*time.Second),
		kgo.RequestTimeoutOverhead(5*time.Second), kgo.RetryTimeout(procWait))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	var out txnOutcome
	const per = 50
	next := runTxns(t, cl, topic, per, 0, &out, nil, func(i int) bool { return i >= 5 })
	// Kill the leader while the next transaction's records are in flight.
	killed, killAt := p.Leader, next
	next = runTxns(t, cl, topic, per, next, &out, func(i int) {
		if i == killAt {
			c.node(killed).kill()
		}
	}, func(i int) bool { return i >= killAt+8 })
	_, adm2 := c.client(killed)
	waitPartition0(t, adm2, topic, "a new leader", func(p kadm.PartitionDetail, _ []int32) bool {
		return p.Leader >= 0 && p.Leader != killed
	})
	c.restart(killed)
	waitPartition0(t, adm, topic, "the ISR full again", func(p kadm.PartitionDetail, _ []int32) bool {
		return len(p.ISR) == 3 && p.Leader >= 0
	})
	runTxns(t, cl, topic, per, next, &out, nil, func(i int) bool { return i >= next+3 && i%3 != 2 })
	if len(out.committed) < 8 {
		t.Fatalf("only %d transactions committed: %+v", len(out.committed), out.uncertain)
	}
	sentinel := out.committed[len(out.committed)-1]
	last := sentinel[len(sentinel)-1]

	rc, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), procWait)
	defer ccancel()
	var got []string
	for !slices.Contains(got, last) {
		fs := rc.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("read_committed: %d records, never the last committed %q", len(got), last)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}

	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for _, txn := range out.aborted {
		for _, v := range txn {
			if seen[v] > 0 {
				t.Fatalf("read_committed shows %q of an aborted transaction", v)
			}
		}
	}
	want := 0
	for _, txn := range out.committed {
		for _, v := range txn {
			if seen[v] != 1 {
				t.Fatalf("committed %q read %d times", v, seen[v])
			}
			want++
		}
	}
	for _, txn := range out.uncertain {
		n := 0
		for _, v := range txn {
			n += min(seen[v], 1)
			if seen[v] > 1 {
				t.Fatalf("%q read %d times", v, seen[v])
			}
		}
		if n != 0 && n != len(txn) {
			t.Fatalf("uncertain transaction %s...: %d of its %d records visible", txn[0], n, len(txn))
		}
		want += n
	}
	if len(got) != want {
		t.Fatalf("read %d records, want %d", len(got), want)
	}
	// In order: within each transaction, and the committed ones in commit order.
	pos := map[string]int{}
	for i, v := range got {
		pos[v] = i
	}
	prev := -1
	for _, txn := range out.committed {
		for _, v := range txn {
			if pos[v] < prev {
				t.Fatalf("%q read out of order", v)
			}
			prev = pos[v]
		}
	}
	t.Logf("%d committed, %d aborted, %d uncertain transactions; %d records read_committed; leader %d killed",
		len(out.committed), len(out.aborted), len(out.uncertain), len(got), killed)
}
