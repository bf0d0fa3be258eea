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
	return encodeResponse(r, resp), nil
}
