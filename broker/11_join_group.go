package broker

// JoinGroup (key 11), versions 0 through kmsg's newest (9).
//
// Behaviour: Kafka's classic group join (group.Coordinator.JoinGroup): a
// new member of v4+ without group.instance.id first gets
// MEMBER_ID_REQUIRED with its id (KIP-394) and rejoins with it; the answer
// waits until the join phase completes (every known member rejoined, the
// rebalance timeout, or group.initial.rebalance.delay.ms for the first
// rebalance of an empty group); as in Kafka, the connection's later
// requests wait behind it (clients send group requests on a connection of
// their own, or nothing else meanwhile).
// The leader's answer carries every member's protocol metadata. v0 has no
// rebalance timeout: the session timeout is used. v5+ static members
// (KIP-345) rejoining within their session keep their assignment.
//
// A group id held by a KIP-848 consumer group with members (after an
// online upgrade, consumer_migration.go) is served by it
// (Group.ClassicJoin: INCONSISTENT_GROUP_PROTOCOL unless protocol type
// consumer with a protocol every classic member supports); an empty
// consumer group is dropped (its offsets kept) and the classic group takes
// the id.
//
// Differences from Kafka: v9 SkipAssignment is always false (it is for
// KIP-848 consumer-protocol groups, which do not exist here); the reason
// (v8+) is only logged in leaves. Protocol ties are broken by name rather
// than hash-map order.

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/broker/group/consumer"
)

func init() { register(11, 0, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.JoinGroupRequest)
	// A KIP-848 consumer group of that id (consumer_groups.go): with
	// members it serves the classic member; an empty one gives the id up,
	// its offsets kept.
	if resp, handled := n.groups.cgs.classicJoin(ctx, req, consumer.Client{ID: r.clientID, Host: clientHost(r)}); handled {
		return encodeResponse(r, resp), nil
	}
	if known, _ := n.groups.cgs.exists(req.Group); known {
		code := int16(0)
		if _, code = n.groups.cgs.dropEmpty(ctx, req.Group, false); code == 0 {
			code = -1
		}
		if code > 0 {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
			return encodeResponse(r, resp), nil
		}
	}
	if n.groupIsShare(req.Group) {
		// A share group takes no classic member (Kafka: INCONSISTENT_GROUP_PROTOCOL).
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = kerr.InconsistentGroupProtocol.Code, -1, req.MemberID
		return encodeResponse(r, resp), nil
	}
	resp := n.groups.members.JoinGroup(group.WithClient(ctx, r.clientID, clientHost(r)), req)
	return encodeResponse(r, resp), nil
}

// clientHost is the request's remote host as Kafka reports it in
// DescribeGroups ("/127.0.0.1").
func clientHost(r *request) string {
	if r.conn == nil || r.conn.nc == nil {
		return ""
	}
	addr := r.conn.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	return "/" + addr
}
