package broker

// ListGroups (key 16), versions 0 through kmsg's newest (5).
//
// Behaviour: group.Coordinator.ListGroups: the groups of the
// __consumer_offsets partitions this broker has loaded, sorted by name;
// v4+ StatesFilter (case-insensitive Kafka state names), v5+ TypesFilter
// and GroupType (every group here is "classic"). While a partition loads
// the answer carries COORDINATOR_LOAD_IN_PROGRESS with the groups loaded.
//
// Differences from Kafka: none known (a single broker answers for the
// partitions it leads, as each Kafka broker does).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(16, 0, handleListGroups) }

func handleListGroups(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ListGroupsRequest)
	return encodeResponse(r, n.groups.members.ListGroups(ctx, req)), nil
}
