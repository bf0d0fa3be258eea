package broker

// The open-file budget: how many partitions this broker can host.
//
// Every hosted partition keeps three descriptors open (its active
// segment's .log and two mapped indexes); sealed segments share a bounded
// cache (storage.ManagerOptions.MaxOpenSealedSegments). At start the node
// raises its soft RLIMIT_NOFILE to the hard limit, plans the limit
// (internal/fdlimit.Plan) and logs how many partitions it allows.
//
// Why the check is made here, before the controller commits anything:
// creation flows controller-first (the topic is committed to the metadata
// log, then each broker reconciles and opens the logs), so a broker that
// only found out at reconcile that it cannot open the logs would leave a
// committed topic whose partitions time out on every produce, which is
// what a 1,000-partition CreateTopics did under a 1,024 limit (issue 12).
// Rolling the topic back from the reconciling broker would race with
// clients that already saw it. So the broker that receives CreateTopics,
// CreatePartitions or an auto-creation refuses, with POLICY_VIOLATION and
// a message naming the limit, any creation that would take its hosted
// partitions (open logs, plus creations it has accepted and not yet
// opened) past the budget, and forwards nothing for it: nothing is
// created. A partition on another broker counts for it as its share of the
// live brokers (replicas spread evenly, as placement does); explicit
// assignments count exactly. Each broker checks only its own budget: a
// request received by one broker cannot see another's (a known limit; the
// reconcile path still logs any log that fails to open).

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/fdlimit"
)

// fdBudget is the node's partition budget and the creations in flight.
type fdBudget struct {
	plan     fdlimit.Budget
	inFlight atomic.Int64 // partitions of accepted creations whose logs may not be open yet
}

// planFileBudget raises the open-file limit (or takes limit, for tests),
// plans it and logs the result. limit 0: the process's limit.
func (n *Node) planFileBudget(limit uint64) {
	lim := fdlimit.Limit{Soft: limit, Hard: limit, Was: limit}
	if limit == 0 {
		var err error
		if lim, err = fdlimit.Raise(); err != nil {
			n.logger.Warn("broker: raising the open-file limit failed", "soft", lim.Soft, "hard", lim.Hard, "err", err)
		}
	}
	n.fds.plan = fdlimit.Plan(lim.Soft)
	if n.fds.plan.Limit == 0 {
		n.logger.Info("broker: open-file limit: unlimited")
		return
	}
	n.logger.Info("broker: open-file limit", "soft", lim.Soft, "hard", lim.Hard, "was", lim.Was,
		"partitions_allowed", n.fds.plan.Partitions, "descriptors_per_partition", fdlimit.DescriptorsPerPartition,
		"sealed_segments_open", n.fds.plan.SealedSegments, "reserved", n.fds.plan.Reserved)
}

// warnOverBudget says so at start when the node already hosts more
// partitions than its limit allows (the limit was lowered).
func (n *Node) warnOverBudget(hosted int) {
	if p := n.fds.plan.Partitions; n.fds.plan.Limit > 0 && hosted > p {
		n.logger.Warn("broker: hosting more partitions than the open-file limit allows; raise it (ulimit -n, LimitNOFILE=)",
			"partitions", hosted, "partitions_allowed", p, "limit", n.fds.plan.Limit)
	}
}

// onThisNode estimates how many of a creation's replicas land on this
// broker: exactly, from explicit assignments, else the even share over
// the live brokers.
func (n *Node) onThisNode(parts int64, rf int16, assignments [][]int32) int64 {
	if len(assignments) > 0 {
		var k int64
		for _, a := range assignments {
			for _, id := range a {
				if id == n.cfg.NodeID {
					k++
					break
				}
			}
		}
		return k
	}
	if parts <= 0 {
		return 0
	}
	if rf <= 0 {
		rf = n.cfg.DefaultReplicationFactor
	}
	live := int64(0)
	n.view(func(st *metadata.State) {
		for _, b := range st.Brokers() {
			if !b.Fenced {
				live++
			}
		}
	})
	live = max(live, 1)
	r := min(int64(max(rf, 1)), live)
	return (parts*r + live - 1) / live
}

// reservePartitions admits a creation adding adding partitions to this
// broker, or refuses it with POLICY_VIOLATION. The caller calls release
// once the creation is done (its logs are open and counted, or it failed).
func (n *Node) reservePartitions(adding int64) (release func(), err error) {
	nothing := func() {}
	if n.fds.plan.Limit == 0 || adding <= 0 {
		return nothing, nil
	}
	hosted := int64(len(n.store.Logs()))
	allowed := int64(n.fds.plan.Partitions)
	for {
		cur := n.fds.inFlight.Load()
		if hosted+cur+adding > allowed {
			return nothing, fmt.Errorf("%w: broker %d can host %d partitions with its open-file limit of %d (%d descriptors each); it has %d and this would add %d: raise the limit (ulimit -n, systemd LimitNOFILE=)",
				kerr.PolicyViolation, n.cfg.NodeID, allowed, n.fds.plan.Limit, fdlimit.DescriptorsPerPartition, hosted+cur, adding)
		}
		if n.fds.inFlight.CompareAndSwap(cur, cur+adding) {
			var once atomic.Bool
			return func() {
				if once.CompareAndSwap(false, true) {
					n.fds.inFlight.Add(-adding)
				}
			}, nil
		}
	}
}
