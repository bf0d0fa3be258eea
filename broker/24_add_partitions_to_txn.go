package broker

// AddPartitionsToTxn (key 24), versions 0 through kmsg's newest (5).
//
// Behaviour: v0–3 (a client's) add the partitions to the one transaction
// named; v4+ (a partition leader's batch, KIP-890) carry several
// transactions, each added or, VerifyOnly, only checked (is each partition
// in the ongoing transaction?) without a change. The transaction
// coordinator (txn_coordinator.go, broker/txncoord) decides and answers
// per transaction; one error covers every partition of an added
// transaction. As in Kafka, a request naming a partition missing from the
// metadata adds nothing: the missing ones get UNKNOWN_TOPIC_OR_PARTITION,
// the others OPERATION_NOT_ATTEMPTED. TRANSACTION_ABORTABLE (a
// verify-only partition not in the transaction) exists from v5; v4 gets
// INVALID_TXN_STATE instead.
//
// With an authorizer (authorize.go), as Kafka: v4+ needs CLUSTER_ACTION
// (else a top-level CLUSTER_AUTHORIZATION_FAILED); v0-3 WRITE on the
// transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere)
// and on each topic (else TOPIC_AUTHORIZATION_FAILED there, the others
// OPERATION_NOT_ATTEMPTED).
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/txncoord"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(24, 0, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.AddPartitionsToTxnRequest)
	// Kafka's checks (authorize.go): v4+ comes from a partition leader
	// and needs CLUSTER_ACTION; v0-3 WRITE on the transactional id and on
	// each topic.
	az := n.authorizer()
	if r.version >= 4 && !r.allowedCluster(az, authz.OpClusterAction) {
		resp := kmsg.NewPtrAddPartitionsToTxnResponse()
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return encodeResponse(r, resp), nil
	}
	txns := txncoord.AddTxns(req)
	results := make([]txncoord.AddTxnResult, len(txns))
	for i, t := range txns {
		if res, refused := n.addTxnRefusal(r, az, t); refused {
			results[i] = res
			continue
		}
		results[i] = n.addTxnPartitions(ctx, r.version, t)
		if r.version < 5 {
			for j, pr := range results[i].Partitions {
				if pr.Err == kerr.TransactionAbortable.Code {
					results[i].Partitions[j].Err = kerr.InvalidTxnState.Code
				}
			}
		}
	}
	return encodeResponse(r, txncoord.AddPartitionsResponse(r.version, results)), nil
}

// addTxnRefusal is a v0-3 transaction's answer when the principal may not
// WRITE its transactional id (every partition) or a topic (those
// TOPIC_AUTHORIZATION_FAILED, missing ones UNKNOWN_TOPIC_OR_PARTITION, the
// rest OPERATION_NOT_ATTEMPTED), as Kafka.
func (n *Node) addTxnRefusal(r *request, az *authz.Authorizer, t txncoord.AddTxn) (txncoord.AddTxnResult, bool) {
	if az == nil || r.version >= 4 {
		return txncoord.AddTxnResult{}, false
	}
	if !r.allowed(az, authz.OpWrite, authz.ResTransactionalID, t.TxnID) {
		return txncoord.Uniform(t, kerr.TransactionalIDAuthorizationFailed.Code), true
	}
	refused := false
	res := txncoord.Uniform(t, kerr.OperationNotAttempted.Code)
	missing := n.missingPartitions(t.Partitions)
	for i, pr := range res.Partitions {
		if !r.allowed(az, authz.OpWrite, authz.ResTopic, pr.Partition.Topic) {
			res.Partitions[i].Err, refused = kerr.TopicAuthorizationFailed.Code, true
		} else if missing[pr.Partition] {
			res.Partitions[i].Err = kerr.UnknownTopicOrPartition.Code
		}
	}
	return res, refused
}

// addTxnPartitions answers one transaction of an AddPartitionsToTxn.
func (n *Node) addTxnPartitions(ctx context.Context, version int16, t txncoord.AddTxn) txncoord.AddTxnResult {
	if missing := n.missingPartitions(t.Partitions); len(missing) > 0 {
		res := txncoord.Uniform(t, kerr.OperationNotAttempted.Code)
		for i, pr := range res.Partitions {
			if missing[pr.Partition] {
				res.Partitions[i].Err = kerr.UnknownTopicOrPartition.Code
			}
		}
		return res
	}
	if t.VerifyOnly {
		var prs []txncoord.PartitionResult
		n.txns.locked(func(c *txncoord.Coordinator) {
			prs = c.Verify(txncoord.VerifyRequest{TxnID: t.TxnID, ProducerID: t.ProducerID, Epoch: t.Epoch, Partitions: t.Partitions})
		})
		return txncoord.AddTxnResult{TxnID: t.TxnID, Partitions: prs}
	}
	a := n.txns.do(ctx, func(id txncoord.ReqID) txncoord.Effects {
		return n.txns.c.AddPartitions(nowMs(), txncoord.AddRequest{Req: id, Version: version, TxnID: t.TxnID,
			ProducerID: t.ProducerID, Epoch: t.Epoch, Partitions: t.Partitions})
	})
	return txncoord.Uniform(t, a.Err)
}

// missingPartitions returns the partitions of tps the metadata view does
// not hold.
func (n *Node) missingPartitions(tps []txncoord.TopicPartition) map[txncoord.TopicPartition]bool {
	var missing map[txncoord.TopicPartition]bool
	n.view(func(st *metadata.State) {
		for _, tp := range tps {
			t, ok := st.TopicByName(tp.Topic)
			if ok {
				_, ok = st.Partition(t.ID, tp.Partition)
			}
			if !ok {
				if missing == nil {
					missing = map[txncoord.TopicPartition]bool{}
				}
				missing[tp] = true
			}
		}
	})
	return missing
}
