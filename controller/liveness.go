package controller

import (
	"context"
	"sync"
	"time"

	"github.com/strata-io/strata/controller/metadata"
)

// liveness is the leader's in-memory record of broker heartbeats. It is
// never replicated: a newly elected leader starts empty and so gives every
// broker a fresh session of broker.session.timeout.ms before fencing it, as
// Kafka's controller does.
type liveness struct {
	timeout time.Duration
	// mu guards seen.
	mu   sync.Mutex
	seen map[int32]time.Time
}

func newLiveness(timeout time.Duration) *liveness {
	return &liveness{timeout: timeout, seen: map[int32]time.Time{}}
}

// reset forgets every session (leadership changed).
func (l *liveness) reset() {
	l.mu.Lock()
	l.seen = map[int32]time.Time{}
	l.mu.Unlock()
}

// touch starts or renews broker id's session.
func (l *liveness) touch(id int32) { l.touchAt(id, time.Now()) }

func (l *liveness) touchAt(id int32, t time.Time) {
	l.mu.Lock()
	l.seen[id] = t
	l.mu.Unlock()
}

// alive reports whether id's session has not expired; a broker this leader
// has not heard from yet counts as alive (its fresh session is running).
func (l *liveness) alive(id int32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.seen[id]
	return !ok || time.Since(t) <= l.timeout
}

// expired returns, among the unfenced brokers in ids, those whose session
// has run out; brokers not seen yet get a session starting now.
func (l *liveness) expired(ids []int32, now time.Time) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int32
	for _, id := range ids {
		t, ok := l.seen[id]
		if !ok {
			l.seen[id] = now
			continue
		}
		if now.Sub(t) > l.timeout {
			out = append(out, id)
		}
	}
	return out
}

// livenessLoop fences, on the leader, every unfenced broker whose session
// expired: metadata.State.PlanFenceBroker moves its leaderships to other
// ISR members (or unclean, when the topic allows) with bumped leader epochs.
// It runs until Close.
func (c *Controller) livenessLoop() {
	period := min(c.cfg.BrokerSessionTimeout/8, c.cfg.BrokerHeartbeatInterval)
	period = max(period, c.cfg.TickInterval)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-c.stopc:
			return
		case <-t.C:
		}
		if !c.node.isLeaderReady() {
			continue
		}
		c.startTerm()
		var live []int32
		c.fsm.read(func(st *metadata.State) {
			for _, b := range st.Brokers() {
				if !b.Fenced {
					live = append(live, b.ID)
				}
			}
		})
		for _, id := range c.live.expired(live, time.Now()) {
			c.fenceBroker(id)
		}
	}
}

func (c *Controller) fenceBroker(id int32) {
	ctx, cancel := context.WithTimeout(c.stopCtx, c.cfg.ProposalTimeout)
	defer cancel()
	off, err := c.decideAndPropose(ctx, func(st *metadata.State) []metadata.Record {
		// Re-check on the decider: a heartbeat may have just renewed the
		// session, or another decision fenced it already.
		if b, ok := st.Broker(id); !ok || b.Fenced || c.live.alive(id) {
			return nil
		}
		return st.PlanFenceBroker(id, nil)
	})
	if err != nil {
		c.cfg.Logger.Warn("controller: fencing broker failed", "broker", id, "err", err)
		return
	}
	c.cfg.Logger.Info("controller: fenced broker after session timeout", "broker", id, "offset", off)
}
