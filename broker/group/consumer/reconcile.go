package consumer

import "github.com/google/uuid"

// MemberState is a member's reconciliation state, with the values Kafka
// persists in ConsumerGroupCurrentMemberAssignmentValue.State.
//
//	          new target epoch, nothing to revoke
//	STABLE ─────────────────────────────────────────────► STABLE (epoch = target)
//	  │  new target epoch, partitions to revoke
//	  ▼
//	UNREVOKED_PARTITIONS  (epoch unchanged: the member must first give up
//	  │                    PartitionsPendingRevocation; its rebalance timeout runs)
//	  │  the member's heartbeat no longer lists them
//	  ▼
//	UNRELEASED_PARTITIONS (epoch = target; some target partitions are still
//	  │                    held by their previous owner, not yet handed over)
//	  │  the previous owners released them
//	  ▼
//	STABLE
type MemberState int8

// The member states (Kafka's MemberState).
const (
	Stable               MemberState = 0
	UnrevokedPartitions  MemberState = 1
	UnreleasedPartitions MemberState = 2
	UnknownState         MemberState = 127
)

func (s MemberState) String() string {
	switch s {
	case Stable:
		return "STABLE"
	case UnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case UnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// reconcileInput is what one reconciliation step of a member sees.
type reconcileInput struct {
	targetEpoch int32
	target      Assignment
	// subscribed is the member's subscription resolved to topic IDs; a
	// target topic outside it is treated as empty, an assigned topic
	// outside it is revoked at once.
	subscribed map[uuid.UUID]bool
	// owned is what the member's heartbeat reports owning; nil when the
	// heartbeat did not say (then it is assumed to still own everything).
	owned Assignment
	// ownerEpoch returns the epoch of a partition's current owner, or -1
	// when no member holds it.
	ownerEpoch func(t uuid.UUID, p int32) int32
}

// reconcile is Kafka's CurrentAssignmentBuilder.build: the next state of
// member m towards its target. It returns m itself (unchanged) when it
// cannot progress, otherwise a modified copy.
func reconcile(m *Member, in reconcileInput) *Member {
	switch m.State {
	case Stable:
		if m.Epoch != in.targetEpoch {
			return computeNext(m, in)
		}
		return enforceSubscription(m, in)
	case UnrevokedPartitions:
		// Wait until the heartbeat no longer lists the partitions to
		// revoke; then move on towards the latest target.
		if ownsRevoked(in.owned, m.PendingRevocation) {
			return enforceSubscription(m, in)
		}
		return computeNext(m, in)
	case UnreleasedPartitions:
		// Hand over any partitions their previous owners released since.
		return computeNext(m, in)
	}
	// A state from a newer version: Kafka fences the member unless it
	// gave up everything; the caller checks that before reconciling.
	n := m.clone()
	n.State = Stable
	n.Epoch, n.PreviousEpoch = in.targetEpoch, m.Epoch
	return computeNext(n, in)
}

// ownsRevoked reports whether the heartbeat's owned partitions still hold
// one of revoked; an unknown owned set (nil) does.
func ownsRevoked(owned, revoked Assignment) bool {
	if owned == nil {
		return true
	}
	for t, ps := range owned {
		for _, p := range ps {
			if revoked.Has(t, p) {
				return true
			}
		}
	}
	return false
}

// enforceSubscription revokes at once the assigned topics the member no
// longer subscribes to (Kafka's updateCurrentAssignment), keeping its
// epoch.
func enforceSubscription(m *Member, in reconcileInput) *Member {
	var drop []uuid.UUID
	for t := range m.Assigned {
		if !in.subscribed[t] {
			drop = append(drop, t)
		}
	}
	if len(drop) == 0 {
		return m
	}
	n := m.clone()
	for _, t := range drop {
		for _, p := range n.Assigned[t] {
			n.PendingRevocation.add(t, p)
		}
		delete(n.Assigned, t)
	}
	if ownsRevoked(in.owned, n.PendingRevocation) {
		n.State = UnrevokedPartitions
	} else {
		n.PendingRevocation = Assignment{}
	}
	return n
}

// computeNext is Kafka's computeNextAssignment: keep assigned ∩ target;
// revoke assigned − target first (the member stays at its epoch until it
// has); only then take target − assigned, and of that only the partitions
// no other member still holds.
func computeNext(m *Member, in reconcileInput) *Member {
	keep, revoke, pending := Assignment{}, Assignment{}, Assignment{}
	unreleased := false
	topics := map[uuid.UUID]bool{}
	for t := range in.target {
		topics[t] = true
	}
	for t := range m.Assigned {
		topics[t] = true
	}
	for t := range topics {
		var target []int32
		if in.subscribed[t] {
			target = in.target[t]
		}
		for _, p := range m.Assigned[t] {
			if containsSorted(target, p) {
				keep.add(t, p)
			} else {
				revoke.add(t, p)
			}
		}
		for _, p := range target {
			if m.Assigned.Has(t, p) {
				continue
			}
			// Held by another member (not this one's own pending revocation):
			// not yet released.
			if in.ownerEpoch(t, p) != -1 && !m.PendingRevocation.Has(t, p) {
				unreleased = true
				continue
			}
			pending.add(t, p)
		}
	}
	n := m.clone()
	n.Assigned = keep
	switch {
	case revoke.Size() > 0 && ownsRevoked(in.owned, revoke):
		n.State = UnrevokedPartitions
		n.PendingRevocation = revoke
		n.setEpoch(m.Epoch)
	default:
		for t, ps := range pending {
			for _, p := range ps {
				n.Assigned.add(t, p)
			}
		}
		n.State = Stable
		if unreleased {
			n.State = UnreleasedPartitions
		}
		n.PendingRevocation = Assignment{}
		n.setEpoch(in.targetEpoch)
	}
	return n
}

func containsSorted(ps []int32, p int32) bool {
	lo, hi := 0, len(ps)
	for lo < hi {
		mid := (lo + hi) / 2
		switch {
		case ps[mid] == p:
			return true
		case ps[mid] < p:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return false
}
