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

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/txncoord"
)

func init() { register(65, 0, handleDescribeTransactions) }

func handleDescribeTransactions(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeTransactionsRequest)
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	// Kafka's check (authorize.go): DESCRIBE on each transactional id; a
	// refused one answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
	az := n.authorizer()
	var ids []string
	for _, id := range req.TransactionalIDs {
		if r.allowed(az, authz.OpDescribe, authz.ResTransactionalID, id) {
			ids = append(ids, id)
		}
	}
	var described []kmsg.DescribeTransactionsResponseTransactionState
	n.txns.locked(func(c *txncoord.Coordinator) {
		described = c.Describe(ids)
	})
	byID := map[string]kmsg.DescribeTransactionsResponseTransactionState{}
	for _, d := range described {
		byID[d.TransactionalID] = d
	}
	for _, id := range req.TransactionalIDs {
		d, ok := byID[id]
		if !ok {
			d = kmsg.NewDescribeTransactionsResponseTransactionState()
			d.TransactionalID, d.ErrorCode = id, kerr.TransactionalIDAuthorizationFailed.Code
		}
		resp.TransactionStates = append(resp.TransactionStates, d)
	}
	return encodeResponse(r, resp), nil
}
