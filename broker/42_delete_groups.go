package broker

// DeleteGroups (key 42), versions 0 through kmsg's newest (3).
//
// Behaviour: group.Coordinator.DeleteGroups: only an Empty group is
// deleted (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND if unknown); its
// group metadata and committed offsets are tombstoned in
// __consumer_offsets before the answer. Duplicate names are answered once.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(42, 0, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DeleteGroupsRequest)
	return encodeResponse(r, n.groups.members.DeleteGroups(ctx, req)), nil
}
