package sharegroup

import (
	"slices"

	"github.com/google/uuid"
)

// Apply replays one record into g; deleted reports that the group itself
// is gone (its ShareGroupMetadata tombstone).
func (g *Group) Apply(rec Record) (deleted bool) {
	switch r := rec.(type) {
	case *MemberMetadataRecord:
		if r.Deleted {
			if m := g.Members[r.MemberID]; m != nil {
				g.uninstall(m)
			}
			return false
		}
		m := g.persistedMember(r.MemberID).clone()
		m.RackID, m.ClientID, m.ClientHost = r.RackID, r.ClientID, r.ClientHost
		m.SubscribedTopicNames = slices.Compact(slices.Sorted(slices.Values(r.SubscribedTopicNames)))
		g.install(m)
	case *GroupMetadataRecord:
		if r.Deleted {
			return true
		}
		g.Epoch, g.MetadataHash = r.Epoch, r.MetadataHash
	case *TargetMetadataRecord:
		if !r.Deleted {
			g.AssignmentEpoch = r.AssignmentEpoch
		}
	case *TargetMemberRecord:
		if r.Deleted {
			delete(g.Target, r.MemberID)
		} else {
			g.Target[r.MemberID] = r.Partitions.Clone()
		}
	case *CurrentAssignmentRecord:
		if r.Deleted {
			return false
		}
		m := g.Members[r.MemberID]
		if m == nil {
			// Kafka writes member metadata first; an assignment alone
			// still makes the member known.
			m = &Member{ID: r.MemberID}
			g.install(m)
		}
		m.Epoch, m.PreviousEpoch = r.MemberEpoch, r.PreviousMemberEpoch
		m.Assigned = r.Assigned.Clone()
	case *StatePartitionMetadataRecord:
		g.Initialized = map[uuid.UUID]StateTopic{}
		if !r.Deleted {
			for _, t := range append(slices.Clone(r.Initializing), r.Initialized...) {
				st := g.Initialized[t.ID]
				st.ID, st.Name, st.CreateMs = t.ID, t.Name, t.CreateMs
				for _, p := range t.Partitions {
					if i, found := slices.BinarySearch(st.Partitions, p); !found {
						st.Partitions = slices.Insert(st.Partitions, i, p)
					}
				}
				g.Initialized[t.ID] = st
			}
		}
	}
	return false
}

func (g *Group) persistedMember(id string) *Member {
	if m := g.Members[id]; m != nil {
		return m
	}
	return &Member{ID: id, Assigned: Assignment{}}
}

// Replay rebuilds the groups from their records in log order (a group's
// metadata tombstone drops it; later records start it again). Call
// [Group.Loaded] on each before serving.
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
