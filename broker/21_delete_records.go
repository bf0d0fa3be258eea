package broker

// DeleteRecords (key 21), versions 0 through kmsg's newest (2).
//
// Behaviour, per partition, as Kafka's Partition.deleteRecordsOnLeader:
// the requested offset (-1 = the high watermark) becomes the log start
// offset (storage.Log.SetLogStartOffset): records below it are no longer
// readable, segments wholly below it are deleted, ListOffsets earliest
// answers it and a Fetch below it gets OFFSET_OUT_OF_RANGE. An offset at or
// below the current start changes nothing (idempotent). The answer carries
// the low watermark: the log start offset afterwards. The log-start-offset
// checkpoint is written before answering, so a deletion survives a crash,
// not only a clean restart. Fetches parked on the partition are woken, so
// one whose offset fell below the new start answers OFFSET_OUT_OF_RANGE
// at once.
//
// Errors: OFFSET_OUT_OF_RANGE for an offset above the high watermark or
// negative (other than -1), POLICY_VIOLATION when the topic's
// cleanup.policy does not include delete, UNKNOWN_TOPIC_OR_PARTITION,
// NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR; the low watermark is then -1.
//
// Differences from Kafka: on one node the low watermark is the leader's
// log start offset, so the request completes at once (Kafka waits in
// purgatory, up to TimeoutMillis, for every replica's log start offset).

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
)

func init() { register(21, 0, handleDeleteRecords) }

// deleteToHighWatermark is DeleteRecordsRequest.HIGH_WATERMARK.
const deleteToHighWatermark = -1

func handleDeleteRecords(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DeleteRecordsRequest)
	resp := kmsg.NewPtrDeleteRecordsResponse()
	moved := false
	az := n.authorizer() // authorize.go: DELETE on the topic
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		_, exists, topicErr := n.resolveTopic(false, t.Topic, [16]byte{})
		if !r.allowed(az, authz.OpDelete, authz.ResTopic, t.Topic) {
			topicErr = kerr.TopicAuthorizationFailed
		}
		for _, tp := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = tp.Partition, -1
			err := topicErr
			if err == nil {
				var did bool
				did, err = n.deleteRecords(t.Topic, exists, tp, &rp)
				moved = moved || did
			}
			rp.ErrorCode = errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if moved {
		// Make the new start offsets durable before acknowledging.
		if err := n.store.Checkpoint(); err != nil {
			n.logger.Error("broker: checkpoint after DeleteRecords", "err", err)
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					if rp := &resp.Topics[i].Partitions[j]; rp.ErrorCode == 0 {
						rp.ErrorCode, rp.LowWatermark = kerr.KafkaStorageError.Code, -1
					}
				}
			}
		}
	}
	return encodeResponse(r, resp), nil
}

// deleteRecords moves one partition's log start offset; moved reports
// that it went up.
func (n *Node) deleteRecords(topic string, exists bool, tp kmsg.DeleteRecordsRequestTopicPartition, rp *kmsg.DeleteRecordsResponseTopicPartition) (moved bool, err error) {
	p := n.partition(topic, tp.Partition)
	if p == nil {
		return false, n.missingPartitionErr(topic, exists, tp.Partition)
	}
	if err := p.checkLeader(-1); err != nil {
		return false, err
	}
	if !strings.Contains(p.log.Config().CleanupPolicy, "delete") {
		return false, fmt.Errorf("broker: records of %s-%d cannot be deleted: cleanup.policy is %q: %w",
			topic, tp.Partition, p.log.Config().CleanupPolicy, kerr.PolicyViolation)
	}
	hw := p.hw.Load()
	off := tp.Offset
	if off == deleteToHighWatermark {
		off = hw
	}
	if off < 0 || off > hw {
		return false, fmt.Errorf("broker: delete records of %s-%d to %d: not in [0, %d]: %w", topic, tp.Partition, tp.Offset, hw, kerr.OffsetOutOfRange)
	}
	before := p.log.LogStartOffset()
	if err := p.log.SetLogStartOffset(off); err != nil {
		return false, err // storage's errors carry their Kafka codes (OFFSET_OUT_OF_RANGE, KAFKA_STORAGE_ERROR)
	}
	rp.LowWatermark = p.log.LogStartOffset()
	if rp.LowWatermark > before {
		p.wake() // a parked fetch below the new start answers OFFSET_OUT_OF_RANGE now
		return true, nil
	}
	return false, nil
}
