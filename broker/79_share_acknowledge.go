package broker

// ShareAcknowledge (key 79), versions 1 and 2 (v2: IsRenewAck and the
// renew type, KIP-1222; v0 was Kafka 4.0's early access). Advertised only
// when share groups are on (group.coordinator.rebalance.protocols lists
// share); otherwise answered UNSUPPORTED_VERSION.
//
// Behaviour: the same group and member checks as ShareFetch; the share
// session must exist (SHARE_SESSION_NOT_FOUND) and the epoch be its
// (INVALID_SHARE_SESSION_EPOCH; epoch 0 is always refused: only a
// ShareFetch opens a session), and moves on; epoch -1 applies the
// acknowledgements, closes the session and releases what the member
// still holds in its partitions. Each partition's acknowledgements are
// applied all or nothing (INVALID_REQUEST malformed, INVALID_RECORD_STATE
// for records the member does not hold) and written to the share
// coordinator before the response: a partition answered without error is
// durable. A renew type (4) without IsRenewAck is INVALID_REQUEST.
//
// Errors per partition: as ShareFetch's (UNKNOWN_TOPIC_ID,
// NOT_LEADER_OR_FOLLOWER with CurrentLeader and NodeEndpoints,
// TOPIC_AUTHORIZATION_FAILED, the share coordinator's).
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { registerMax(shareAcknowledgeKey, 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ShareAcknowledgeRequest)
	resp := kmsg.NewPtrShareAcknowledgeResponse()
	group, member := strOr(req.GroupID), strOr(req.MemberID)
	resp.AcquisitionLockTimeoutMillis = int32(n.shareGroupConfig(group).RecordLockDurationMs)
	if code := n.shareRequestCheck(group, member); code != 0 {
		resp.ErrorCode = code
		return encodeResponse(r, resp), nil
	}
	renew := r.version >= 2 && req.IsRenewAck
	var acks []shareAckPart
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			b, err := share.AcksFromShareAcknowledge(p.AcknowledgementBatches, renew)
			acks = append(acks, shareAckPart{tp: shareTP{uuid.UUID(t.TopicID), p.Partition}, batches: b, err: err})
		}
	}
	key := shareSessionKey{group, member}
	var closed *shareSession
	switch req.ShareSessionEpoch {
	case 0:
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return encodeResponse(r, resp), nil
	case -1:
		s, err := n.shareSessions.close(key)
		if err != nil {
			resp.ErrorCode = errCode(err)
			return encodeResponse(r, resp), nil
		}
		s.end()
		closed = s
	default:
		if _, _, err := n.shareSessions.advance(key, req.ShareSessionEpoch, nil, nil); err != nil {
			resp.ErrorCode = errCode(err)
			return encodeResponse(r, resp), nil
		}
	}
	res := n.shareAcknowledge(ctx, r, group, member, acks)
	if closed != nil {
		n.shareLeader.releaseMember(ctx, group, member, closed.parts)
	}

	topicIdx := map[uuid.UUID]int{}
	leaders := map[int32]bool{}
	for _, a := range acks {
		i, ok := topicIdx[a.tp.topicID]
		if !ok {
			i = len(resp.Topics)
			topicIdx[a.tp.topicID] = i
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = a.tp.topicID
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		rp.Partition = a.tp.partition
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		if x := res[a.tp]; x.err != nil {
			rp.ErrorCode = errCode(x.err)
			r.metrics().partitionError("ShareAcknowledge", rp.ErrorCode)
			if x.hasLeader {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = x.leaderID, x.leaderEp
				leaders[x.leaderID] = true
			}
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	if len(leaders) > 0 {
		n.view(func(st *metadata.State) {
			for id := range leaders {
				b, ok := st.Broker(id)
				if !ok {
					continue
				}
				listener := ""
				if r.conn != nil {
					listener = r.conn.listener
				}
				if l, ok := pickListener(b.Listeners, listener); ok {
					ep := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
					ep.NodeID, ep.Host, ep.Port = id, l.Host, int32(l.Port)
					if b.Rack != "" {
						rack := b.Rack
						ep.Rack = &rack
					}
					resp.NodeEndpoints = append(resp.NodeEndpoints, ep)
				}
			}
		})
	}
	return encodeResponse(r, resp), nil
}
