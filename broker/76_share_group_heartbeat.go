package broker

// ShareGroupHeartbeat (key 76), versions 1 (KIP-932; v0 was Kafka 4.0's
// early-access version, which franz-go does not send: it asks for v1).
//
// Behaviour: the share group protocol's membership request: join (member
// epoch 0, a client-generated member id), heartbeat, leave (-1). The
// group's __consumer_offsets partition must be led and loaded here
// (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
// COORDINATOR_NOT_AVAILABLE); READ on the group
// (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on each subscribed topic
// (TOPIC_AUTHORIZATION_FAILED), as Kafka. The core
// (broker/group/sharegroup, Group.Heartbeat) decides; its records
// (types 10-15) are appended to the partition before the answer
// (share_groups.go). A group id of a classic or consumer group is
// GROUP_ID_NOT_FOUND ("Group %s is not a share group."), an unknown one
// at a non-zero epoch GROUP_ID_NOT_FOUND ("Share group %s not found."),
// as Kafka's getOrMaybeCreatePersistedShareGroup. Only advertised when
// share groups are on (group.coordinator.rebalance.protocols lists share,
// or group.share.enable=true); otherwise UNSUPPORTED_VERSION.
//
// Differences from Kafka: see broker/group/sharegroup/DESIGN.md (the
// share state of newly assigned partitions is initialized by the
// share-partition leader on first fetch, not by the coordinator).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group/sharegroup"
)

const (
	shareGroupHeartbeatKey = 76
	shareGroupDescribeKey  = 77
)

func init() { registerMax(shareGroupHeartbeatKey, 1, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ShareGroupHeartbeatRequest)
	fail := func(e *kerr.Error) (*frame, error) {
		resp := kmsg.NewPtrShareGroupHeartbeatResponse()
		resp.ErrorCode = e.Code
		return encodeResponse(r, resp), nil
	}
	if !n.shareGroupsOn() {
		return fail(kerr.UnsupportedVersion)
	}
	az := n.authorizer()
	if !r.allowed(az, authz.OpRead, authz.ResGroup, req.GroupID) {
		return fail(kerr.GroupAuthorizationFailed)
	}
	for _, t := range req.SubscribedTopicNames {
		if !r.allowed(az, authz.OpDescribe, authz.ResTopic, t) {
			return fail(kerr.TopicAuthorizationFailed)
		}
	}
	resp := n.groups.sgs.heartbeat(ctx, req, sharegroup.Client{ID: r.clientID, Host: clientHost(r)})
	return encodeResponse(r, resp), nil
}
