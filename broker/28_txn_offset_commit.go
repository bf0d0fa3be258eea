package broker

// TxnOffsetCommit (key 28), versions 0 through 4 (v5+ is KIP-890 part 2,
// transaction version 2, not built: clients take the part-1 path).
//
// Behaviour, in Kafka's order (KafkaApis.handleTxnOffsetCommitRequest,
// GroupCoordinator.handleTxnCommitOffsets): partitions the metadata lacks
// answer UNKNOWN_TOPIC_OR_PARTITION and are left out; for the rest, an
// empty group id is INVALID_GROUP_ID, and the group's __consumer_offsets
// partition must be led and loaded here (NOT_COORDINATOR /
// COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE). Then KIP-890
// part 1: the transaction coordinator of the transactional id must have
// that __consumer_offsets partition in the producer's ongoing transaction
// (AddOffsetsToTxn put it there), else its answer, INVALID_TXN_STATE
// (TRANSACTION_ABORTABLE is turned into INVALID_TXN_STATE: v0-v4 clients
// do not know it), INVALID_PRODUCER_EPOCH for a fenced producer, and a
// coordinator that cannot be reached is COORDINATOR_LOAD_IN_PROGRESS (a
// retriable error every client retries without a coordinator lookup,
// Kafka's maybeConvertOffsetCommitError). Then the membership (v3+ carries
// generation, member id and instance id: ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; v0-v2 and generation -1 without
// a member are accepted in any group state; no REBALANCE_IN_PROGRESS for
// transactional commits). OFFSET_METADATA_TOO_LARGE per partition over
// offset.metadata.max.bytes. The valid offsets are written as one
// transactional batch of the producer (group.Store.CommitTxn) through the
// leader append, answered once replicated, and held PENDING for the
// producer: OffsetFetch does not show them (with RequireStable it answers
// UNSTABLE_OFFSET_COMMIT) until the producer's COMMIT marker on the
// partition makes them the committed offsets (completeGroupTxn), or its
// ABORT drops them.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/broker/txncoord"
)

// txnOffsetCommitMaxVersion is the newest TxnOffsetCommit served: v5 is
// transaction version 2 (implicit add of the offsets partition).
const txnOffsetCommitMaxVersion = 4

func init() {
	register(28, 0, handleTxnOffsetCommit)
	apis[28].max = txnOffsetCommitMaxVersion
}

func handleTxnOffsetCommit(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.TxnOffsetCommitRequest)
	resp := kmsg.NewPtrTxnOffsetCommitResponse()

	type slot struct{ t, p int }
	var valid []slot // partitions of known topics
	// Kafka's checks (authorize.go): WRITE on the transactional id, READ
	// on the group (each refusing every partition), READ on each topic.
	az := n.authorizer()
	var refuseAll int16
	switch {
	case !r.allowed(az, authz.OpWrite, authz.ResTransactionalID, req.TransactionalID):
		refuseAll = kerr.TransactionalIDAuthorizationFailed.Code
	case !r.allowed(az, authz.OpRead, authz.ResGroup, req.Group):
		refuseAll = kerr.GroupAuthorizationFailed.Code
	}
	for ti, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		topicOK := r.allowed(az, authz.OpRead, authz.ResTopic, t.Topic)
		for _, tp := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = tp.Partition
			if refuseAll != 0 {
				rp.ErrorCode = refuseAll
			} else if !topicOK {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if n.partitionExists(t.Topic, tp.Partition) {
				valid = append(valid, slot{ti, len(rt.Partitions)})
			} else {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(valid) == 0 {
		return encodeResponse(r, resp), nil
	}
	setAll := func(code int16) {
		for _, s := range valid {
			resp.Topics[s.t].Partitions[s.p].ErrorCode = code
		}
	}

	code := n.txnOffsetCommitCheck(ctx, req, r.version)
	if code != 0 {
		setAll(code)
		return encodeResponse(r, resp), nil
	}
	partition, _ := n.groups.partitionOf(req.Group)
	now := time.Now().UnixMilli()
	var commits []group.Commit
	var slots []slot
	for _, s := range valid {
		t := req.Topics[s.t]
		tp := t.Partitions[s.p]
		if tp.Metadata != nil && len(*tp.Metadata) > n.cfg.OffsetMetadataMaxBytes {
			resp.Topics[s.t].Partitions[s.p].ErrorCode = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		md := ""
		if tp.Metadata != nil {
			md = *tp.Metadata
		}
		epoch := int32(-1)
		if r.version >= 2 {
			epoch = tp.LeaderEpoch
		}
		commits = append(commits, group.Commit{
			TopicPartition: group.TopicPartition{Topic: t.Topic, Partition: tp.Partition},
			Offset:         group.Offset{Offset: tp.Offset, LeaderEpoch: epoch, Metadata: md, CommitTimestamp: now, ExpireTimestamp: -1},
		})
		slots = append(slots, s)
	}
	if len(commits) > 0 {
		// Not counted in the offset commit metrics: these offsets are
		// not committed until their marker.
		if err := n.groups.store.CommitTxn(ctx, partition, req.Group, req.ProducerID, req.ProducerEpoch, commits); err != nil {
			code := txnCommitErrCode(err)
			for _, s := range slots {
				resp.Topics[s.t].Partitions[s.p].ErrorCode = code
			}
		}
	}
	return encodeResponse(r, resp), nil
}

// txnOffsetCommitCheck returns the code every partition of a
// TxnOffsetCommit gets before anything is written, or 0: the group and
// coordinator checks, the transaction verification, the membership.
func (n *Node) txnOffsetCommitCheck(ctx context.Context, req *kmsg.TxnOffsetCommitRequest, version int16) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	partition, err := n.groups.partitionOf(req.Group)
	if err != nil {
		return errCode(err)
	}
	tps := map[string][]int32{offsetsTopic: {partition}}
	var codes map[string]map[int32]int16
	if h := n.groups.verifyHook.Load(); h != nil {
		codes = (*h)(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps)
	} else {
		codes = n.verifyTxnPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps)
	}
	code, ok := codes[offsetsTopic][partition]
	if !ok {
		code = kerr.UnknownServerError.Code
	}
	if code = txnVerifyErrCode(txncoord.LeaderVerifyCode(code, version > txnOffsetCommitMaxVersion)); code != 0 {
		return code
	}
	gen, member, instance := int32(-1), "", (*string)(nil)
	if version >= 3 {
		gen, member, instance = req.Generation, req.MemberID, req.InstanceID
	}
	if n.groupIsShare(req.Group) {
		return kerr.GroupIDNotFound.Code // a share group commits no offsets (Kafka's ShareGroup.validateOffsetCommit)
	}
	if handled, err := n.groups.cgs.validateCommit(req.Group, member, gen, true, version); handled {
		return errCode(err) // a KIP-848 group: the member epoch
	}
	return errCode(n.groups.members.ValidateTxnCommit(req.Group, gen, member, instance))
}

// txnVerifyErrCode maps the KIP-890 verification's answer for the
// offsets partition, after txncoord.LeaderVerifyCode (PRODUCER_FENCED →
// INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE → INVALID_TXN_STATE for
// v0-v4), to what TxnOffsetCommit answers (Kafka's
// maybeConvertOffsetCommitError): a transaction coordinator that could not
// be asked or is not ready is COORDINATOR_LOAD_IN_PROGRESS, which clients
// retry in place (NOT_COORDINATOR would send them looking for another
// group coordinator).
func txnVerifyErrCode(code int16) int16 {
	switch code {
	case 0:
		return 0
	case kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.NotCoordinator.Code, kerr.RequestTimedOut.Code:
		// The transaction coordinator was not reachable or not ready: a
		// retriable error the group coordinator's clients retry in place.
		return kerr.CoordinatorLoadInProgress.Code
	case kerr.TransactionAbortable.Code:
		return kerr.InvalidTxnState.Code
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	default:
		return code
	}
}

// txnCommitErrCode maps a failed append of a transactional offset commit:
// as OffsetCommit's (commitErrCode), except that the log's fencing of an
// older producer epoch is answered as such.
func txnCommitErrCode(err error) int16 {
	switch code := errCode(err); code {
	case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	default:
		return commitErrCode(err)
	}
}
