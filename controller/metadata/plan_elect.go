package metadata

import (
	"slices"
)

// Partition changes: elections, ISR removals and the KIP-966 / KIP-704
// bookkeeping every planner that changes a partition's leader or ISR goes
// through ([State.changePartition]). It follows the order of Kafka's
// PartitionChangeBuilder:
//
//  1. the target ISR is given by the caller (a fenced, shutting-down or
//     uncleanly restarted broker removed; an ISR the leader asked for);
//  2. election, if the current leader is gone or may no longer lead (or,
//     for a preferred election, the first replica is in the target ISR
//     and acceptable: it leads):
//     a. the current leader, if it is in the target ISR and acceptable
//     (registered, unfenced, not in controlled shutdown);
//     b. the first acceptable target-ISR member in replica order;
//     c. the first acceptable ELR member in replica order (KIP-966): it
//     left the ISR only because the ISR was below min ISR, while the HW
//     could not advance, so it holds every committed record. The ISR
//     becomes just that member;
//     d. with the ISR and ELR both empty (only after an unclean shutdown
//     of the last member, see [State.PlanRegisterBroker]), the first
//     acceptable last-known-ELR member: the replicas that were electable
//     last, the best left. It leads RECOVERING (it may have lost its
//     unflushed tail), and counts as an unclean election;
//     e. with unclean.leader.election.enable (topic, cluster default,
//     broker default), the first acceptable replica: ISR = {it},
//     ELR and last known ELR cleared, RECOVERING (KIP-704);
//     f. none: the partition is offline (leader -1) and keeps its ISR;
//  3. the ELR (KIP-966): while the target ISR is below the effective min
//     ISR, min(min.insync.replicas, replication factor), the ELR is the
//     old ELR plus the old ISR, minus the target ISR, minus an uncleanly
//     restarted broker; once the ISR is back at min ISR the ELR and the
//     last known ELR are cleared. Members that leave the ELR without
//     rejoining the ISR or being cleared (an unclean restart) go to the
//     last known ELR, as does the last member of an ISR that empties;
//  4. the leader recovery state: RECOVERING after an unclean election,
//     RECOVERED when the leader reports it (AlterPartition), else kept.
//
// A fenced ELR member stays in the ELR: it is electable when it returns.

// changeOpts steers one partition change.
type changeOpts struct {
	// acceptable reports whether a broker may lead or join the ISR.
	acceptable func(id int32) bool
	// mustElect forces an election even if the current leader is in the
	// target ISR and acceptable (it is not, when it is being removed).
	mustElect bool
	// unclean allows step 2e.
	unclean bool
	// preferred is a preferred election (ElectLeaders PREFERRED, the
	// automatic rebalance): the first replica leads if it is in the
	// target ISR and acceptable, before step 2a.
	preferred bool
	// uncleanShutdown is a broker that restarted uncleanly (KIP-966): it
	// leaves the ELR too, not only the ISR; -1 for none.
	uncleanShutdown int32
	// recovered is the leader reporting KIP-704 RECOVERED.
	recovered bool
}

// changeResult is what a partition change decided.
type changeResult struct {
	rec *PartitionChangeRecord // nil when nothing changes
	// uncleanElection reports step 2d or 2e.
	uncleanElection bool
}

// changePartition plans p's move to targetISR (see the file comment). It
// returns a nil record when nothing changes.
func (s *State) changePartition(t *topicState, p *PartitionInfo, targetISR []int32, o changeOpts) changeResult {
	isr := slices.Clone(targetISR)
	elr := slices.DeleteFunc(slices.Clone(p.ELR), func(r int32) bool { return r == o.uncleanShutdown })
	lastKnown := slices.Clone(p.LastKnownELR)
	lrs := p.LeaderRecoveryState
	leader := p.Leader
	unclean := false

	valid := func(r int32) bool { return o.acceptable(r) && slices.Contains(isr, r) }
	if o.preferred && len(p.Replicas) > 0 && valid(p.Replicas[0]) {
		leader = p.Replicas[0]
	} else if o.mustElect || leader == NoLeader || !valid(leader) {
		leader = NoLeader
		if r, ok := firstIn(p.Replicas, valid); ok {
			leader = r
		} else if r, ok := firstIn(p.Replicas, func(r int32) bool { return o.acceptable(r) && slices.Contains(elr, r) }); ok {
			leader, isr = r, []int32{r}
		} else if len(isr) == 0 && len(elr) == 0 {
			if r, ok := firstIn(p.Replicas, func(r int32) bool { return o.acceptable(r) && slices.Contains(lastKnown, r) }); ok {
				leader, isr, unclean = r, []int32{r}, true
			}
		}
		if leader == NoLeader && o.unclean {
			if r, ok := firstIn(p.Replicas, o.acceptable); ok {
				leader, isr, unclean = r, []int32{r}, true
			}
		}
	}

	if unclean {
		// The committed records are now whatever the new leader holds:
		// no other replica is known to hold them all.
		elr, lastKnown, lrs = nil, nil, LeaderRecovering
	} else {
		minISR := s.MinInsyncReplicas(t.name, len(p.Replicas))
		if len(isr) >= minISR {
			elr, lastKnown = nil, nil
		} else {
			var next []int32
			for _, r := range p.Replicas { // replica order, deterministic
				if (slices.Contains(elr, r) || slices.Contains(p.ISR, r)) && !slices.Contains(isr, r) && r != o.uncleanShutdown {
					next = append(next, r)
				}
			}
			// Members leaving the ELR (or an emptied ISR) without
			// rejoining the ISR are remembered.
			for _, r := range p.Replicas {
				left := slices.Contains(p.ELR, r) && !slices.Contains(next, r)
				lastOfISR := len(isr) == 0 && slices.Contains(p.ISR, r) && !slices.Contains(next, r)
				if (left || lastOfISR) && !slices.Contains(isr, r) && !slices.Contains(lastKnown, r) {
					lastKnown = append(lastKnown, r)
				}
			}
			lastKnown = slices.DeleteFunc(lastKnown, func(r int32) bool { return slices.Contains(isr, r) || slices.Contains(next, r) })
			elr = next
		}
		if o.recovered {
			lrs = LeaderRecovered
		}
	}

	rec := &PartitionChangeRecord{TopicID: p.TopicID, Partition: p.Partition}
	changed := false
	if leader != p.Leader {
		rec.Leader = ptr(leader)
		changed = true
	}
	if !slices.Equal(isr, p.ISR) {
		rec.ISR = nonNil(slices.Clone(isr))
		changed = true
	}
	if !slices.Equal(elr, p.ELR) {
		rec.ELR = nonNil(elr)
		changed = true
	}
	if !slices.Equal(lastKnown, p.LastKnownELR) {
		rec.LastKnownELR = nonNil(lastKnown)
		changed = true
	}
	if lrs != p.LeaderRecoveryState || unclean {
		// An unclean election always says so, even on a partition still
		// RECOVERING from an earlier one (IsUncleanElection counts it).
		rec.LeaderRecoveryState = ptr(lrs)
		changed = true
	}
	if !changed {
		return changeResult{}
	}
	return changeResult{rec: rec, uncleanElection: unclean}
}

// firstIn returns the first of replicas that ok accepts.
func firstIn(replicas []int32, ok func(int32) bool) (int32, bool) {
	for _, r := range replicas {
		if ok(r) {
			return r, true
		}
	}
	return NoLeader, false
}

// IsUncleanElection reports whether r is a partition change electing a
// leader that may not hold every committed record: an unclean election
// (unclean.leader.election.enable) or a last-known-ELR election after
// the ISR and ELR emptied; both leave the partition RECOVERING (KIP-704).
// The controller counts these (strata_controller_unclean_leader_elections_total).
func IsUncleanElection(r Record) bool {
	pc, ok := r.(*PartitionChangeRecord)
	return ok && pc.Leader != nil && *pc.Leader != NoLeader &&
		pc.LeaderRecoveryState != nil && *pc.LeaderRecoveryState == LeaderRecovering
}
