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

// nextExpiry is when the first session among ids runs out; a broker not
// seen yet has a full session from now (expired starts it).
func (l *liveness) nextExpiry(ids []int32, now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := now.Add(l.timeout)
	for _, id := range ids {
		if t, ok := l.seen[id]; ok && t.Add(l.timeout).Before(next) {
			next = t.Add(l.timeout)
		}
	}
	return next
}

// livenessMinWait is the shortest pause of the liveness loop: a broker
// whose fencing failed (no quorum) is tried again at this pace, not in a
// spin.
const livenessMinWait = 10 * time.Millisecond

// livenessLoop fences, on the leader, every unfenced broker whose session
// expired: metadata.State.PlanFenceBroker moves its leaderships to other
// ISR members (or unclean, when the topic allows) with bumped leader epochs.
// Like Kafka's controller (rescheduleMaybeFenceStaleBrokers at the
// heartbeat manager's nextCheckTimeNs), it wakes just after the first
// session runs out, so a broker is fenced at its session timeout, not up to
// a check period later (min(broker.session.timeout.ms/8,
// broker.heartbeat.interval.ms): 1.125s with Kafka's defaults, added to
// every re-election after a broker's loss). The period remains the longest
// pause (new brokers); a change of leadership wakes it at once, so a new
// leader starts every broker's fresh session as soon as it is ready, not
// up to a period later. It runs until Close.
func (c *Controller) livenessLoop() {
	period := min(c.cfg.BrokerSessionTimeout/8, c.cfg.BrokerHeartbeatInterval)
	period = max(period, c.cfg.TickInterval)
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-c.stopc:
			return
		case <-c.liveWake:
		case <-t.C:
		}
		t.Reset(c.checkLiveness(period))
	}
}

// checkLiveness fences the brokers whose session expired, if this node
// leads, and returns how long to wait before the next check.
func (c *Controller) checkLiveness(period time.Duration) time.Duration {
	if !c.node.isLeaderReady() {
		if c.node.leader.Load() == c.node.cfg.id {
			// Elected, not ready yet (its term's first entry is not
			// applied): start the sessions as soon as it is.
			return livenessMinWait
		}
		return period
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
	// expired is strict (older than the timeout): wake a little after.
	next := time.Until(c.live.nextExpiry(live, time.Now())) + time.Millisecond
	return min(period, max(next, livenessMinWait))
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
