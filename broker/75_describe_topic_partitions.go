package broker

// DescribeTopicPartitions (key 75), version 0 (KIP-966's way to read a
// partition's ISR and eligible leader replicas; the Kafka 4 CLI's
// kafka-topics --describe uses it).
//
// Behaviour, as Kafka's DescribeTopicPartitionsRequestHandler and
// KRaftMetadataCache.describeTopicResponse: Topics empty means every topic,
// else the named ones (duplicates once); either way in name order, only
// names at or after the cursor's topic. The response holds at most
// max(min(max.request.partition.size.limit, ResponsePartitionLimit), 1)
// partitions; when more remain, NextCursor names the topic and partition
// to ask from next (a topic cut short, or the next topic at partition 0).
// The cursor's partition is where its topic starts; other topics start
// at 0. A cursor whose topic is not among the named topics, or whose
// partition is negative, is INVALID_REQUEST for every named topic (Kafka's
// error response). A named topic that does not exist answers
// UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name)
// with a zero topic id; with Topics empty, only existing topics are
// listed. Per partition: leader (-1 when there is none or it is not
// registered, with no error, as Kafka), leader epoch, replicas and ISR as
// the image has them, EligibleLeaderReplicas and LastKnownElr (KIP-966),
// OfflineReplicas as Metadata reports them (03_metadata.go).
// TopicAuthorizedOperations is every operation on a TOPIC (there are no
// ACLs, as Kafka without an authorizer answers).
//
// Differences from Kafka: none known.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(75, 0, handleDescribeTopicPartitions) }

// topicOperations are the ACL operations of the TOPIC resource (READ 3,
// WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10,
// ALTER_CONFIGS 11) as a bit field.
const topicOperations = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11

func handleDescribeTopicPartitions(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeTopicPartitionsRequest)
	rs := n.replicaStatus()
	az := n.authorizer()
	var resp *kmsg.DescribeTopicPartitionsResponse
	n.view(func(st *metadata.State) {
		rs.st = st
		resp = describeTopicPartitions(rs, req, n.cfg.MaxRequestPartitions, func(name string) bool {
			return r.allowed(az, authz.OpDescribe, authz.ResTopic, name) // authorize.go
		})
	})
	return encodeResponse(r, resp), nil
}

// describeTopicPartitions answers req from rs's image; maxPartitions is
// max.request.partition.size.limit; mayDescribe is the principal's
// DESCRIBE right on a topic: a listing leaves the others out, a named one
// answers TOPIC_AUTHORIZATION_FAILED (Kafka's checks).
func describeTopicPartitions(rs *replicaStatus, req *kmsg.DescribeTopicPartitionsRequest, maxPartitions int32, mayDescribe func(string) bool) *kmsg.DescribeTopicPartitionsResponse {
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	all := len(req.Topics) == 0
	cursorTopic := ""
	if req.Cursor != nil {
		cursorTopic = req.Cursor.Topic
	}
	var names []string
	if all {
		for _, t := range rs.st.Topics() {
			if t.Name >= cursorTopic && mayDescribe(t.Name) {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic >= cursorTopic {
				names = append(names, t.Topic)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if c := req.Cursor; c != nil && ((!all && !slices.Contains(names, c.Topic)) || c.Partition < 0) {
		// Kafka throws InvalidRequestException: its error response names
		// every requested topic.
		for _, t := range req.Topics {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic = kmsg.StringPtr(t.Topic)
			rt.ErrorCode = kerr.InvalidRequest.Code
			rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
			rt.AuthorizedOperations = authorizedOpsUnknown
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}

	remaining := max(min(maxPartitions, req.ResponsePartitionLimit), 1)
	for _, name := range names {
		if remaining == 0 {
			// Every partition of the topics before is in: resume at this
			// topic's start (it may not exist by then).
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			break
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		rt.IsInternal = name == offsetsTopic || name == txnStateTopic || name == shareStateTopic
		rt.AuthorizedOperations = topicOperations
		rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		if !mayDescribe(name) {
			rt.ErrorCode, rt.IsInternal = kerr.TopicAuthorizationFailed.Code, false
			rt.AuthorizedOperations = authorizedOpsUnknown
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		t, ok := rs.st.TopicByName(name)
		if !ok {
			if all {
				continue // deleted meanwhile: the listing leaves it out
			}
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if !legalTopicName(name) {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID = t.ID
		parts := rs.st.Partitions(t.ID)
		start := int32(0)
		if name == cursorTopic && req.Cursor != nil {
			start = req.Cursor.Partition
		}
		upper := min(int32(len(parts)), start+remaining)
		for i := start; i < upper; i++ {
			p, ok := rs.st.Partition(t.ID, i)
			if !ok {
				continue
			}
			rt.Partitions = append(rt.Partitions, describePartition(rs, name, p))
		}
		resp.Topics = append(resp.Topics, rt)
		if upper < int32(len(parts)) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: upper}
			break
		}
		remaining -= int32(len(rt.Partitions))
	}
	return resp
}

func describePartition(rs *replicaStatus, topic string, p metadata.PartitionInfo) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	dp.Partition = p.Partition
	dp.LeaderID = rs.leader(p)
	dp.LeaderEpoch = p.LeaderEpoch
	dp.Replicas = append([]int32{}, p.Replicas...)
	dp.ISR = append([]int32{}, p.ISR...)
	dp.EligibleLeaderReplicas = append([]int32{}, p.ELR...)
	dp.LastKnownELR = append([]int32{}, p.LastKnownELR...)
	dp.OfflineReplicas = rs.offline(topic, p)
	return dp
}
