package broker

// DescribeGroups (key 15), versions 0 through kmsg's newest (6).
//
// Behaviour: group.Coordinator.DescribeGroups: state, protocol type, the
// selected protocol and members (client id, host, v4+ instance id); member
// metadata and assignment bytes only for a Stable group, as Kafka. An
// unknown group is described as Dead; v6+ also gets GROUP_ID_NOT_FOUND.
// v3+ AuthorizedOperations is -2147483648 unless requested, then READ,
// DELETE and DESCRIBE (no ACLs: everything is allowed). A group of a
// partition this broker does not lead gets NOT_COORDINATOR, one loading
// COORDINATOR_LOAD_IN_PROGRESS.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(15, 0, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeGroupsRequest)
	return encodeResponse(r, n.groups.members.DescribeGroups(ctx, req)), nil
}
