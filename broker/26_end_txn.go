package broker

// EndTxn (key 26), versions 0–4.
//
// Behaviour: commits or aborts the ongoing transaction: the transaction
// coordinator (txn_coordinator.go, broker/txncoord) writes PrepareCommit
// or PrepareAbort, answers once it is durable, then sends the markers to
// the partitions' leaders and writes CompleteCommit/CompleteAbort when
// they are all written.
//
// Differences from Kafka: v5 (transaction version 2, KIP-890 part 2: the
// epoch bump per transaction) is not served, and no transaction.version
// feature is finalized, so clients take the version 1 path.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/txncoord"
)

func init() { registerMax(26, 0, 4, handleEndTxn) }

func handleEndTxn(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.EndTxnRequest)
	a := n.txns.do(ctx, func(id txncoord.ReqID) txncoord.Effects {
		return n.txns.c.EndTxn(nowMs(), txncoord.EndRequest{Req: id, Version: r.version, TxnID: req.TransactionalID,
			ProducerID: req.ProducerID, Epoch: req.ProducerEpoch, Commit: req.Commit})
	})
	resp := kmsg.NewPtrEndTxnResponse()
	resp.ErrorCode = a.Err
	return encodeResponse(r, resp), nil
}
