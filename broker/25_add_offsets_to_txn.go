package broker

// AddOffsetsToTxn (key 25), versions 0 through kmsg's newest (4).
//
// Behaviour: adds the group's __consumer_offsets partition
// (PartitionFor(group, offsets.topic.num.partitions)) to the transaction,
// so the producer's TxnOffsetCommits get its marker; the transaction
// coordinator (txn_coordinator.go, broker/txncoord) decides and answers.
//
// Differences from Kafka: no ACLs (no GROUP_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/txncoord"
)

func init() { register(25, 0, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.AddOffsetsToTxnRequest)
	a := n.txns.do(ctx, func(id txncoord.ReqID) txncoord.Effects {
		return n.txns.c.AddOffsets(nowMs(), txncoord.AddOffsetsRequest{Req: id, Version: r.version,
			TxnID: req.TransactionalID, ProducerID: req.ProducerID, Epoch: req.ProducerEpoch, Group: req.Group})
	})
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	resp.ErrorCode = a.Err
	return encodeResponse(r, resp), nil
}
