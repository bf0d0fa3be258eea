package broker

// ListTransactions (key 66, KIP-664), versions 0–1.
//
// Behaviour: the transactional ids this broker coordinates, filtered by
// state names, producer ids and (v1, KIP-994) the minimum time since the
// transaction started; COORDINATOR_LOAD_IN_PROGRESS while one of its
// __transaction_state partitions loads; unknown state names are echoed in
// UnknownStateFilters.
//
// Differences from Kafka: v2 (the transactional id pattern filter) is not
// served; no ACLs.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/txncoord"
)

func init() { registerMax(66, 0, 1, handleListTransactions) }

func handleListTransactions(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ListTransactionsRequest)
	f := txncoord.ListFilter{States: req.StateFilters, ProducerIDs: req.ProducerIDFilters, DurationMs: -1}
	if r.version >= 1 {
		f.DurationMs = req.DurationFilterMillis
	}
	var resp *kmsg.ListTransactionsResponse
	n.txns.locked(func(c *txncoord.Coordinator) { resp = c.List(nowMs(), f) })
	// Kafka's check (authorize.go): only the transactional ids the
	// principal may DESCRIBE are listed.
	if az := n.authorizer(); az != nil {
		kept := resp.TransactionStates[:0]
		for _, t := range resp.TransactionStates {
			if r.allowed(az, authz.OpDescribe, authz.ResTransactionalID, t.TransactionalID) {
				kept = append(kept, t)
			}
		}
		resp.TransactionStates = kept
	}
	return encodeResponse(r, resp), nil
}
