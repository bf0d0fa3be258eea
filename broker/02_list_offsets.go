package broker

// ListOffsets (key 2), versions 1 (the first returning one offset and a
// timestamp) through kmsg's newest (11).
//
// Behaviour, per partition, by the requested timestamp:
//
//	-1 latest          the high watermark; the last stable offset for
//	                   isolation_level read_committed (v2+); the log end
//	                   offset for a replica (ReplicaID != -1)
//	-2 earliest        the log start offset
//	-3 max timestamp   the record with the largest timestamp (v7+, KIP-734)
//	-4 earliest local  the first offset on local disk (v8+, KIP-405)
//	-5 latest tiered   the last offset in the remote tier, -1 when none
//	                   (v9+, KIP-1005)
//	>= 0               the first record whose timestamp is >= it, below the
//	                   high watermark (read_committed: the last stable
//	                   offset); offset and timestamp -1 when none
//
// For a remote-storage topic, -2 is the remote tier's start (the whole
// log's) while -4 is the local disk's; timestamps and -3 look at both
// tiers: remote segments below the local log start are searched through
// their time indexes (tiering.Reader.OffsetForTimestamp), bounded by
// remote.storage.request.timeout.ms.
//
// The answer carries the leader epoch of the returned offset from the
// log's leader-epoch cache (v4+), and checks CurrentLeaderEpoch (KIP-320).
// While a new leader's high watermark is below the start offset of its
// epoch (it has not yet learnt what the previous leader committed), a
// client's request (ReplicaID -1) is answered OFFSET_NOT_AVAILABLE (v5+;
// LEADER_NOT_AVAILABLE before), as Kafka's fetchOffsetForTimestamp.
// Errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
// FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, INVALID_REQUEST (another
// negative timestamp), KAFKA_STORAGE_ERROR.
//
// Differences from Kafka: v0 (several offsets per partition) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
)

func init() { register(2, 1, handleListOffsets) }

// ListOffsets special timestamps.
const (
	listLatest         = -1
	listEarliest       = -2
	listMaxTimestamp   = -3
	listEarliestLocal  = -4
	listLatestTiered   = -5
	listNoEpochOrValue = -1
)

func handleListOffsets(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ListOffsetsRequest)
	resp := kmsg.NewPtrListOffsetsResponse()
	az := n.authorizer() // authorize.go: DESCRIBE on the topic
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		_, exists, topicErr := n.resolveTopic(false, t.Topic, [16]byte{})
		if !r.allowed(az, authz.OpDescribe, authz.ResTopic, t.Topic) {
			topicErr = kerr.TopicAuthorizationFailed
		}
		for _, tp := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = tp.Partition
			rp.Offset, rp.Timestamp, rp.LeaderEpoch = listNoEpochOrValue, listNoEpochOrValue, listNoEpochOrValue
			err := topicErr
			if err == nil {
				epoch := int32(-1)
				if r.version >= 4 {
					epoch = tp.CurrentLeaderEpoch
				}
				readCommitted := r.version >= 2 && req.IsolationLevel == 1
				err = n.listOffset(ctx, t.Topic, exists, tp.Partition, epoch, tp.Timestamp, req.ReplicaID, readCommitted, r.version, &rp)
			}
			rp.ErrorCode = errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}

func (n *Node) listOffset(ctx context.Context, topic string, exists bool, index, clientEpoch int32, ts int64, replicaID int32, readCommitted bool, version int16, rp *kmsg.ListOffsetsResponseTopicPartition) error {
	p := n.partition(topic, index)
	if p == nil {
		return n.missingPartitionErr(topic, exists, index)
	}
	if err := p.checkLeader(clientEpoch); err != nil {
		return err
	}
	hw := p.hw.Load()
	if replicaID < 0 && p.epochStartOffset() > hw {
		if version >= 5 {
			return kerr.OffsetNotAvailable
		}
		return kerr.LeaderNotAvailable
	}
	if readCommitted && replicaID == -1 {
		// Kafka's lastFetchableOffset for READ_COMMITTED.
		hw = min(hw, p.log.LastStableOffset())
	}
	off, rts := int64(-1), int64(-1)
	switch {
	case ts == listLatest:
		off = hw
		if replicaID != -1 {
			off = p.log.LogEndOffset()
		}
		rp.LeaderEpoch = p.leaderEpoch.Load()
		rp.Offset, rp.Timestamp = off, rts
		return nil
	case ts == listEarliest:
		off = p.log.LogStartOffset()
	case ts == listEarliestLocal:
		off = p.log.LocalLogStartOffset()
	case ts == listMaxTimestamp:
		off, rts = p.log.MaxTimestampOffset()
		rctx, cancel := context.WithTimeout(ctx, n.cfg.RemoteStore.RequestTimeout)
		o, t, ok, err := n.tier.maxTimestamp(rctx, p, rts)
		cancel()
		if err != nil {
			return err
		}
		if ok {
			off, rts = o, t
		}
	case ts == listLatestTiered:
		off = n.tier.latestTiered(p)
	case ts >= 0:
		rctx, cancel := context.WithTimeout(ctx, n.cfg.RemoteStore.RequestTimeout)
		o, t, e, ok, err := n.tier.offsetForTimestamp(rctx, p, ts)
		cancel()
		if err != nil {
			return err
		}
		if ok {
			rp.Offset, rp.Timestamp, rp.LeaderEpoch = o, t, e
			return nil
		}
		o, t, ok, err = p.log.OffsetForTimestamp(ts)
		if err != nil {
			return err
		}
		if ok && o < hw {
			off, rts = o, t
		}
	default:
		return kerr.InvalidRequest
	}
	rp.Offset, rp.Timestamp = off, rts
	if off >= 0 {
		rp.LeaderEpoch = p.epochAt(off)
	}
	return nil
}

// epochAt returns the leader epoch that wrote offset, from the log's
// leader-epoch cache (-1 if the cache has no entry at or below it).
func (p *partition) epochAt(offset int64) int32 {
	e := int32(-1)
	for _, ent := range p.log.LeaderEpochs().Entries() {
		if ent.StartOffset > offset {
			break
		}
		e = ent.Epoch
	}
	return e
}
