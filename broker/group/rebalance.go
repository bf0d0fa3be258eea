package group

// The rebalance: prepare (PreparingRebalance, waiting SyncGroups told
// REBALANCE_IN_PROGRESS) → complete the join phase (new generation,
// protocol selected, parked JoinGroups answered) → CompletingRebalance,
// which sync.go ends in Stable.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maybePrepareRebalanceLocked starts a rebalance if the state allows one.
func (c *Coordinator) maybePrepareRebalanceLocked(g *group, reason string) {
	if g.state.canRebalance() {
		c.prepareRebalanceLocked(g, reason)
	}
}

// prepareRebalanceLocked is Kafka's prepareRebalance: waiting SyncGroups
// are told REBALANCE_IN_PROGRESS, and the group waits for its members to
// rejoin; the first rebalance of an Empty group waits the initial delay.
func (c *Coordinator) prepareRebalanceLocked(g *group, reason string) {
	c.logger.Info("group: preparing rebalance", "group", g.id, "generation", g.generation, "reason", reason)
	if g.state == CompletingRebalance {
		c.resetAndPropagateLocked(g, kerr.RebalanceInProgress.Code)
	}
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	g.syncSeq++
	wasEmpty := g.state == Empty
	c.transitionLocked(g, PreparingRebalance)
	if wasEmpty && c.o.InitialRebalanceDelay > 0 {
		g.initialDelay = true
		g.delay = c.o.InitialRebalanceDelay
		g.remaining = max(g.rebalanceTimeout()-c.o.InitialRebalanceDelay, 0)
		c.scheduleJoinLocked(g, g.delay)
		return
	}
	g.initialDelay = false
	c.scheduleJoinLocked(g, g.rebalanceTimeout())
	c.tryCompleteJoinLocked(g)
}

// tryCompleteJoinLocked completes the join phase once every member has
// rejoined and no handed-out member id is outstanding (DelayedJoin's
// tryComplete; the initial delay only ends by its timer).
func (c *Coordinator) tryCompleteJoinLocked(g *group) {
	if g.state == PreparingRebalance && !g.initialDelay && g.allJoined() {
		c.completeJoinLocked(g)
	}
}

// completeJoinLocked is Kafka's onCompleteJoin: dynamic members that did
// not rejoin are removed (static ones stay until their session ends), a
// leader is chosen among those that rejoined, the generation is bumped
// and every waiting JoinGroup answered; the leader gets all members'
// metadata.
func (c *Coordinator) completeJoinLocked(g *group) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq++
	g.initialDelay = false
	for _, m := range g.sortedMembers() {
		if m.joinCh == nil && m.instanceID == nil {
			c.logger.Info("group: removing member that did not rejoin", "group", g.id, "member", m.id)
			g.remove(m.id)
			answerSync(m, syncResult{code: kerr.UnknownMemberID.Code})
		}
	}
	if !g.maybeElectJoinedLeader() && len(g.members) > 0 {
		// Only static members that did not rejoin are left: wait another
		// rebalance timeout for them (or their sessions) to end.
		c.scheduleJoinLocked(g, g.rebalanceTimeout())
		return
	}
	g.generation++
	g.pendingSync = map[string]bool{}
	if len(g.members) == 0 {
		g.protocol = ""
		g.leader = ""
		c.transitionLocked(g, Empty)
		c.metrics.rebalances.Inc()
		c.storeAsyncLocked(g)
		return
	}
	g.protocol = g.selectProtocol()
	c.transitionLocked(g, CompletingRebalance)
	c.metrics.rebalances.Inc()
	var all []kmsg.JoinGroupResponseMember
	for _, m := range g.sortedMembers() {
		all = append(all, kmsg.JoinGroupResponseMember{MemberID: m.id, InstanceID: m.instanceID, ProtocolMetadata: m.metadataFor(g.protocol)})
	}
	for _, m := range g.sortedMembers() {
		g.pendingSync[m.id] = true
		r := c.joinResultLocked(g, m.id)
		if m.id == g.leader {
			r.Members = all
		}
		g.answerJoin(m, r)
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		m.isNew = false
	}
	c.scheduleSyncLocked(g)
}

// joinResultLocked is a successful JoinGroup answer for the current
// generation (members filled in by the caller for the leader).
func (c *Coordinator) joinResultLocked(g *group, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Generation = g.generation
	r.ProtocolType = kmsg.StringPtr(g.protocolType)
	r.Protocol = kmsg.StringPtr(g.protocol)
	r.LeaderID = g.leader
	r.MemberID = memberID
	return r
}

func joinError(memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode = code
	r.Generation = noGeneration
	r.MemberID = memberID
	return r
}

// resetAndPropagateLocked clears every assignment and answers every
// waiting SyncGroup with code.
func (c *Coordinator) resetAndPropagateLocked(g *group, code int16) {
	for _, m := range g.sortedMembers() {
		m.assignment = nil
		if answerSync(m, syncResult{code: code}) {
			c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		}
	}
}

// removeMemberAndUpdateLocked is Kafka's removeMemberAndUpdateGroup.
func (c *Coordinator) removeMemberAndUpdateLocked(g *group, m *member, reason string) {
	g.answerJoin(m, joinError(unknownMemberID, kerr.UnknownMemberID.Code))
	g.remove(m.id)
	answerSync(m, syncResult{code: kerr.UnknownMemberID.Code})
	switch g.state {
	case Stable, CompletingRebalance:
		c.maybePrepareRebalanceLocked(g, reason)
	case PreparingRebalance:
		c.tryCompleteJoinLocked(g)
	}
}
