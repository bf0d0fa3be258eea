package group

// JoinGroup: the first step of a rebalance. The request is dispatched by
// what the coordinator knows of the member: unknown (KIP-394 two-step
// join, a new member id), a static member rejoining (KIP-345, replacing
// the old member id), or a known member; the reply parks until the join
// phase completes (rebalance.go).

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func protocolsOf(req *kmsg.JoinGroupRequest) []protocol {
	out := make([]protocol, 0, len(req.Protocols))
	for _, p := range req.Protocols {
		out = append(out, protocol{name: p.Name, metadata: p.Metadata})
	}
	return out
}

// acceptJoiningLocked is Kafka's acceptJoiningMember (group.max.size).
func (c *Coordinator) acceptJoiningLocked(g *group, memberID string) bool {
	if c.o.MaxSize <= 0 {
		return true
	}
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		m := g.members[memberID]
		return (m != nil && m.joinCh != nil) || g.numAwaiting < c.o.MaxSize
	default:
		return g.members[memberID] != nil || len(g.members) < c.o.MaxSize
	}
}

// JoinGroup handles a JoinGroup request (all versions). It blocks until
// the join phase completes for this member, or ctx ends (then it returns
// REBALANCE_IN_PROGRESS; the connection is gone anyway).
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	clientID, clientHost := clientOf(ctx)
	resp, wait := c.join(req, clientID, clientHost)
	if resp == nil {
		select {
		case resp = <-wait:
		case <-ctx.Done():
			resp = joinError(req.MemberID, kerr.RebalanceInProgress.Code)
		}
	}
	resp.Version = req.Version
	if resp.Version < 7 && resp.Protocol == nil {
		resp.Protocol = kmsg.StringPtr("")
	}
	return resp
}

func (c *Coordinator) join(req *kmsg.JoinGroupRequest, clientID, clientHost string) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.checkLocked(req.Group, false); code != 0 {
		return joinError(req.MemberID, code), nil
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalance = session
	}
	if session < c.o.MinSessionTimeout || session > c.o.MaxSessionTimeout {
		return joinError(req.MemberID, kerr.InvalidSessionTimeout.Code), nil
	}
	var instanceID *string
	if req.Version >= 5 && req.InstanceID != nil {
		instanceID = req.InstanceID
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != unknownMemberID {
			return joinError(req.MemberID, kerr.UnknownMemberID.Code), nil
		}
		g = newGroup(req.Group, PartitionFor(req.Group, c.o.Partitions), c.now())
		c.groups[req.Group] = g
	}
	if !c.acceptJoiningLocked(g, req.MemberID) {
		if m := g.members[req.MemberID]; m != nil {
			c.removeMemberAndUpdateLocked(g, m, "over group.max.size")
		}
		return joinError(req.MemberID, kerr.GroupMaxSizeReached.Code), nil
	}
	j := &joinReq{memberID: req.MemberID, instanceID: instanceID, clientID: clientID, clientHost: clientHost,
		protocolType: req.ProtocolType, protocols: protocolsOf(req), session: session, rebalance: rebalance,
		requireKnownID: req.Version >= 4 && instanceID == nil}
	var resp *kmsg.JoinGroupResponse
	var wait chan *kmsg.JoinGroupResponse
	if req.MemberID == unknownMemberID {
		resp, wait = c.joinUnknownLocked(g, j)
	} else {
		resp, wait = c.joinKnownLocked(g, j)
	}
	if g.state == PreparingRebalance {
		c.tryCompleteJoinLocked(g)
	}
	return resp, wait
}

// joinReq is a JoinGroup's member-side fields.
type joinReq struct {
	memberID, clientID, clientHost string
	instanceID                     *string
	protocolType                   string
	protocols                      []protocol
	session, rebalance             time.Duration
	requireKnownID                 bool
}

// joinUnknownLocked is Kafka's doNewMemberJoin / doUnknownJoinGroup.
func (c *Coordinator) joinUnknownLocked(g *group, j *joinReq) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	if g.state == Dead {
		return joinError(j.memberID, kerr.CoordinatorNotAvailable.Code), nil
	}
	if !g.supports(j.protocolType, j.protocols) {
		return joinError(j.memberID, kerr.InconsistentGroupProtocol.Code), nil
	}
	newID := j.clientID + "-" + uuid.NewString()
	if j.instanceID != nil {
		if old, ok := g.static[*j.instanceID]; ok && g.members[old] != nil {
			return c.replaceStaticLocked(g, old, newID, j)
		}
		return nil, c.addMemberAndRebalanceLocked(g, newID, j)
	}
	if j.requireKnownID {
		// KIP-394: hand out the id; the member must rejoin with it within
		// its session timeout, or the id is forgotten.
		c.schedulePendingLocked(g, newID, j.session)
		return joinError(newID, kerr.MemberIDRequired.Code), nil
	}
	return nil, c.addMemberAndRebalanceLocked(g, newID, j)
}

// addMemberAndRebalanceLocked is Kafka's addMemberAndRebalance.
func (c *Coordinator) addMemberAndRebalanceLocked(g *group, id string, j *joinReq) chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m := &member{id: id, instanceID: j.instanceID, clientID: j.clientID, clientHost: j.clientHost,
		rebalanceTimeout: j.rebalance, sessionTimeout: j.session, protocolType: j.protocolType,
		protocols: j.protocols, isNew: true, joinCh: ch}
	if g.state == PreparingRebalance && g.generation == 0 {
		g.newMemberAdd = true
	}
	g.add(m)
	// A new member cannot heartbeat and a parked JoinGroup cannot notice a
	// client that went away: bound its stay (Kafka's new-member timeout).
	c.scheduleHeartbeatLocked(g, m, newMemberJoinTimeout)
	c.maybePrepareRebalanceLocked(g, "new member "+id+" joined")
	return ch
}

// replaceStaticLocked is Kafka's updateStaticMemberAndRebalance: a known
// group.instance.id rejoining without its member id takes over the old
// member under a new id; the old id is fenced from now on. In a Stable
// group whose selected protocol would not change, there is no rebalance:
// the group is stored and the member answered with the current generation
// (and the old leader id, so the member does not act as leader); its
// SyncGroup then returns the stored assignment.
func (c *Coordinator) replaceStaticLocked(g *group, oldID, newID string, j *joinReq) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	m := g.members[oldID]
	curLeader := g.leader
	oldProtos, oldRebalance, oldSession := m.protocols, m.rebalanceTimeout, m.sessionTimeout
	// The old member's parked requests are answered: it is fenced.
	g.answerJoin(m, joinError(oldID, kerr.FencedInstanceID.Code))
	answerSync(m, syncResult{code: kerr.FencedInstanceID.Code})
	c.renameMemberLocked(g, m, newID)
	c.scheduleHeartbeatLocked(g, m, j.session)
	g.setProtocols(m, j.protocols)
	m.rebalanceTimeout, m.sessionTimeout = j.rebalance, j.session
	m.clientID, m.clientHost = j.clientID, j.clientHost
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	switch g.state {
	case Stable:
		if g.selectProtocol() != g.protocol {
			g.awaitJoin(m, ch, nil)
			c.prepareRebalanceLocked(g, "static member "+*j.instanceID+" rejoined with other protocols")
			return nil, ch
		}
		gen := g.generation
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			attempted, err := c.store(g, func() bool { return g.members[newID] == m && g.generation == gen }, nil)
			c.mu.Lock()
			defer c.mu.Unlock()
			if !attempted {
				ch <- joinError(newID, kerr.RebalanceInProgress.Code)
				return
			}
			if err != nil {
				if g.members[newID] == m {
					c.renameMemberLocked(g, m, oldID)
					g.setProtocols(m, oldProtos)
					m.rebalanceTimeout, m.sessionTimeout = oldRebalance, oldSession
				}
				ch <- joinError(newID, storeErrorCode(err))
				return
			}
			r := c.joinResultLocked(g, newID)
			r.Generation = gen
			r.LeaderID = curLeader
			ch <- r
		}()
		return nil, ch
	case CompletingRebalance:
		// The leader may be assigning to the old id: start over.
		g.awaitJoin(m, ch, nil)
		c.prepareRebalanceLocked(g, "static member "+*j.instanceID+" rejoined during CompletingRebalance")
		return nil, ch
	default: // PreparingRebalance
		g.awaitJoin(m, ch, nil)
		return nil, ch
	}
}

// renameMemberLocked gives m a new member id, keeping leadership and the
// static mapping (Kafka's replaceStaticMember).
func (c *Coordinator) renameMemberLocked(g *group, m *member, newID string) {
	oldID := m.id
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = newID
	}
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
}

// joinKnownLocked is Kafka's doCurrentMemberJoin.
func (c *Coordinator) joinKnownLocked(g *group, j *joinReq) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	id := j.memberID
	if g.state == Dead {
		return joinError(id, kerr.CoordinatorNotAvailable.Code), nil
	}
	if !g.supports(j.protocolType, j.protocols) {
		return joinError(id, kerr.InconsistentGroupProtocol.Code), nil
	}
	if p := g.pending[id]; p != nil {
		if p.timer != nil {
			p.timer.Stop()
		}
		return nil, c.addMemberAndRebalanceLocked(g, id, j)
	}
	if g.fenced(j.instanceID, id) {
		return joinError(id, kerr.FencedInstanceID.Code), nil
	}
	m := g.members[id]
	if m == nil || (j.instanceID != nil && g.static[*j.instanceID] == "") {
		return joinError(id, kerr.UnknownMemberID.Code), nil
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	update := func(reason string) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
		g.setProtocols(m, j.protocols)
		m.rebalanceTimeout, m.sessionTimeout = j.rebalance, j.session
		g.awaitJoin(m, ch, joinError(id, kerr.RebalanceInProgress.Code))
		c.maybePrepareRebalanceLocked(g, reason)
		return nil, ch
	}
	switch g.state {
	case PreparingRebalance:
		return update("member " + id + " rejoined")
	case CompletingRebalance:
		if m.matches(j.protocols) {
			// It missed the JoinGroup answer: repeat it.
			r := c.joinResultLocked(g, id)
			if id == g.leader {
				for _, o := range g.sortedMembers() {
					r.Members = append(r.Members, kmsg.JoinGroupResponseMember{MemberID: o.id, InstanceID: o.instanceID, ProtocolMetadata: o.metadataFor(g.protocol)})
				}
			}
			return r, nil
		}
		return update("member " + id + " changed its metadata")
	case Stable:
		if id == g.leader || !m.matches(j.protocols) {
			// The leader rejoining forces a rebalance (topic metadata
			// changes); so does any change of a member's metadata (an
			// incremental cooperative rebalance's second join).
			return update("member " + id + " rejoined a stable group")
		}
		r := c.joinResultLocked(g, id)
		return r, nil
	default: // Empty
		return joinError(id, kerr.UnknownMemberID.Code), nil
	}
}
