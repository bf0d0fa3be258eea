package broker

// LeaveGroup (key 13), versions 0 through kmsg's newest (5).
//
// Behaviour: group.Coordinator.LeaveGroup. v0-v2 name one member id and
// answer with a top-level error; v3+ name a batch of member identities
// (member id and/or group.instance.id; an instance id alone removes that
// static member, as kafka-consumer-groups does) and answer per member.
// Every removal from a Stable or CompletingRebalance group starts a
// rebalance.
//
// A KIP-848 consumer group of that id answers through Group.ClassicLeave
// (its classic members after an online upgrade); a removal leaving only
// classic members may downgrade it (consumer_migration.go).
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(13, 0, handleLeaveGroup) }

func handleLeaveGroup(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.LeaveGroupRequest)
	if resp, handled := n.groups.cgs.classicLeave(ctx, req); handled {
		return encodeResponse(r, resp), nil
	}
	return encodeResponse(r, n.groups.members.LeaveGroup(ctx, req)), nil
}
