package admincli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

// TestTxnCommands: a franz-go transactional producer with a transaction
// open on two partitions; `txn list` and `txn describe` show it Ongoing
// with its partitions; `txn find-hanging` does not call it hanging (its
// coordinator knows it); `txn abort --start-offset` writes the ABORT
// marker of one partition, whose producer state then has no open
// transaction and whose read_committed readers see none of its records;
// usage errors exit 2.
func TestTxnCommands(t *testing.T) {
	n := testNode(t)
	addr := n.Addr()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(testWait))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(testCtx(t), 2, 1, nil, "tx"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("cli-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for part := range int32(2) {
		if err := p.ProduceSync(testCtx(t), &kgo.Record{Topic: "tx", Partition: part, Value: []byte("open")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	r := cliAt(t, addr, "", "txn", "list", "--format", "json")
	var ls []txnListed
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &ls) != nil || len(ls) != 1 || ls[0].TxnID != "cli-txn" || ls[0].State != "Ongoing" {
		t.Fatalf("txn list: %v", r)
	}
	if r := cliAt(t, addr, "", "txn", "list", "--state", "CompleteCommit", "--format", "json"); r.code != ExitOK || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("txn list --state CompleteCommit: %v", r)
	}
	r = cliAt(t, addr, "", "txn", "describe", "cli-txn", "--format", "json")
	var ds []txnDescribed
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &ds) != nil || len(ds) != 1 || ds[0].State != "Ongoing" ||
		len(ds[0].Partitions) != 1 || len(ds[0].Partitions[0].Partitions) != 2 || ds[0].ProducerID != ls[0].ProducerID {
		t.Fatalf("txn describe: %v", r)
	}
	if r := cliAt(t, addr, "", "txn", "describe", "no-such-txn"); r.code != ExitFail {
		t.Errorf("describe of an unknown id: %v", r)
	}
	var hs []hanging
	if r := cliAt(t, addr, "", "txn", "find-hanging", "--max-transaction-timeout", "1ms", "--format", "json"); r.code != ExitOK ||
		json.Unmarshal([]byte(r.stdout), &hs) != nil || len(hs) != 0 {
		t.Fatalf("find-hanging of a transaction its coordinator knows: %v", r)
	}

	// The open transaction starts at offset 0 of both partitions.
	var ab txnAborted
	if r := cliAt(t, addr, "", "txn", "abort", "--topic", "tx", "--partition", "1", "--start-offset", "0", "--format", "json"); r.code != ExitOK ||
		json.Unmarshal([]byte(r.stdout), &ab) != nil || ab.ProducerID != ls[0].ProducerID {
		t.Fatalf("txn abort: %v", r)
	}
	testutil.Eventually(t, testWait, func() bool {
		set := kadm.TopicsSet{}
		set.Add("tx", 1)
		prods, err := adm.DescribeProducers(testCtx(t), set)
		if err != nil {
			return false
		}
		open := false
		prods.EachProducer(func(d kadm.DescribedProducer) { open = open || d.CurrentTxnStartOffset >= 0 })
		return !open
	}, "partition 1's producer state without an open transaction after the abort")
	if r := cliAt(t, addr, "", "txn", "abort", "--topic", "tx", "--partition", "1", "--start-offset", "0"); r.code != ExitFail {
		t.Errorf("a second abort found a transaction: %v", r)
	}
	// The producer commits: partition 0's record is committed, partition
	// 1's stays aborted (its COMMIT marker comes after the ABORT).
	if err := p.EndTransaction(testCtx(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	rc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("tx"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []string
	deadline := time.Now().Add(3 * time.Second) // partition 1's end must pass too: nothing more comes
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(testCtx(t), 500*time.Millisecond)
		fs := rc.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%d:%s", r.Partition, r.Value)) })
	}
	if len(got) != 1 || got[0] != "0:open" {
		t.Fatalf("read_committed after the abort of partition 1 and the commit: %v, want [0:open]", got)
	}
	for _, args := range [][]string{
		{"abort", "--topic", "tx"},
		{"abort", "--topic", "tx", "--partition", "0"},
		{"abort", "--topic", "tx", "--partition", "0", "--start-offset", "0", "--producer-id", "5"},
		{"list", "--producer-id", "x"},
		{"describe"},
	} {
		if r := cliAt(t, addr, "", "txn", args...); r.code != ExitUsage {
			t.Errorf("txn %v: %v, want a usage error", args, r)
		}
	}
}
