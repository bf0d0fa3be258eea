package txncoord

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAddPartitionsWire: both request shapes decode to AddTxns, and the
// responses built from the coordinator's answers decode as kmsg reads them.
func TestAddPartitionsWire(t *testing.T) {
	// v3: one client transaction.
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = "t", 5, 2
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{1, 0}}, {Topic: "b", Partitions: []int32{2}}}
	var back kmsg.AddPartitionsToTxnRequest
	back.Version = 3
	if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	txns := AddTxns(&back)
	want := []TopicPartition{{"a", 1}, {"a", 0}, {"b", 2}}
	if len(txns) != 1 || txns[0].TxnID != "t" || txns[0].ProducerID != 5 || txns[0].Epoch != 2 || txns[0].VerifyOnly || !slices.Equal(txns[0].Partitions, want) {
		t.Fatalf("v3 txns %+v", txns)
	}
	resp := AddPartitionsResponse(3, []AddTxnResult{Uniform(txns[0], kerr.ConcurrentTransactions.Code)})
	var rback kmsg.AddPartitionsToTxnResponse
	rback.Version = 3
	if err := rback.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if len(rback.Topics) != 2 || len(rback.Topics[0].Partitions) != 2 || rback.Topics[1].Partitions[0].ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("v3 response %+v", rback)
	}

	// v4: a leader's verify-only batch of two transactions.
	req = kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{
		{TransactionalID: "t", ProducerID: 5, ProducerEpoch: 2, VerifyOnly: true, Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "a", Partitions: []int32{0}}}},
		{TransactionalID: "u", ProducerID: 6, ProducerEpoch: 0, VerifyOnly: true, Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "b", Partitions: []int32{3, 4}}}},
	}
	back = kmsg.AddPartitionsToTxnRequest{Version: 4}
	if err := back.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	txns = AddTxns(&back)
	if len(txns) != 2 || !txns[1].VerifyOnly || txns[1].TxnID != "u" || !slices.Equal(txns[1].Partitions, []TopicPartition{{"b", 3}, {"b", 4}}) {
		t.Fatalf("v4 txns %+v", txns)
	}
	results := []AddTxnResult{
		{TxnID: "t", Partitions: []PartitionResult{{TopicPartition{"a", 0}, 0}}},
		{TxnID: "u", Partitions: []PartitionResult{{TopicPartition{"b", 3}, 0}, {TopicPartition{"b", 4}, kerr.TransactionAbortable.Code}}},
	}
	resp = AddPartitionsResponse(4, results)
	rback = kmsg.AddPartitionsToTxnResponse{Version: 4}
	if err := rback.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if len(rback.Transactions) != 2 || rback.Transactions[1].TransactionalID != "u" ||
		rback.Transactions[1].Topics[0].Partitions[1].ErrorCode != kerr.TransactionAbortable.Code {
		t.Fatalf("v4 response %+v", rback)
	}
}
