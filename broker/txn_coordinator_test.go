package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnProps are the settings of the coordinator tests: few
// __transaction_state partitions, so the loads are quick.
var txnProps = map[string]string{"transaction.state.log.num.partitions": "3"}

func txnProducer(t testing.TB, seeds []string, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(testWait), kgo.TransactionalID(id),
		kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// describeTxn returns id's DescribeTransactions state, polling until want
// (if not "") or the deadline.
func waitTxnState(t testing.TB, adm *kadm.Client, id, want string) kadm.DescribedTransaction {
	t.Helper()
	deadline := time.Now().Add(testWait)
	var last kadm.DescribedTransaction
	for {
		ds, err := adm.DescribeTransactions(testCtx(t), id)
		if err == nil {
			if d, ok := ds[id]; ok {
				last = d
				if d.Err == nil && (want == "" || d.State == want) {
					return d
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s: state %q (err %v), want %q", id, last.State, last.Err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTxnCoordinatorCommitAbortOneNode(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 2, nil)
	cl := txnProducer(t, []string{n.Addr()}, "tx-1")
	ctx := testCtx(t)

	for i, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		d := waitTxnState(t, adm, "tx-1", "Ongoing")
		if len(d.Topics["t"]) != 2 || d.TimeoutMillis <= 0 || d.ProducerID < 0 {
			t.Fatalf("ongoing: %+v", d)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %d: %v", i, err)
		}
		want := "CompleteCommit"
		if !commit {
			want = "CompleteAbort"
		}
		waitTxnState(t, adm, "tx-1", want)
	}
	// ListTransactions sees it; the topic is internal and compacted.
	lt, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil || len(lt.TransactionalIDs()) != 1 || lt.TransactionalIDs()[0] != "tx-1" {
		t.Fatalf("list: %v %v", lt, err)
	}
	md, err := adm.Metadata(ctx, txnStateTopic)
	if err != nil || !md.Topics[txnStateTopic].IsInternal || len(md.Topics[txnStateTopic].Partitions) != 3 {
		t.Fatalf("metadata of %s: %+v %v", txnStateTopic, md.Topics[txnStateTopic], err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, txnStateTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range [][2]string{{"cleanup.policy", "compact"}, {"min.insync.replicas", "1"}, {"segment.bytes", "104857600"}} {
		c, err := rc.On(txnStateTopic, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, kv := range c.Configs {
			if kv.Key == want[0] {
				found = true
				if kv.MaybeValue() != want[1] {
					t.Errorf("%s = %q, want %q", want[0], kv.MaybeValue(), want[1])
				}
			}
		}
		if !found {
			t.Errorf("%s missing", want[0])
		}
	}
	_ = errors.New
	_ = kerr.ConcurrentTransactions
	_ = kmsg.NewPtrEndTxnRequest
	_ = context.Background
}
