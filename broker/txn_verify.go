package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
)

// verifyTxnPartitions asks the coordinator of txnID whether each
// partition of tps is in producerID's ongoing transaction (KIP-890 part
// 1) and returns Kafka's code per partition. Owned by the coordinator
// work of issue 16; until it lands nothing calls it, and it answers
// INVALID_TXN_STATE for every partition.
func (n *Node) verifyTxnPartitions(ctx context.Context, txnID string, producerID int64, epoch int16, tps map[string][]int32) map[string]map[int32]int16 {
	out := map[string]map[int32]int16{}
	for t, ps := range tps {
		out[t] = map[int32]int16{}
		for _, p := range ps {
			out[t][p] = kerr.InvalidTxnState.Code
		}
	}
	return out
}
