package group

// The coordinator's timers: member session (heartbeat), pending-member
// (KIP-394), join phase (initial delay and rebalance timeout) and sync
// phase. Every callback carries a token checked under Coordinator.mu, so
// one that raced with Stop finds a newer token and does nothing.

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// scheduleHeartbeatLocked (re)starts m's session timer (Kafka's
// completeAndScheduleNextHeartbeatExpiration).
func (c *Coordinator) scheduleHeartbeatLocked(g *group, m *member, d time.Duration) {
	if m.hbTimer != nil {
		m.hbTimer.Stop()
	}
	m.hbSeq++
	seq := m.hbSeq
	m.hbTimer = c.clock.AfterFunc(d, func() { c.onHeartbeatExpire(g, m, seq) })
}

// onHeartbeatExpire is Kafka's onExpireHeartbeat. A member whose JoinGroup
// or SyncGroup is parked counts as alive (unless it is new: its parked
// join is the new-member timeout); its timer restarts when that request is
// answered.
func (c *Coordinator) onHeartbeatExpire(g *group, m *member, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g.resigned || g.deleted || m.hbSeq != seq || g.members[m.id] != m || g.state == Dead {
		return
	}
	if !m.isNew && (m.joinCh != nil || m.syncCh != nil) {
		return
	}
	c.logger.Info("group: member session expired", "group", g.id, "member", m.id)
	c.removeMemberAndUpdateLocked(g, m, "session timeout")
}

// schedulePendingLocked starts the KIP-394 timer of a handed-out member id.
func (c *Coordinator) schedulePendingLocked(g *group, id string, d time.Duration) {
	p := &pendingMember{}
	g.pending[id] = p
	p.timer = c.clock.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if g.pending[id] != p || g.resigned || g.deleted {
			return
		}
		delete(g.pending, id)
		if g.state == PreparingRebalance {
			c.tryCompleteJoinLocked(g)
		}
	})
}

func (c *Coordinator) scheduleJoinLocked(g *group, d time.Duration) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq++
	seq := g.joinSeq
	g.joinTimer = c.clock.AfterFunc(d, func() { c.onJoinTimer(g, seq) })
}

// onJoinTimer is the expiry of DelayedJoin or InitialDelayedJoin. The
// initial delay is extended by another step (at most the configured delay,
// at most what is left of the rebalance timeout) while new members keep
// arriving, as Kafka's InitialDelayedJoin.onComplete does.
func (c *Coordinator) onJoinTimer(g *group, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g.joinSeq != seq || g.resigned || g.deleted || g.state != PreparingRebalance {
		return
	}
	if g.initialDelay && g.newMemberAdd && g.remaining > 0 {
		g.newMemberAdd = false
		d := min(c.o.InitialRebalanceDelay, g.remaining)
		g.remaining = max(g.remaining-g.delay, 0)
		g.delay = d
		c.scheduleJoinLocked(g, d)
		return
	}
	c.completeJoinLocked(g)
}

func (c *Coordinator) scheduleSyncLocked(g *group) {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	g.syncSeq++
	seq, gen := g.syncSeq, g.generation
	g.syncTimer = c.clock.AfterFunc(g.rebalanceTimeout(), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if g.syncSeq != seq || g.generation != gen || g.resigned || g.deleted {
			return
		}
		if (g.state == CompletingRebalance || g.state == Stable) && len(g.pendingSync) > 0 {
			ids := make([]string, 0, len(g.pendingSync))
			for id := range g.pendingSync {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				if m := g.remove(id); m != nil {
					g.answerJoin(m, joinError(unknownMemberID, kerr.UnknownMemberID.Code))
					answerSync(m, syncResult{code: kerr.UnknownMemberID.Code})
				}
			}
			c.prepareRebalanceLocked(g, "members did not sync within the rebalance timeout")
		}
	})
}
