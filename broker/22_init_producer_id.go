package broker

// InitProducerId (key 22), versions 0 through kmsg's newest (5).
//
// Behaviour: a non-transactional request gets a new producer id (node id
// in the high 32 bits, a per-node counter persisted in blocks below, see
// producer_ids.go) with epoch 0. From v3 a producer that names its current
// id and epoch (KIP-360, after an error) keeps its id with the epoch
// bumped, or gets a new id once the epoch would overflow.
//
// The ids feed the idempotent producer: each partition keeps the
// sequences of every producer id's last five batches (idempotence.go), so
// a retried batch is acknowledged at its first offsets instead of being
// written twice, and an older epoch is refused (INVALID_PRODUCER_EPOCH).
//
// Differences from Kafka: ids come from the node, not from controller
// blocks (AllocateProducerIds); Kafka answers a non-transactional request
// that names its id and epoch with a brand-new id, Strata bumps the epoch
// of the same id (either way the producer restarts its sequences at 0).
// A request with a transactional id goes to the transaction coordinator
// (txn_coordinator.go, broker/txncoord): its producer id and epoch, with
// fencing of older instances and KIP-360 resumes.

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/txncoord"
)

func init() { register(22, 0, handleInitProducerID) }

func handleInitProducerID(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.InitProducerIDRequest)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil:
		pid, epoch := req.ProducerID, req.ProducerEpoch
		if r.version < 3 {
			pid, epoch = -1, -1
		}
		a := n.txns.do(ctx, func(id txncoord.ReqID) txncoord.Effects {
			return n.txns.c.InitProducerID(nowMs(), txncoord.InitRequest{Req: id, Version: r.version,
				TxnID: *req.TransactionalID, TimeoutMs: req.TransactionTimeoutMillis, ProducerID: pid, Epoch: epoch})
		})
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = a.Err, a.ProducerID, a.Epoch
	case r.version >= 3 && req.ProducerID >= 0 && req.ProducerEpoch >= 0 && req.ProducerEpoch < math.MaxInt16-1:
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
	default:
		id, err := n.pids.allocate()
		if err != nil {
			n.logger.Error("broker: allocate producer id", "err", err)
			resp.ErrorCode = kerr.KafkaStorageError.Code
			break
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	}
	return encodeResponse(r, resp), nil
}
