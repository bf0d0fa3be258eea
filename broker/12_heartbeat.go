package broker

// Heartbeat (key 12), versions 0 through kmsg's newest (4).
//
// Behaviour: group.Coordinator.Heartbeat: resets the member's session
// timer; REBALANCE_IN_PROGRESS while the group prepares a rebalance (the
// member must rejoin), ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
// FENCED_INSTANCE_ID (v3+) as Kafka.
//
// A KIP-848 consumer group of that id (its classic members after an
// online upgrade) answers through Group.ClassicHeartbeat.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(12, 0, handleHeartbeat) }

func handleHeartbeat(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.HeartbeatRequest)
	if resp, handled := n.groups.cgs.classicHeartbeat(req); handled {
		return encodeResponse(r, resp), nil
	}
	return encodeResponse(r, n.groups.members.Heartbeat(ctx, req)), nil
}
