package broker

// ShareGroupDescribe (key 77), versions 1 (KIP-932; with key 76).
//
// Behaviour: per group, DESCRIBE on the group (else
// GROUP_AUTHORIZATION_FAILED), the group's partition led and loaded here
// (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
// COORDINATOR_NOT_AVAILABLE), then the core's description
// (sharegroup.Group.Describe): state (Empty, Stable), group and
// assignment epochs, the assignor ("simple"), and per member its epoch,
// client, rack, subscription and assignment (topic ids and names). A
// group that is not a share group here is GROUP_ID_NOT_FOUND ("Group %s
// is not a share group." for one of another type). AuthorizedOperations
// is -2147483648 unless requested.
//
// Differences from Kafka: Kafka redacts the whole group when one assigned
// topic is not DESCRIBE-able by the principal (TOPIC_AUTHORIZATION_FAILED);
// here too.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group/sharegroup"
)

func init() { registerMax(shareGroupDescribeKey, 1, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ShareGroupDescribeRequest)
	resp := kmsg.NewPtrShareGroupDescribeResponse()
	az := n.authorizer()
	for _, id := range req.GroupIDs {
		d := kmsg.NewShareGroupDescribeResponseGroup()
		d.GroupID = id
		d.AuthorizedOperations = authorizedOpsUnknown
		fail := func(e *kerr.Error, msg string) {
			d = kmsg.NewShareGroupDescribeResponseGroup()
			d.GroupID, d.AuthorizedOperations, d.ErrorCode = id, authorizedOpsUnknown, e.Code
			if msg != "" {
				d.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
		_, perr := n.groups.partitionOf(id)
		switch {
		case !n.shareGroupsOn():
			fail(kerr.UnsupportedVersion, "")
		case !r.allowed(az, authz.OpDescribe, authz.ResGroup, id):
			fail(kerr.GroupAuthorizationFailed, "")
		case perr != nil:
			fail(kerr.ErrorForCode(errCode(perr)).(*kerr.Error), "")
		default:
			img := n.groups.cgs.image()
			if !n.groups.sgs.with(id, func(g *sharegroup.Group) { d = g.Describe(img) }) {
				if n.groups.sgs.otherGroupType(id) != nil {
					fail(kerr.GroupIDNotFound, "Group "+id+" is not a share group.")
				} else {
					fail(kerr.GroupIDNotFound, "Group "+id+" not found.")
				}
				break
			}
			d.AuthorizedOperations = authorizedOpsUnknown
			for _, m := range d.Members {
				for _, tp := range m.Assignment.TopicPartitions {
					if !r.allowed(az, authz.OpDescribe, authz.ResTopic, tp.Topic) {
						fail(kerr.TopicAuthorizationFailed, "")
					}
				}
			}
			if d.ErrorCode == 0 && req.IncludeAuthorizedOperations {
				d.AuthorizedOperations = groupAuthorizedOps(r, az, id)
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return encodeResponse(r, resp), nil
}
