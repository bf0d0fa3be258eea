package group

// A member's liveness and its departure: Heartbeat (which restarts the
// session timer of timers.go) and LeaveGroup (KIP-345 batch leave by
// member or instance id).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat handles a Heartbeat request (all versions).
func (c *Coordinator) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.Version
	var instanceID *string
	if req.Version >= 3 {
		instanceID = req.InstanceID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.checkLocked(req.Group, false); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	g := c.groups[req.Group]
	switch {
	case g == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case g.state == Dead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case g.fenced(instanceID, req.MemberID):
		resp.ErrorCode = kerr.FencedInstanceID.Code
	case g.members[req.MemberID] == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		resp.ErrorCode = kerr.IllegalGeneration.Code
	case g.state == Empty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	default:
		m := g.members[req.MemberID]
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		if g.state == PreparingRebalance {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
		}
	}
	return resp
}

// LeaveGroup handles a LeaveGroup request: v0-v2 one member id, v3+ a
// batch of member identities (member id, or instance id alone for an
// administrative removal of a static member).
func (c *Coordinator) LeaveGroup(_ context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.checkLocked(req.Group, false); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	g := c.groups[req.Group]
	if g != nil && g.state == Dead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	for _, l := range leaving {
		r := kmsg.NewLeaveGroupResponseMember()
		r.MemberID, r.InstanceID = l.MemberID, l.InstanceID
		r.ErrorCode = c.leaveOneLocked(g, l)
		resp.Members = append(resp.Members, r)
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	return resp
}

func (c *Coordinator) leaveOneLocked(g *group, l kmsg.LeaveGroupRequestMember) int16 {
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	reason := "member left"
	if l.Reason != nil {
		reason += ": " + *l.Reason
	}
	switch {
	case l.MemberID == unknownMemberID:
		if l.InstanceID == nil {
			return kerr.UnknownMemberID.Code
		}
		id, ok := g.static[*l.InstanceID]
		if !ok || g.members[id] == nil {
			return kerr.UnknownMemberID.Code
		}
		c.removeMemberAndUpdateLocked(g, g.members[id], reason)
	case g.pending[l.MemberID] != nil:
		if t := g.pending[l.MemberID].timer; t != nil {
			t.Stop()
		}
		delete(g.pending, l.MemberID)
		if g.state == PreparingRebalance {
			c.tryCompleteJoinLocked(g)
		}
	case g.fenced(l.InstanceID, l.MemberID):
		return kerr.FencedInstanceID.Code
	case g.members[l.MemberID] != nil:
		c.removeMemberAndUpdateLocked(g, g.members[l.MemberID], reason)
	default:
		return kerr.UnknownMemberID.Code
	}
	return 0
}
