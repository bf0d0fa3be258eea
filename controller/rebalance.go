package controller

import (
	"context"
	"time"

	"github.com/strata-io/strata/controller/metadata"
)

// The automatic preferred-leader rebalance (auto.leader.rebalance.enable):
// the shell around metadata.State.PlanPreferredRebalance. Every
// leader.imbalance.check.interval.seconds the quorum leader plans one
// check on the decider and proposes its elections as one batch, so a
// broker that restarts gets its preferred leaderships back once it is in
// their ISRs again, one batch per check rather than an election per
// partition as each catches up. A check that left partitions over
// (more than metadata.MaxElectionsPerImbalance) runs again at once, as
// Kafka's QuorumController reschedules it. Followers check nothing.

// rebalanceLoop runs the checks until Close.
func (c *Controller) rebalanceLoop() {
	interval := c.cfg.LeaderImbalanceCheckInterval
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-c.stopc:
			return
		case <-t.C:
		}
		next := interval
		if c.checkImbalance() {
			next = 0
		}
		t.Reset(next)
	}
}

// checkImbalance runs one check if this node leads; it reports whether
// partitions were left for another check at once.
func (c *Controller) checkImbalance() (more bool) {
	if !c.node.isLeaderReady() {
		return false
	}
	ctx, cancel := context.WithTimeout(c.stopCtx, c.cfg.ProposalTimeout)
	defer cancel()
	n := 0
	_, err := c.decideAndPropose(ctx, func(st *metadata.State) []metadata.Record {
		recs, left := st.PlanPreferredRebalance(c.cfg.LeaderImbalancePerBrokerPercentage)
		n, more = len(recs), left
		return recs
	})
	if err != nil {
		c.cfg.Logger.Warn("controller: preferred leader rebalance failed", "err", err)
		return false
	}
	if n > 0 {
		c.cfg.Logger.Info("controller: preferred leader rebalance", "elections", n, "more", more)
	}
	return more
}
