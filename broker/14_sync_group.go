package broker

// SyncGroup (key 14), versions 0 through kmsg's newest (5).
//
// Behaviour: group.Coordinator.SyncGroup. In CompletingRebalance the
// leader's assignment is appended to __consumer_offsets (group metadata
// with every member's assignment) and only then is anyone answered;
// followers wait for it (and, as in Kafka, so do their connections' later
// requests). In
// Stable a member gets its stored assignment at once (a static member that
// rejoined without a rebalance). v5+ checks ProtocolType/ProtocolName
// against the group (INCONSISTENT_GROUP_PROTOCOL) and returns them.
//
// A KIP-848 consumer group of that id answers through Group.ClassicSync
// (its classic members after an online upgrade: the coordinator's
// assignment, the leader's ignored).
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(14, 0, handleSyncGroup) }

func handleSyncGroup(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.SyncGroupRequest)
	if resp, handled := n.groups.cgs.classicSync(req); handled {
		return encodeResponse(r, resp), nil
	}
	return encodeResponse(r, n.groups.members.SyncGroup(ctx, req)), nil
}
