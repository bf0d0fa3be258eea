package broker

// ConsumerGroupHeartbeat (key 68), versions 0-1 (KIP-848).
//
// Behaviour: the consumer group protocol's one request: join (member
// epoch 0), heartbeat, leave (-1) and static leave (-2). The group's
// __consumer_offsets partition must be led and loaded here
// (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
// COORDINATOR_NOT_AVAILABLE, as the classic path); READ on the group
// (GROUP_AUTHORIZATION_FAILED, authorize_request.go) and DESCRIBE on each
// subscribed topic name (TOPIC_AUTHORIZATION_FAILED), as Kafka. The core
// (broker/group/consumer, Group.Heartbeat) decides; its records are
// appended to the partition before the answer (consumer_groups.go). Only
// advertised when group.coordinator.rebalance.protocols lists consumer;
// otherwise the request is answered UNSUPPORTED_VERSION.
//
// A join of a classic group with members upgrades it online when
// group.consumer.migration.policy allows (consumer_migration.go), else
// GROUP_ID_NOT_FOUND; a leave or fencing that leaves only classic members
// may downgrade it.
//
// Differences from Kafka: regular expressions are Go RE2, resolved at each
// heartbeat.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group/consumer"
)

const (
	consumerGroupHeartbeatKey = 68
	consumerGroupDescribeKey  = 69
)

func init() { registerMax(consumerGroupHeartbeatKey, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ConsumerGroupHeartbeatRequest)
	if !n.cfg.GroupConsumerProtocol {
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return encodeResponse(r, resp), nil
	}
	az := n.authorizer()
	for _, t := range req.SubscribedTopicNames {
		if !r.allowed(az, authz.OpDescribe, authz.ResTopic, t) {
			resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
			resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			return encodeResponse(r, resp), nil
		}
	}
	resp := n.groups.cgs.heartbeat(ctx, req, consumer.Client{ID: r.clientID, Host: clientHost(r)})
	return encodeResponse(r, resp), nil
}
