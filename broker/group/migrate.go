package group

// Online migration between classic and KIP-848 consumer groups (KIP-848,
// group.consumer.migration.policy): the classic half. The consumer group
// coordinator (broker/consumer_groups.go) decides and writes the records;
// this side hands a classic group over ([Coordinator.Upgrade]) and takes
// one back ([Coordinator.Adopt]).

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Protocol is one JoinGroup protocol of a member: its name (an assignor)
// and its metadata (a ConsumerProtocol subscription for protocol type
// consumer).
type Protocol struct {
	Name     string
	Metadata []byte
}

// ClassicView is a classic group as an online upgrade reads it.
type ClassicView struct {
	State        string // Kafka's state name
	ProtocolType string
	Protocol     string
	Generation   int32
	Members      []ClassicMemberView // in join order
}

// ClassicMemberView is one member of a [ClassicView]: its snapshot (the
// Subscription unset) and every protocol of its last JoinGroup.
type ClassicMemberView struct {
	MemberSnapshot
	Protocols []Protocol
}

// Upgrade hands the classic group name with members over to convert
// (Kafka's convertToConsumerGroup), which decides and appends the records
// that replace it (its tombstone, then the consumer group's). found is
// false when there is no such group, or it has no member (the caller
// takes the id as for an unknown group). convert runs under the group's
// store lock, so no classic store of it reaches the log after convert's
// records; an error from convert keeps the group as it was and is
// returned. On success the group is removed: its parked JoinGroups and
// SyncGroups are answered REBALANCE_IN_PROGRESS (the members rejoin, now
// to the consumer group) and any store it still had planned is void.
func (c *Coordinator) Upgrade(name string, convert func(ClassicView) error) (found bool, err error) {
	c.mu.Lock()
	g := c.groups[name]
	c.mu.Unlock()
	if g == nil {
		return false, nil
	}
	g.storeMu.Lock()
	defer g.storeMu.Unlock()
	c.mu.Lock()
	if c.groups[name] != g || g.resigned || g.deleted || len(g.members) == 0 || g.state == Empty || g.state == Dead {
		c.mu.Unlock()
		return false, nil
	}
	v := ClassicView{State: g.state.String(), ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation}
	for _, m := range g.sortedMembers() {
		mv := ClassicMemberView{MemberSnapshot: MemberSnapshot{
			MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			RebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond), SessionTimeoutMs: int32(m.sessionTimeout / time.Millisecond),
			Assignment: slices.Clone(m.assignment),
		}}
		for _, p := range m.protocols {
			mv.Protocols = append(mv.Protocols, Protocol{Name: p.name, Metadata: slices.Clone(p.metadata)})
		}
		v.Members = append(v.Members, mv)
	}
	c.mu.Unlock()
	if err := convert(v); err != nil {
		return true, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[name] == g {
		c.dropGroupLocked(g, kerr.RebalanceInProgress.Code)
		g.deleted = true
		delete(c.groups, name)
	}
	return true, nil
}

// Adopt installs a classic group converted from a consumer group (an
// online downgrade, Kafka's convertToClassicGroup), whose GroupMetadata
// record the caller has appended: s is that snapshot (Stable at its
// generation, its members' assignments) and protocols every member's
// JoinGroup protocols. The members' sessions start, and a rebalance
// begins (reason logged) so they rejoin with the classic protocol. A
// group of that name here is replaced.
func (c *Coordinator) Adopt(partition int32, s GroupSnapshot, protocols map[string][]Protocol, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.groups[s.Group]; old != nil {
		c.dropGroupLocked(old, kerr.NotCoordinator.Code)
		delete(c.groups, s.Group)
	}
	g := newGroup(s.Group, partition, c.now())
	g.protocolType, g.protocol, g.generation = s.ProtocolType, s.Protocol, s.Generation
	for _, ms := range s.Members {
		m := &member{id: ms.MemberID, instanceID: ms.InstanceID, clientID: ms.ClientID, clientHost: ms.ClientHost,
			rebalanceTimeout: time.Duration(ms.RebalanceTimeoutMs) * time.Millisecond,
			sessionTimeout:   time.Duration(ms.SessionTimeoutMs) * time.Millisecond,
			protocolType:     s.ProtocolType, assignment: slices.Clone(ms.Assignment)}
		for _, p := range protocols[ms.MemberID] {
			m.protocols = append(m.protocols, protocol{name: p.Name, metadata: slices.Clone(p.Metadata)})
		}
		if len(m.protocols) == 0 {
			m.protocols = []protocol{{name: s.Protocol, metadata: slices.Clone(ms.Subscription)}}
		}
		g.add(m)
	}
	g.protocolType = s.ProtocolType
	c.groups[s.Group] = g
	if len(g.members) == 0 {
		return
	}
	g.state = Stable
	if g.members[s.Leader] != nil {
		g.leader = s.Leader
	}
	if c.parts[partition] == Loaded {
		for _, m := range g.members {
			c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		}
	}
	c.prepareRebalanceLocked(g, reason)
}
