package txncoord

import "github.com/twmb/franz-go/pkg/kmsg"

// AddTxn is one transaction of an AddPartitionsToTxn request: v0–3 carry
// one (a client's), v4+ a batch (a partition leader's, KIP-890), each
// possibly VerifyOnly.
type AddTxn struct {
	TxnID      string
	ProducerID int64
	Epoch      int16
	VerifyOnly bool
	Partitions []TopicPartition
}

// AddTxns returns the transactions of an AddPartitionsToTxn request of
// either shape, partitions in request order.
func AddTxns(req *kmsg.AddPartitionsToTxnRequest) []AddTxn {
	if req.Version < 4 {
		t := AddTxn{TxnID: req.TransactionalID, ProducerID: req.ProducerID, Epoch: req.ProducerEpoch}
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				t.Partitions = append(t.Partitions, TopicPartition{rt.Topic, p})
			}
		}
		return []AddTxn{t}
	}
	out := make([]AddTxn, 0, len(req.Transactions))
	for _, rt := range req.Transactions {
		t := AddTxn{TxnID: rt.TransactionalID, ProducerID: rt.ProducerID, Epoch: rt.ProducerEpoch, VerifyOnly: rt.VerifyOnly}
		for _, tt := range rt.Topics {
			for _, p := range tt.Partitions {
				t.Partitions = append(t.Partitions, TopicPartition{tt.Topic, p})
			}
		}
		out = append(out, t)
	}
	return out
}

// AddTxnResult is the answer for one transaction of an AddPartitionsToTxn.
type AddTxnResult struct {
	TxnID      string
	Partitions []PartitionResult
}

// Uniform returns results giving every partition of t the same code (the
// one answer of [Coordinator.AddPartitions]).
func Uniform(t AddTxn, code int16) AddTxnResult {
	r := AddTxnResult{TxnID: t.TxnID, Partitions: make([]PartitionResult, len(t.Partitions))}
	for i, tp := range t.Partitions {
		r.Partitions[i] = PartitionResult{tp, code}
	}
	return r
}

// AddPartitionsResponse builds the AddPartitionsToTxn response of version
// for results: v0–3 the partitions of the one transaction, v4+ one entry
// per transaction (top-level ErrorCode left 0). Partitions of a topic are
// grouped under it in first-seen order.
func AddPartitionsResponse(version int16, results []AddTxnResult) *kmsg.AddPartitionsToTxnResponse {
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	resp.Version = version
	if version < 4 {
		for _, r := range results {
			for _, pr := range r.Partitions {
				i := topicIndex(len(resp.Topics), func(i int) string { return resp.Topics[i].Topic }, pr.Partition.Topic)
				if i < 0 {
					t := kmsg.NewAddPartitionsToTxnResponseTopic()
					t.Topic = pr.Partition.Topic
					resp.Topics = append(resp.Topics, t)
					i = len(resp.Topics) - 1
				}
				p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				p.Partition, p.ErrorCode = pr.Partition.Partition, pr.Err
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
			}
		}
		return resp
	}
	for _, r := range results {
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = r.TxnID
		for _, pr := range r.Partitions {
			i := topicIndex(len(rt.Topics), func(i int) string { return rt.Topics[i].Topic }, pr.Partition.Topic)
			if i < 0 {
				t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				t.Topic = pr.Partition.Topic
				rt.Topics = append(rt.Topics, t)
				i = len(rt.Topics) - 1
			}
			p := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			p.Partition, p.ErrorCode = pr.Partition.Partition, pr.Err
			rt.Topics[i].Partitions = append(rt.Topics[i].Partitions, p)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp
}

func topicIndex(n int, name func(int) string, topic string) int {
	for i := 0; i < n; i++ {
		if name(i) == topic {
			return i
		}
	}
	return -1
}
