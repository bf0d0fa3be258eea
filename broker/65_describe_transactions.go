package broker

// DescribeTransactions (key 65, KIP-664), version 0.
//
// Behaviour: per transactional id, its producer id and epoch, state,
// timeout, start time and partitions, from the transaction coordinator of
// this broker (the client sends each id to its coordinator);
// NOT_COORDINATOR for ids whose __transaction_state partition is not led
// here, COORDINATOR_LOAD_IN_PROGRESS while it loads,
// TRANSACTIONAL_ID_NOT_FOUND for unknown ids.
//
// Differences from Kafka: no ACLs.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/txncoord"
)

func init() { register(65, 0, handleDescribeTransactions) }

func handleDescribeTransactions(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeTransactionsRequest)
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	n.txns.locked(func(c *txncoord.Coordinator) {
		resp.TransactionStates = c.Describe(req.TransactionalIDs)
	})
	return encodeResponse(r, resp), nil
}
