package group

import (
	"bytes"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// protocol is one (name, metadata) pair a member supports, in the
// member's order of preference.
type protocol struct {
	name     string
	metadata []byte
}

// syncResult is what a waiting SyncGroup is answered with.
type syncResult struct {
	code       int16
	assignment []byte
}

// member is one member of a group (Kafka's MemberMetadata). All fields are
// guarded by Coordinator.mu.
type member struct {
	id                               string
	instanceID                       *string
	clientID, clientHost             string
	rebalanceTimeout, sessionTimeout time.Duration
	protocolType                     string
	protocols                        []protocol
	assignment                       []byte
	seq                              uint64 // join order: leader fallback and listing order

	// isNew: joined in the current rebalance and not yet answered; its
	// session timer is the new-member join timeout and a pending JoinGroup
	// does not keep it alive.
	isNew bool
	// joinCh is set while a JoinGroup of the member waits (Kafka's
	// awaitingJoinCallback); syncCh while a SyncGroup waits.
	joinCh chan *kmsg.JoinGroupResponse
	syncCh chan syncResult

	hbTimer Timer
	hbSeq   uint64 // bumped on every (re)schedule: a stale expiry does nothing
}

// matches reports whether protos are exactly the member's protocols, in
// order (Kafka's MemberMetadata.matches).
func (m *member) matches(protos []protocol) bool {
	if len(protos) != len(m.protocols) {
		return false
	}
	for i := range protos {
		if protos[i].name != m.protocols[i].name || !bytes.Equal(protos[i].metadata, m.protocols[i].metadata) {
			return false
		}
	}
	return true
}

// metadataFor returns the member's metadata for protocol name.
func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// group is one classic group (Kafka's GroupMetadata). All fields but
// storeMu are guarded by Coordinator.mu.
type group struct {
	id        string
	partition int32
	state     State
	stateTime time.Time

	protocolType string // set by the first member of an empty group
	protocol     string // selected at the end of each join; "" when Empty
	generation   int32
	leader       string

	members   map[string]*member
	supported map[string]int // protocol name -> members supporting it
	// pending are KIP-394 member ids handed out with MEMBER_ID_REQUIRED
	// and not yet used to join; the value is the expiry timer's token.
	pending      map[string]*pendingMember
	static       map[string]string // group.instance.id -> member id
	numAwaiting  int               // members with a waiting JoinGroup
	pendingSync  map[string]bool   // members not yet synced this generation
	nextSeq      uint64
	newMemberAdd bool // a member joined during the initial delay

	// The join timer: DelayedJoin, or InitialDelayedJoin while
	// initialDelay (then delay is the running step, remaining what is
	// left of the rebalance timeout after it).
	joinTimer         Timer
	joinSeq           uint64
	initialDelay      bool
	delay, remaining  time.Duration
	syncTimer         Timer
	syncSeq           uint64
	storeMu           sync.Mutex // serialises this group's appends, so log order = snapshot order; taken before Coordinator.mu
	lastStoreError    int16      // for tests and logs: the last failed store's code
	deleted, resigned bool       // removed from the coordinator: every pending callback is void
}

type pendingMember struct {
	timer Timer
}

func newGroup(id string, partition int32, now time.Time) *group {
	return &group{
		id: id, partition: partition, state: Empty, stateTime: now,
		members: map[string]*member{}, supported: map[string]int{},
		pending: map[string]*pendingMember{}, static: map[string]string{},
		pendingSync: map[string]bool{},
	}
}

// sortedMembers returns the members in join order.
func (g *group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// add makes m a member (Kafka's GroupMetadata.add): the first member of an
// empty group sets its protocol type and becomes leader.
func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.nextSeq++
	m.seq = g.nextSeq
	g.members[m.id] = m
	for _, p := range m.protocols {
		g.supported[p.name]++
	}
	if g.leader == "" {
		g.leader = m.id
	}
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	delete(g.pending, m.id)
	if m.joinCh != nil {
		g.numAwaiting++
	}
}

// remove drops member id (Kafka's GroupMetadata.remove); a removed leader
// is replaced by the longest-standing member.
func (g *group) remove(id string) *member {
	m := g.members[id]
	if m == nil {
		return nil
	}
	delete(g.members, id)
	for _, p := range m.protocols {
		if g.supported[p.name]--; g.supported[p.name] == 0 {
			delete(g.supported, p.name)
		}
	}
	if m.joinCh != nil {
		g.numAwaiting--
	}
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	if m.hbTimer != nil {
		m.hbTimer.Stop()
	}
	m.hbSeq++
	delete(g.pendingSync, id)
	if g.leader == id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
	return m
}

// setProtocols replaces m's protocols, keeping the supported counts.
func (g *group) setProtocols(m *member, protos []protocol) {
	for _, p := range m.protocols {
		if g.supported[p.name]--; g.supported[p.name] == 0 {
			delete(g.supported, p.name)
		}
	}
	m.protocols = protos
	for _, p := range protos {
		g.supported[p.name]++
	}
}

// awaitJoin parks a JoinGroup of m. A JoinGroup already parked for m (a
// client retry) is answered first so the connection's response order is
// never stuck behind it.
func (g *group) awaitJoin(m *member, ch chan *kmsg.JoinGroupResponse, superseded *kmsg.JoinGroupResponse) {
	if m.joinCh != nil {
		if superseded == nil {
			superseded = joinError(m.id, kerr.RebalanceInProgress.Code)
		}
		m.joinCh <- superseded
	} else {
		g.numAwaiting++
	}
	m.joinCh = ch
}

// answerJoin answers m's parked JoinGroup, if any.
func (g *group) answerJoin(m *member, r *kmsg.JoinGroupResponse) bool {
	if m.joinCh == nil {
		return false
	}
	m.joinCh <- r
	m.joinCh = nil
	g.numAwaiting--
	return true
}

// answerSync answers m's parked SyncGroup, if any.
func answerSync(m *member, r syncResult) bool {
	if m.syncCh == nil {
		return false
	}
	m.syncCh <- r
	m.syncCh = nil
	return true
}

// allJoined is Kafka's hasAllMembersJoined.
func (g *group) allJoined() bool {
	return g.numAwaiting == len(g.members) && len(g.pending) == 0
}

// supports is Kafka's supportsProtocols: an empty group takes any
// non-empty type and protocol list; otherwise the type must match and at
// least one protocol must be supported by every current member.
func (g *group) supports(protocolType string, protos []protocol) bool {
	if g.state == Empty {
		return protocolType != "" && len(protos) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range protos {
		if g.supported[p.name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's selectProtocol: among the protocols every
// member supports, each member votes for its most preferred one and the
// most voted wins. Kafka breaks ties by hash-map order; we take the
// lexicographically smallest name so the choice is deterministic.
func (g *group) selectProtocol() string {
	n := len(g.members)
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.supported[p.name] == n {
				votes[p.name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for name, v := range votes {
		if v > bestVotes || (v == bestVotes && name < best) {
			best, bestVotes = name, v
		}
	}
	return best
}

// rebalanceTimeout is the longest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// fenced is Kafka's isStaticMemberFenced: instanceID names a static member
// whose current member id is not memberID.
func (g *group) fenced(instanceID *string, memberID string) bool {
	if instanceID == nil {
		return false
	}
	cur, ok := g.static[*instanceID]
	return ok && cur != memberID
}

// maybeElectJoinedLeader is Kafka's maybeElectNewJoinedLeader: a leader
// that has not rejoined is replaced by any member that has.
func (g *group) maybeElectJoinedLeader() bool {
	l := g.members[g.leader]
	if l == nil {
		return false
	}
	if l.joinCh != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.joinCh != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// snapshot is the group's durable form; assignment, when not nil,
// overrides the members' stored assignments (the leader's SyncGroup is
// stored before it is applied).
func (g *group) snapshot(now time.Time, assignment map[string][]byte) GroupSnapshot {
	s := GroupSnapshot{
		Group: g.id, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader,
		Generation: g.generation, StateTimestamp: now.UnixMilli(), Members: []MemberSnapshot{},
	}
	if g.state == Empty {
		s.Leader = ""
	}
	for _, m := range g.sortedMembers() {
		a := m.assignment
		if assignment != nil {
			a = assignment[m.id]
		}
		s.Members = append(s.Members, MemberSnapshot{
			MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			RebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond), SessionTimeoutMs: int32(m.sessionTimeout / time.Millisecond),
			Subscription: m.metadataFor(g.protocol), Assignment: a,
		})
	}
	return s
}
