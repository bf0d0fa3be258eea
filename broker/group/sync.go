package group

// SyncGroup: the second step of a rebalance. Followers park until the
// leader's assignment is stored (Persister.StoreGroup); then the group is
// Stable and every parked member is answered with its assignment.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup handles a SyncGroup request (all versions). Followers wait for
// the leader's assignment; the leader's assignment is stored
// ([Persister.StoreGroup]) before anyone is answered.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = req.Version
	res, wait, leaderStore := c.sync(req)
	if leaderStore != nil {
		leaderStore()
	}
	if wait != nil {
		select {
		case res = <-wait:
		case <-ctx.Done():
			res = syncResult{code: kerr.RebalanceInProgress.Code}
		}
	}
	resp.ErrorCode = res.code
	if res.code == 0 {
		resp.MemberAssignment = res.assignment
		c.mu.Lock()
		if g := c.groups[req.Group]; g != nil {
			resp.ProtocolType = kmsg.StringPtr(g.protocolType)
			resp.Protocol = kmsg.StringPtr(g.protocol)
		}
		c.mu.Unlock()
	}
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

func (c *Coordinator) sync(req *kmsg.SyncGroupRequest) (syncResult, chan syncResult, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(code int16) (syncResult, chan syncResult, func()) { return syncResult{code: code}, nil, nil }
	if code := c.checkLocked(req.Group, false); code != 0 {
		return fail(code)
	}
	g := c.groups[req.Group]
	var instanceID *string
	if req.Version >= 3 {
		instanceID = req.InstanceID
	}
	switch {
	case g == nil:
		return fail(kerr.UnknownMemberID.Code)
	case g.state == Dead:
		return fail(kerr.CoordinatorNotAvailable.Code)
	case g.fenced(instanceID, req.MemberID):
		return fail(kerr.FencedInstanceID.Code)
	case g.members[req.MemberID] == nil:
		return fail(kerr.UnknownMemberID.Code)
	case req.Generation != g.generation:
		return fail(kerr.IllegalGeneration.Code)
	case req.Version >= 5 && req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Version >= 5 && req.Protocol != nil && *req.Protocol != g.protocol:
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		return fail(kerr.UnknownMemberID.Code)
	case PreparingRebalance:
		return fail(kerr.RebalanceInProgress.Code)
	case Stable:
		delete(g.pendingSync, m.id)
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		return syncResult{assignment: m.assignment}, nil, nil
	}
	// CompletingRebalance
	ch := make(chan syncResult, 1)
	answerSync(m, syncResult{code: kerr.RebalanceInProgress.Code})
	m.syncCh = ch
	delete(g.pendingSync, m.id)
	if m.id != g.leader {
		return syncResult{}, ch, nil
	}
	gen := g.generation
	assignment := map[string][]byte{}
	for _, a := range req.GroupAssignment {
		if g.members[a.MemberID] != nil {
			assignment[a.MemberID] = a.MemberAssignment
		}
	}
	for id := range g.members {
		if assignment[id] == nil {
			assignment[id] = []byte{}
		}
	}
	still := func() bool { return g.state == CompletingRebalance && g.generation == gen }
	return syncResult{}, ch, func() {
		attempted, err := c.store(g, still, assignment)
		c.mu.Lock()
		defer c.mu.Unlock()
		if !attempted || !still() || g.resigned || g.deleted {
			return // the group moved on; waiters were answered by that move
		}
		if err != nil {
			g.lastStoreError = storeErrorCode(err)
			c.resetAndPropagateLocked(g, g.lastStoreError)
			c.maybePrepareRebalanceLocked(g, "storing the assignment failed")
			return
		}
		for id, mm := range g.members {
			mm.assignment = assignment[id]
		}
		c.transitionLocked(g, Stable)
		for _, mm := range g.sortedMembers() {
			if answerSync(mm, syncResult{assignment: mm.assignment}) {
				c.scheduleHeartbeatLocked(g, mm, mm.sessionTimeout)
			}
		}
	}
}
