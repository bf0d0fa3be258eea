package consumer

import "slices"

// Apply replays one record of this group onto g, as Kafka's
// GroupMetadataManager.replay does when loading __consumer_offsets. It
// reports whether the record deleted the group (a type 3 tombstone).
// Records are applied in log order; a current assignment record for a
// member whose metadata record was not seen creates the member, as Kafka
// does. Timers are not replayed: call [Group.Loaded] once the partition is
// loaded.
func (g *Group) Apply(rec Record) (deleted bool) {
	switch r := rec.(type) {
	case *GroupMetadataRecord:
		if r.Deleted {
			return true
		}
		g.Epoch, g.MetadataHash = r.Epoch, r.MetadataHash
	case *PartitionMetadataRecord:
		// Superseded by the metadata hash (KIP-1101); a log from a Kafka
		// before 4.1 has a zero hash, so its first heartbeat here bumps
		// the epoch once.
	case *MemberMetadataRecord:
		if r.Deleted {
			if m := g.Members[r.MemberID]; m != nil {
				g.uninstall(m)
			}
			return false
		}
		m := g.persistedMember(r.MemberID).clone()
		m.InstanceID, m.RackID, m.ClientID, m.ClientHost = r.InstanceID, r.RackID, r.ClientID, r.ClientHost
		m.SubscribedTopicNames = slices.Clone(r.SubscribedTopicNames)
		m.SubscribedTopicRegex, m.RebalanceTimeoutMs, m.ServerAssignor = r.SubscribedTopicRegex, r.RebalanceTimeoutMs, r.ServerAssignor
		m.Classic = r.Classic.clone()
		g.install(m)
	case *TargetMetadataRecord:
		if !r.Deleted {
			g.TargetEpoch = r.AssignmentEpoch
		}
	case *TargetMemberRecord:
		if r.Deleted {
			delete(g.Target, r.MemberID)
		} else {
			g.Target[r.MemberID] = r.Partitions.Clone()
		}
	case *CurrentAssignmentRecord:
		m := g.persistedMember(r.MemberID).clone()
		if r.Deleted {
			m.Epoch, m.PreviousEpoch, m.State = 0, 0, Stable
			m.Assigned, m.PendingRevocation = Assignment{}, Assignment{}
		} else {
			m.Epoch, m.PreviousEpoch, m.State = r.MemberEpoch, r.PreviousMemberEpoch, r.State
			m.Assigned, m.PendingRevocation = r.Assigned.Clone(), r.PendingRevocation.Clone()
		}
		g.install(m)
	}
	return false
}

func (g *Group) persistedMember(id string) *Member {
	if m := g.Members[id]; m != nil {
		return m
	}
	m := &Member{ID: id, Assigned: Assignment{}, PendingRevocation: Assignment{}, RebalanceTimeoutMs: -1}
	g.Members[id] = m
	return m
}

// Replay rebuilds every group of a __consumer_offsets partition from its
// consumer group records, in log order; a group deleted by a tombstone is
// absent from the result.
func Replay(cfg Config, recs []Record) map[string]*Group {
	groups := map[string]*Group{}
	for _, r := range recs {
		g := groups[r.GroupID()]
		if g == nil {
			g = NewGroup(r.GroupID(), cfg)
			groups[r.GroupID()] = g
		}
		if g.Apply(r) {
			delete(groups, r.GroupID())
		}
	}
	return groups
}
