package broker

// DescribeProducers (key 61), version 0 (KIP-664): the active producers of
// partitions this broker leads, as Kafka's ReplicaManager.activeProducerState
// lists them, for finding hanging transactions (`kafka-transactions.sh
// find-hanging`). Each producer the partition's idempotence table or its
// transaction table (storage.Log.TxnProducers) knows is listed with its
// epoch, last sequence (-1: none), last timestamp, the coordinator epoch of
// its last marker (-1: none) and the first offset of its open transaction
// (-1: none); the transaction table is the truth for the last two.
//
// Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER.
//
// With an authorizer it needs READ on the topic (TOPIC_AUTHORIZATION_FAILED), as Kafka.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/storage/producer"
)

func init() { register(61, 0, handleDescribeProducers) }

func handleDescribeProducers(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeProducersRequest)
	resp := kmsg.NewPtrDescribeProducersResponse()
	az := n.authorizer() // authorize.go: READ on the topic
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		_, exists, topicErr := n.resolveTopic(false, t.Topic, [16]byte{})
		if !r.allowed(az, authz.OpRead, authz.ResTopic, t.Topic) {
			topicErr = kerr.TopicAuthorizationFailed
		}
		for _, idx := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = idx
			err := topicErr
			if err == nil {
				rp.ActiveProducers, err = n.activeProducers(t.Topic, exists, idx)
			}
			if err != nil {
				rp.ErrorCode = errCode(err)
				rp.ErrorMessage = kmsg.StringPtr(err.Error())
				r.metrics().partitionError("DescribeProducers", rp.ErrorCode)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}

// activeProducers lists the producers of a partition this broker leads,
// by ascending producer id.
func (n *Node) activeProducers(topic string, exists bool, index int32) ([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, error) {
	p := n.partition(topic, index)
	if p == nil {
		return nil, n.missingPartitionErr(topic, exists, index)
	}
	if err := p.checkLeader(-1); err != nil {
		return nil, err
	}
	byID := map[int64]*kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
	var ids []int64
	get := func(id int64) *kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
		if ap := byID[id]; ap != nil {
			return ap
		}
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.CoordinatorEpoch = id, -1
		byID[id] = &ap
		ids = append(ids, id)
		return &ap
	}
	if c := p.prod; c != nil {
		c.mu.Lock()
		if c.st != nil {
			for _, id := range c.st.IDs() {
				e, _ := c.st.Entry(id)
				ap := get(id)
				ap.ProducerEpoch = int32(e.Epoch)
				ap.LastTimestamp = e.LastTimestamp
				ap.CoordinatorEpoch = e.CoordinatorEpoch
				ap.CurrentTxnStartOffset = e.TxnFirstOffset
				if len(e.Batches) > 0 {
					ap.LastSequence = e.Batches[len(e.Batches)-1].LastSeq
				}
			}
		}
		c.mu.Unlock()
	}
	for _, tp := range p.log.TxnProducers() {
		ap := get(tp.ID)
		mergeTxnProducer(ap, tp)
	}
	slices.Sort(ids)
	out := make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, 0, len(ids))
	for _, id := range ids {
		out = append(out, *byID[id])
	}
	return out, nil
}

// mergeTxnProducer fills ap's transactional fields from the log's
// transaction table, which decides the LSO: its open transaction's first
// offset and its last marker's coordinator epoch; the newer epoch and
// timestamp of the two tables.
func mergeTxnProducer(ap *kmsg.DescribeProducersResponseTopicPartitionActiveProducer, tp producer.TxnProducer) {
	ap.CurrentTxnStartOffset = tp.FirstOffset
	if tp.CoordinatorEpoch >= 0 {
		ap.CoordinatorEpoch = tp.CoordinatorEpoch
	}
	ap.ProducerEpoch = max(ap.ProducerEpoch, int32(tp.Epoch))
	ap.LastTimestamp = max(ap.LastTimestamp, tp.LastTimestamp)
}
