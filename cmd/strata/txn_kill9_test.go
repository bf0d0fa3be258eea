package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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
func runTxns(t *testing.T, tp *txnProducer, topic string, per int, first int, out *txnOutcome, mid func(i int), stop func(i int) bool) int {
	t.Helper()
	i := first
	for ; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), procWait)
		vals := make([]string, per)
		for j := range vals {
			vals[j] = fmt.Sprintf("t%d-%d", i, j)
		}
		if err := tp.begin(t, i); err != nil {
			cancel()
			t.Fatalf("begin %d: %v", i, err)
		}
		cl := tp.cl
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

// txnProducer is the test's transactional producer: a franz-go client
// that is replaced, as an application replaces its producer, when it
// reports a fatal state of its own making.
type txnProducer struct {
	open     func() (*kgo.Client, error)
	cl       *kgo.Client
	reopened int
}

// begin begins transaction i. A failure carrying a broker's error code
// is the test's failure. One with none is the client's own state: franz-go
// (1.22.3) fails AddPartitionsToTxn with "unknown broker", and the
// producer ID with it, when the coordinator it looked up leaves its
// broker list before the request is sent, which is what the killed
// broker's fencing does to a cached coordinator. Then a new client with
// the same transactional ID takes over (its InitProducerID fences the
// old one and aborts whatever it left open), at most twice a test.
func (tp *txnProducer) begin(t *testing.T, i int) error {
	err := tp.cl.BeginTransaction()
	if _, isBroker := errors.AsType[*kerr.Error](err); err == nil || isBroker || tp.reopened >= 2 {
		return err
	}
	t.Logf("begin %d: %v: the client's own fatal state (no broker error code); a new producer takes over", i, err)
	tp.cl.Close()
	tp.reopened++
	if tp.cl, err = tp.open(); err != nil {
		return err
	}
	return tp.cl.BeginTransaction()
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
	// The producer's log is shown when the test fails: which request met
	// which broker error is what tells a broker bug from a client one.
	var clientLog testutil.SyncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("transactional producer's log:\n%s", clientLog.String())
		}
	})
	tp := &txnProducer{open: func() (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.TransactionalID("txn-kill9"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(20*time.Second),
			kgo.RequestTimeoutOverhead(5*time.Second), kgo.RetryTimeout(procWait),
			kgo.WithLogger(kgo.BasicLogger(&clientLog, kgo.LogLevelInfo, nil)))
	}}
	var err error
	if tp.cl, err = tp.open(); err != nil {
		t.Fatal(err)
	}
	defer func() { tp.cl.Close() }()

	var out txnOutcome
	const per = 50
	next := runTxns(t, tp, topic, per, 0, &out, nil, func(i int) bool { return i >= 5 })
	// Kill the leader while the next transaction's records are in flight.
	killed, killAt := p.Leader, next
	next = runTxns(t, tp, topic, per, next, &out, func(i int) {
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
	runTxns(t, tp, topic, per, next, &out, nil, func(i int) bool { return i >= next+3 && i%3 != 2 })
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
