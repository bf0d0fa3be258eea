package broker

// ConsumerGroupDescribe (key 69), versions 0-1 (KIP-848).
//
// Behaviour: per group, DESCRIBE on the group (else
// GROUP_AUTHORIZATION_FAILED), the group's partition led and loaded here
// (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
// COORDINATOR_NOT_AVAILABLE), then the core's description
// (consumer.Group.Describe): group epoch, assignment epoch, state, the
// assignor, and per member its epoch, subscription, current and target
// assignment. A group that is not a consumer group here answers
// GROUP_ID_NOT_FOUND ("... is not a consumer group." for a classic one),
// as Kafka. AuthorizedOperations is -2147483648 unless requested, then
// the bits of READ, DELETE and DESCRIBE the principal has on the group.
// Advertised with key 68 only.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group/consumer"
)

func init() { registerMax(consumerGroupDescribeKey, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ConsumerGroupDescribeRequest)
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	az := n.authorizer()
	for _, id := range req.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group = id
		d.AuthorizedOperations = authorizedOpsUnknown
		fail := func(e *kerr.Error, msg string) {
			d.ErrorCode = e.Code
			if msg != "" {
				d.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
		_, perr := n.groups.partitionOf(id)
		switch {
		case !n.cfg.GroupConsumerProtocol:
			fail(kerr.UnsupportedVersion, "")
		case !r.allowed(az, authz.OpDescribe, authz.ResGroup, id):
			fail(kerr.GroupAuthorizationFailed, "")
		case perr != nil:
			fail(kerr.ErrorForCode(errCode(perr)).(*kerr.Error), "")
		default:
			img := n.groups.cgs.image()
			found := n.groups.cgs.with(id, func(g *consumer.Group) { d = g.Describe(img) })
			if !found {
				d.Group = id
				if _, classic := n.groups.members.GroupState(id); classic || n.groupIsShare(id) {
					fail(kerr.GroupIDNotFound, "Group "+id+" is not a consumer group.")
				} else {
					fail(kerr.GroupIDNotFound, "Group "+id+" not found.")
				}
				d.AuthorizedOperations = authorizedOpsUnknown
				break
			}
			d.AuthorizedOperations = authorizedOpsUnknown
			if req.IncludeAuthorizedOperations {
				d.AuthorizedOperations = groupAuthorizedOps(r, az, id)
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return encodeResponse(r, resp), nil
}

// groupAuthorizedOps is the bit set of READ, DELETE and DESCRIBE the
// request's principal has on the group (Kafka's authorizedOperations).
func groupAuthorizedOps(r *request, az *authz.Authorizer, id string) int32 {
	var ops int32
	for _, op := range []authz.Operation{authz.OpRead, authz.OpDelete, authz.OpDescribe} {
		if r.allowed(az, op, authz.ResGroup, id) {
			ops |= 1 << int(op)
		}
	}
	return ops
}
