package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/errcode"
)

// Defaults of the Kafka settings the coordinator takes.
const (
	DefaultPartitions            = 50                 // offsets.topic.num.partitions
	DefaultInitialRebalanceDelay = 3 * time.Second    // group.initial.rebalance.delay.ms
	DefaultMinSessionTimeout     = 6 * time.Second    // group.min.session.timeout.ms
	DefaultMaxSessionTimeout     = 30 * time.Minute   // group.max.session.timeout.ms
	newMemberJoinTimeout         = 5 * time.Minute    // Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
	storeTimeout                 = 5 * time.Second    // offsets.commit.timeout.ms: bound of one group store
	authorizedOpsOmitted         = -2147483648        // "not requested" in DescribeGroups v3+
	groupOperations              = 1<<3 | 1<<6 | 1<<8 // READ, DELETE, DESCRIBE: the GROUP resource's operations
	classicGroupType             = "classic"          // ListGroups v5 GroupType of every group here
	unknownMemberID              = ""                 // JoinGroupRequest.UNKNOWN_MEMBER_ID
	noGeneration                 = -1                 // generation of error answers
)

// Options configure a [Coordinator]. Zero values take Kafka's defaults.
type Options struct {
	// Now overrides the clock's time (the real clock's when Clock is nil).
	Now func() time.Time
	// Clock drives every timer; nil is the real clock. Tests pass a fake.
	Clock Clock
	// Persister stores group metadata when a rebalance completes; nil
	// keeps groups in memory only.
	Persister Persister
	// Partitions is offsets.topic.num.partitions (group -> partition).
	Partitions int32
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (Kafka's
	// default is [DefaultInitialRebalanceDelay]); zero means none.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout are
	// group.min.session.timeout.ms and group.max.session.timeout.ms.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxSize is group.max.size; 0 is unlimited.
	MaxSize int
	Logger  *slog.Logger
	// Registry, if set, gets the group metrics (unregistered by Close).
	Registry prometheus.Registerer
}

// Coordinator runs the classic group protocol for the groups of the
// __consumer_offsets partitions this broker leads. It is safe for
// concurrent use; JoinGroup and SyncGroup block until the rebalance step
// they wait for completes (or ctx ends).
type Coordinator struct {
	o         Options
	clock     Clock
	persister Persister
	logger    *slog.Logger
	metrics   *metrics

	mu     sync.Mutex // guards groups, parts, closed and every group's and member's fields
	groups map[string]*group
	parts  map[int32]PartitionState
	closed bool

	bg sync.WaitGroup // asynchronous stores (a group that emptied)
}

// NewCoordinator returns a coordinator owning no partition yet: the broker
// marks partitions Loading, loads them with [Coordinator.LoadGroup] and
// marks them Loaded.
func NewCoordinator(o Options) *Coordinator {
	if o.Partitions <= 0 {
		o.Partitions = DefaultPartitions
	}
	o.InitialRebalanceDelay = max(o.InitialRebalanceDelay, 0)
	if o.MinSessionTimeout <= 0 {
		o.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if o.MaxSessionTimeout <= 0 {
		o.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{o: o, persister: o.Persister, logger: o.Logger,
		groups: map[string]*group{}, parts: map[int32]PartitionState{}}
	c.clock = o.Clock
	if c.clock == nil {
		c.clock = realClock{now: o.Now}
	}
	c.metrics = newMetrics(c)
	if o.Registry != nil {
		if err := o.Registry.Register(c.metrics); err != nil {
			c.logger.Warn("group: metrics not registered", "err", err)
			c.metrics.registered = false
		} else {
			c.metrics.registered = true
		}
	}
	return c
}

func (c *Coordinator) now() time.Time {
	if c.o.Now != nil {
		return c.o.Now()
	}
	return c.clock.Now()
}

// Close stops every timer and answers every waiting JoinGroup and
// SyncGroup with NOT_COORDINATOR. Later requests get
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for _, g := range c.groups {
		c.dropGroupLocked(g, kerr.NotCoordinator.Code)
	}
	c.groups = map[string]*group{}
	c.mu.Unlock()
	c.bg.Wait()
	if c.metrics.registered {
		c.o.Registry.Unregister(c.metrics)
	}
}

// ErrorCode returns the Kafka error code an error of this package carries
// (0 for nil, UNKNOWN_SERVER_ERROR for an error without one): the shared
// mapping of internal/errcode.
func ErrorCode(err error) int16 { return errcode.Code(err) }

func codeErr(group string, code int16) error {
	return fmt.Errorf("group: %q: %w", group, kerr.ErrorForCode(code))
}

// storeErrorCode maps a Persister error to what clients are told, as
// Kafka's storeGroup callback does: the log is gone or under-replicated →
// COORDINATOR_NOT_AVAILABLE; leadership moved → NOT_COORDINATOR; records
// too large → UNKNOWN_SERVER_ERROR. An error without a Kafka code (an I/O
// error) becomes COORDINATOR_NOT_AVAILABLE, which clients retry.
func storeErrorCode(err error) int16 {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.CoordinatorNotAvailable.Code
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
		return kerr.UnknownServerError.Code
	}
	return ke.Code
}

// checkLocked is Kafka's validateGroupStatus: a usable group id on a
// partition this broker has loaded. allowEmpty admits "" (OffsetCommit,
// OffsetFetch, DescribeGroups, DeleteGroups do, for old clients).
func (c *Coordinator) checkLocked(id string, allowEmpty bool) int16 {
	if c.closed {
		return kerr.CoordinatorNotAvailable.Code
	}
	if id == "" && !allowEmpty {
		return kerr.InvalidGroupID.Code
	}
	switch c.parts[PartitionFor(id, c.o.Partitions)] {
	case Loading:
		return kerr.CoordinatorLoadInProgress.Code
	case NotOwned:
		return kerr.NotCoordinator.Code
	}
	return 0
}

func (c *Coordinator) transitionLocked(g *group, s State) {
	g.state = s
	g.stateTime = c.now()
}

// SetPartitionState records what this broker is for a __consumer_offsets
// partition. Loading or NotOwned drops the partition's groups from memory
// (their waiting requests get NOT_COORDINATOR): a load starts from
// nothing. Loaded starts the session timers of the loaded members and
// rebalances a loaded group that is over group.max.size.
func (c *Coordinator) SetPartitionState(partition int32, st PartitionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.parts[partition]
	c.parts[partition] = st
	switch st {
	case Loading, NotOwned:
		if prev == Loading && st == Loading {
			return // LoadGroup may already have filled some groups in
		}
		for id, g := range c.groups {
			if g.partition == partition {
				c.dropGroupLocked(g, kerr.NotCoordinator.Code)
				delete(c.groups, id)
			}
		}
	case Loaded:
		for _, g := range c.groups {
			if g.partition == partition && prev != Loaded {
				c.onLoadedLocked(g)
			}
		}
	}
}

// onLoadedLocked is Kafka's onGroupLoaded.
func (c *Coordinator) onLoadedLocked(g *group) {
	for _, m := range g.members {
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
	}
	if c.o.MaxSize > 0 && len(g.members) > c.o.MaxSize {
		c.prepareRebalanceLocked(g, "loaded group is over group.max.size")
	}
}

// dropGroupLocked voids g: timers stopped, waiters answered with code.
func (c *Coordinator) dropGroupLocked(g *group, code int16) {
	g.resigned = true
	g.state = Dead
	c.stopTimersLocked(g)
	for _, m := range g.members {
		g.answerJoin(m, joinError(m.id, code))
		answerSync(m, syncResult{code: code})
	}
}

func (c *Coordinator) stopTimersLocked(g *group) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq++
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	g.syncSeq++
	for _, m := range g.members {
		if m.hbTimer != nil {
			m.hbTimer.Stop()
		}
		m.hbSeq++
	}
	for _, p := range g.pending {
		if p.timer != nil {
			p.timer.Stop()
		}
	}
	g.pending = map[string]*pendingMember{}
}

// isTombstone reports whether a loaded snapshot is the "remove" the loader
// hands over for a group whose newest record is a tombstone: nothing but
// the name set.
func isTombstone(s GroupSnapshot) bool {
	return s.Members == nil && s.ProtocolType == "" && s.Protocol == "" && s.Leader == "" && s.Generation == 0
}

// LoadGroup installs a group read back from partition's log, replacing
// any group of that name; a tombstone snapshot (only Group set) removes
// it. A group with members loads Stable, one without Empty. Timers start
// when the partition is marked Loaded (at once if it already is).
func (c *Coordinator) LoadGroup(partition int32, s GroupSnapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.groups[s.Group]; old != nil {
		c.dropGroupLocked(old, kerr.NotCoordinator.Code)
		delete(c.groups, s.Group)
	}
	if isTombstone(s) {
		return
	}
	g := newGroup(s.Group, partition, c.now())
	if s.StateTimestamp > 0 {
		g.stateTime = time.UnixMilli(s.StateTimestamp)
	}
	g.protocolType, g.protocol, g.generation = s.ProtocolType, s.Protocol, s.Generation
	for _, ms := range s.Members {
		m := &member{id: ms.MemberID, instanceID: ms.InstanceID, clientID: ms.ClientID, clientHost: ms.ClientHost,
			rebalanceTimeout: time.Duration(ms.RebalanceTimeoutMs) * time.Millisecond,
			sessionTimeout:   time.Duration(ms.SessionTimeoutMs) * time.Millisecond,
			protocolType:     s.ProtocolType, protocols: []protocol{{name: s.Protocol, metadata: ms.Subscription}},
			assignment: ms.Assignment}
		g.add(m)
	}
	g.protocolType = s.ProtocolType
	if len(g.members) > 0 {
		g.state = Stable
		if g.members[s.Leader] != nil {
			g.leader = s.Leader
		}
	} else {
		g.leader = ""
	}
	c.groups[s.Group] = g
	if c.parts[partition] == Loaded {
		c.onLoadedLocked(g)
	}
}

// EnsureGroup registers an Empty group of that name on partition if none
// is known: for a group that only has committed offsets (simple consumers
// commit without membership, and no GroupMetadata record exists), so it
// is listed, described and deletable as in Kafka.
func (c *Coordinator) EnsureGroup(partition int32, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[name] == nil {
		c.groups[name] = newGroup(name, partition, c.now())
	}
}

// RemoveEmptyGroup removes group if it is Empty and reports whether it
// did: offsets retention calls it for an Empty group whose last offset
// expired (the caller then writes the group's tombstone).
func (c *Coordinator) RemoveEmptyGroup(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil || g.state != Empty {
		return false
	}
	c.dropGroupLocked(g, kerr.NotCoordinator.Code)
	delete(c.groups, name)
	return true
}

// GroupState returns the Kafka name of group's state, and false if the
// group is not known here.
func (c *Coordinator) GroupState(name string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[name]
	if g == nil {
		return "", false
	}
	return g.state.String(), true
}

// ValidateCommit checks an OffsetCommit against the group, as Kafka's
// validateOffsetCommit and doCommitOffsets do, and returns nil or an error
// wrapping the kerr error to answer for every partition of the request.
// A commit with generation -1, no member id and no instance id is a
// "simple" commit: allowed only when the group is Empty or unknown (an
// unknown group is then created Empty, as Kafka does). A member commit in
// Stable or PreparingRebalance also counts as a heartbeat.
func (c *Coordinator) ValidateCommit(name string, generation int32, memberID string, instanceID *string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.checkLocked(name, true); code != 0 {
		return codeErr(name, code)
	}
	g := c.groups[name]
	if g == nil {
		if generation >= 0 {
			return codeErr(name, kerr.IllegalGeneration.Code)
		}
		g = newGroup(name, PartitionFor(name, c.o.Partitions), c.now())
		c.groups[name] = g
	}
	if g.state == Dead {
		return codeErr(name, kerr.CoordinatorNotAvailable.Code)
	}
	if generation >= 0 || memberID != unknownMemberID || instanceID != nil {
		switch {
		case g.fenced(instanceID, memberID):
			return codeErr(name, kerr.FencedInstanceID.Code)
		case g.members[memberID] == nil:
			return codeErr(name, kerr.UnknownMemberID.Code)
		case generation != g.generation:
			return codeErr(name, kerr.IllegalGeneration.Code)
		}
	} else if g.state != Empty {
		return codeErr(name, kerr.UnknownMemberID.Code)
	}
	switch g.state {
	case CompletingRebalance:
		return codeErr(name, kerr.RebalanceInProgress.Code)
	case Stable, PreparingRebalance:
		if m := g.members[memberID]; m != nil {
			c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		}
	}
	return nil
}

// ---- timers ----

// scheduleHeartbeatLocked (re)starts m's session timer (Kafka's
// completeAndScheduleNextHeartbeatExpiration).
func (c *Coordinator) scheduleHeartbeatLocked(g *group, m *member, d time.Duration) {
	if m.hbTimer != nil {
		m.hbTimer.Stop()
	}
	m.hbSeq++
	seq := m.hbSeq
	m.hbTimer = c.clock.AfterFunc(d, func() { c.onHeartbeatExpire(g, m, seq) })
}

// onHeartbeatExpire is Kafka's onExpireHeartbeat. A member whose JoinGroup
// or SyncGroup is parked counts as alive (unless it is new: its parked
// join is the new-member timeout); its timer restarts when that request is
// answered.
func (c *Coordinator) onHeartbeatExpire(g *group, m *member, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g.resigned || g.deleted || m.hbSeq != seq || g.members[m.id] != m || g.state == Dead {
		return
	}
	if !m.isNew && (m.joinCh != nil || m.syncCh != nil) {
		return
	}
	c.logger.Info("group: member session expired", "group", g.id, "member", m.id)
	c.removeMemberAndUpdateLocked(g, m, "session timeout")
}

// schedulePendingLocked starts the KIP-394 timer of a handed-out member id.
func (c *Coordinator) schedulePendingLocked(g *group, id string, d time.Duration) {
	p := &pendingMember{}
	g.pending[id] = p
	p.timer = c.clock.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if g.pending[id] != p || g.resigned || g.deleted {
			return
		}
		delete(g.pending, id)
		if g.state == PreparingRebalance {
			c.tryCompleteJoinLocked(g)
		}
	})
}

func (c *Coordinator) scheduleJoinLocked(g *group, d time.Duration) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq++
	seq := g.joinSeq
	g.joinTimer = c.clock.AfterFunc(d, func() { c.onJoinTimer(g, seq) })
}

// onJoinTimer is the expiry of DelayedJoin or InitialDelayedJoin. The
// initial delay is extended by another step (at most the configured delay,
// at most what is left of the rebalance timeout) while new members keep
// arriving, as Kafka's InitialDelayedJoin.onComplete does.
func (c *Coordinator) onJoinTimer(g *group, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g.joinSeq != seq || g.resigned || g.deleted || g.state != PreparingRebalance {
		return
	}
	if g.initialDelay && g.newMemberAdd && g.remaining > 0 {
		g.newMemberAdd = false
		d := min(c.o.InitialRebalanceDelay, g.remaining)
		g.remaining = max(g.remaining-g.delay, 0)
		g.delay = d
		c.scheduleJoinLocked(g, d)
		return
	}
	c.completeJoinLocked(g)
}

func (c *Coordinator) scheduleSyncLocked(g *group) {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	g.syncSeq++
	seq, gen := g.syncSeq, g.generation
	g.syncTimer = c.clock.AfterFunc(g.rebalanceTimeout(), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if g.syncSeq != seq || g.generation != gen || g.resigned || g.deleted {
			return
		}
		if (g.state == CompletingRebalance || g.state == Stable) && len(g.pendingSync) > 0 {
			ids := make([]string, 0, len(g.pendingSync))
			for id := range g.pendingSync {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				if m := g.remove(id); m != nil {
					g.answerJoin(m, joinError(unknownMemberID, kerr.UnknownMemberID.Code))
					answerSync(m, syncResult{code: kerr.UnknownMemberID.Code})
				}
			}
			c.prepareRebalanceLocked(g, "members did not sync within the rebalance timeout")
		}
	})
}

// ---- the rebalance ----

// maybePrepareRebalanceLocked starts a rebalance if the state allows one.
func (c *Coordinator) maybePrepareRebalanceLocked(g *group, reason string) {
	if g.state.canRebalance() {
		c.prepareRebalanceLocked(g, reason)
	}
}

// prepareRebalanceLocked is Kafka's prepareRebalance: waiting SyncGroups
// are told REBALANCE_IN_PROGRESS, and the group waits for its members to
// rejoin; the first rebalance of an Empty group waits the initial delay.
func (c *Coordinator) prepareRebalanceLocked(g *group, reason string) {
	c.logger.Info("group: preparing rebalance", "group", g.id, "generation", g.generation, "reason", reason)
	if g.state == CompletingRebalance {
		c.resetAndPropagateLocked(g, kerr.RebalanceInProgress.Code)
	}
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	g.syncSeq++
	wasEmpty := g.state == Empty
	c.transitionLocked(g, PreparingRebalance)
	if wasEmpty && c.o.InitialRebalanceDelay > 0 {
		g.initialDelay = true
		g.delay = c.o.InitialRebalanceDelay
		g.remaining = max(g.rebalanceTimeout()-c.o.InitialRebalanceDelay, 0)
		c.scheduleJoinLocked(g, g.delay)
		return
	}
	g.initialDelay = false
	c.scheduleJoinLocked(g, g.rebalanceTimeout())
	c.tryCompleteJoinLocked(g)
}

// tryCompleteJoinLocked completes the join phase once every member has
// rejoined and no handed-out member id is outstanding (DelayedJoin's
// tryComplete; the initial delay only ends by its timer).
func (c *Coordinator) tryCompleteJoinLocked(g *group) {
	if g.state == PreparingRebalance && !g.initialDelay && g.allJoined() {
		c.completeJoinLocked(g)
	}
}

// completeJoinLocked is Kafka's onCompleteJoin: dynamic members that did
// not rejoin are removed (static ones stay until their session ends), a
// leader is chosen among those that rejoined, the generation is bumped
// and every waiting JoinGroup answered; the leader gets all members'
// metadata.
func (c *Coordinator) completeJoinLocked(g *group) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq++
	g.initialDelay = false
	for _, m := range g.sortedMembers() {
		if m.joinCh == nil && m.instanceID == nil {
			c.logger.Info("group: removing member that did not rejoin", "group", g.id, "member", m.id)
			g.remove(m.id)
			answerSync(m, syncResult{code: kerr.UnknownMemberID.Code})
		}
	}
	if !g.maybeElectJoinedLeader() && len(g.members) > 0 {
		// Only static members that did not rejoin are left: wait another
		// rebalance timeout for them (or their sessions) to end.
		c.scheduleJoinLocked(g, g.rebalanceTimeout())
		return
	}
	g.generation++
	g.pendingSync = map[string]bool{}
	if len(g.members) == 0 {
		g.protocol = ""
		g.leader = ""
		c.transitionLocked(g, Empty)
		c.metrics.rebalances.Inc()
		c.storeAsyncLocked(g)
		return
	}
	g.protocol = g.selectProtocol()
	c.transitionLocked(g, CompletingRebalance)
	c.metrics.rebalances.Inc()
	var all []kmsg.JoinGroupResponseMember
	for _, m := range g.sortedMembers() {
		all = append(all, kmsg.JoinGroupResponseMember{MemberID: m.id, InstanceID: m.instanceID, ProtocolMetadata: m.metadataFor(g.protocol)})
	}
	for _, m := range g.sortedMembers() {
		g.pendingSync[m.id] = true
		r := c.joinResultLocked(g, m.id)
		if m.id == g.leader {
			r.Members = all
		}
		g.answerJoin(m, r)
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		m.isNew = false
	}
	c.scheduleSyncLocked(g)
}

// joinResultLocked is a successful JoinGroup answer for the current
// generation (members filled in by the caller for the leader).
func (c *Coordinator) joinResultLocked(g *group, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Generation = g.generation
	r.ProtocolType = kmsg.StringPtr(g.protocolType)
	r.Protocol = kmsg.StringPtr(g.protocol)
	r.LeaderID = g.leader
	r.MemberID = memberID
	return r
}

func joinError(memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode = code
	r.Generation = noGeneration
	r.MemberID = memberID
	return r
}

// resetAndPropagateLocked clears every assignment and answers every
// waiting SyncGroup with code.
func (c *Coordinator) resetAndPropagateLocked(g *group, code int16) {
	for _, m := range g.sortedMembers() {
		m.assignment = nil
		if answerSync(m, syncResult{code: code}) {
			c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		}
	}
}

// removeMemberAndUpdateLocked is Kafka's removeMemberAndUpdateGroup.
func (c *Coordinator) removeMemberAndUpdateLocked(g *group, m *member, reason string) {
	g.answerJoin(m, joinError(unknownMemberID, kerr.UnknownMemberID.Code))
	g.remove(m.id)
	answerSync(m, syncResult{code: kerr.UnknownMemberID.Code})
	switch g.state {
	case Stable, CompletingRebalance:
		c.maybePrepareRebalanceLocked(g, reason)
	case PreparingRebalance:
		c.tryCompleteJoinLocked(g)
	}
}

// ---- persistence ----

// store appends g's snapshot under g.storeMu (so appends reach the log in
// snapshot order). valid, checked under c.mu before the snapshot, says
// whether the store is still wanted; assignment is passed to snapshot.
// It returns whether a store was attempted, and its error.
func (c *Coordinator) store(g *group, valid func() bool, assignment map[string][]byte) (bool, error) {
	g.storeMu.Lock()
	defer g.storeMu.Unlock()
	c.mu.Lock()
	if g.resigned || g.deleted || !valid() {
		c.mu.Unlock()
		return false, nil
	}
	snap := g.snapshot(c.now(), assignment)
	c.mu.Unlock()
	if c.persister == nil {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	err := c.persister.StoreGroup(ctx, g.partition, snap)
	if err != nil {
		c.logger.Warn("group: storing group metadata failed", "group", g.id, "err", err)
	}
	return true, err
}

// storeAsyncLocked stores g (just emptied) off the caller's goroutine: it
// may be a timer callback holding c.mu.
func (c *Coordinator) storeAsyncLocked(g *group) {
	gen := g.generation
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		c.store(g, func() bool { return g.generation == gen && g.state == Empty }, nil)
	}()
}

// ---- requests ----

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

// SyncGroup handles a SyncGroup request (all versions). Followers wait for
// the leader's assignment; the leader's assignment is stored
// ([Persister.StoreGroup]) before anyone is answered.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = req.Version
	res, wait, leaderStore := c.sync(req)
	if leaderStore != nil {
		leaderStore()
	}
	if wait != nil {
		select {
		case res = <-wait:
		case <-ctx.Done():
			res = syncResult{code: kerr.RebalanceInProgress.Code}
		}
	}
	resp.ErrorCode = res.code
	if res.code == 0 {
		resp.MemberAssignment = res.assignment
		c.mu.Lock()
		if g := c.groups[req.Group]; g != nil {
			resp.ProtocolType = kmsg.StringPtr(g.protocolType)
			resp.Protocol = kmsg.StringPtr(g.protocol)
		}
		c.mu.Unlock()
	}
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

func (c *Coordinator) sync(req *kmsg.SyncGroupRequest) (syncResult, chan syncResult, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(code int16) (syncResult, chan syncResult, func()) { return syncResult{code: code}, nil, nil }
	if code := c.checkLocked(req.Group, false); code != 0 {
		return fail(code)
	}
	g := c.groups[req.Group]
	var instanceID *string
	if req.Version >= 3 {
		instanceID = req.InstanceID
	}
	switch {
	case g == nil:
		return fail(kerr.UnknownMemberID.Code)
	case g.state == Dead:
		return fail(kerr.CoordinatorNotAvailable.Code)
	case g.fenced(instanceID, req.MemberID):
		return fail(kerr.FencedInstanceID.Code)
	case g.members[req.MemberID] == nil:
		return fail(kerr.UnknownMemberID.Code)
	case req.Generation != g.generation:
		return fail(kerr.IllegalGeneration.Code)
	case req.Version >= 5 && req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Version >= 5 && req.Protocol != nil && *req.Protocol != g.protocol:
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		return fail(kerr.UnknownMemberID.Code)
	case PreparingRebalance:
		return fail(kerr.RebalanceInProgress.Code)
	case Stable:
		delete(g.pendingSync, m.id)
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		return syncResult{assignment: m.assignment}, nil, nil
	}
	// CompletingRebalance
	ch := make(chan syncResult, 1)
	answerSync(m, syncResult{code: kerr.RebalanceInProgress.Code})
	m.syncCh = ch
	delete(g.pendingSync, m.id)
	if m.id != g.leader {
		return syncResult{}, ch, nil
	}
	gen := g.generation
	assignment := map[string][]byte{}
	for _, a := range req.GroupAssignment {
		if g.members[a.MemberID] != nil {
			assignment[a.MemberID] = a.MemberAssignment
		}
	}
	for id := range g.members {
		if assignment[id] == nil {
			assignment[id] = []byte{}
		}
	}
	still := func() bool { return g.state == CompletingRebalance && g.generation == gen }
	return syncResult{}, ch, func() {
		attempted, err := c.store(g, still, assignment)
		c.mu.Lock()
		defer c.mu.Unlock()
		if !attempted || !still() || g.resigned || g.deleted {
			return // the group moved on; waiters were answered by that move
		}
		if err != nil {
			g.lastStoreError = storeErrorCode(err)
			c.resetAndPropagateLocked(g, g.lastStoreError)
			c.maybePrepareRebalanceLocked(g, "storing the assignment failed")
			return
		}
		for id, mm := range g.members {
			mm.assignment = assignment[id]
		}
		c.transitionLocked(g, Stable)
		for _, mm := range g.sortedMembers() {
			if answerSync(mm, syncResult{assignment: mm.assignment}) {
				c.scheduleHeartbeatLocked(g, mm, mm.sessionTimeout)
			}
		}
	}
}

// Heartbeat handles a Heartbeat request (all versions).
func (c *Coordinator) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.Version
	var instanceID *string
	if req.Version >= 3 {
		instanceID = req.InstanceID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.checkLocked(req.Group, false); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	g := c.groups[req.Group]
	switch {
	case g == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case g.state == Dead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case g.fenced(instanceID, req.MemberID):
		resp.ErrorCode = kerr.FencedInstanceID.Code
	case g.members[req.MemberID] == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		resp.ErrorCode = kerr.IllegalGeneration.Code
	case g.state == Empty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	default:
		m := g.members[req.MemberID]
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout)
		if g.state == PreparingRebalance {
			resp.ErrorCode = kerr.RebalanceInProgress.Code
		}
	}
	return resp
}

// LeaveGroup handles a LeaveGroup request: v0-v2 one member id, v3+ a
// batch of member identities (member id, or instance id alone for an
// administrative removal of a static member).
func (c *Coordinator) LeaveGroup(_ context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.checkLocked(req.Group, false); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	g := c.groups[req.Group]
	if g != nil && g.state == Dead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	for _, l := range leaving {
		r := kmsg.NewLeaveGroupResponseMember()
		r.MemberID, r.InstanceID = l.MemberID, l.InstanceID
		r.ErrorCode = c.leaveOneLocked(g, l)
		resp.Members = append(resp.Members, r)
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	return resp
}

func (c *Coordinator) leaveOneLocked(g *group, l kmsg.LeaveGroupRequestMember) int16 {
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	reason := "member left"
	if l.Reason != nil {
		reason += ": " + *l.Reason
	}
	switch {
	case l.MemberID == unknownMemberID:
		if l.InstanceID == nil {
			return kerr.UnknownMemberID.Code
		}
		id, ok := g.static[*l.InstanceID]
		if !ok || g.members[id] == nil {
			return kerr.UnknownMemberID.Code
		}
		c.removeMemberAndUpdateLocked(g, g.members[id], reason)
	case g.pending[l.MemberID] != nil:
		if t := g.pending[l.MemberID].timer; t != nil {
			t.Stop()
		}
		delete(g.pending, l.MemberID)
		if g.state == PreparingRebalance {
			c.tryCompleteJoinLocked(g)
		}
	case g.fenced(l.InstanceID, l.MemberID):
		return kerr.FencedInstanceID.Code
	case g.members[l.MemberID] != nil:
		c.removeMemberAndUpdateLocked(g, g.members[l.MemberID], reason)
	default:
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// DescribeGroups handles a DescribeGroups request (all versions). Member
// metadata and assignments are filled only for a Stable group, as Kafka
// does. An unknown group is described as Dead (v6+: GROUP_ID_NOT_FOUND).
func (c *Coordinator) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = req.Version
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = id
		if req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = groupOperations
		}
		if code := c.checkLocked(id, true); code != 0 {
			d.ErrorCode = code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		g := c.groups[id]
		if g == nil || g.state == Dead {
			d.State = Dead.String()
			if req.Version >= 6 {
				d.ErrorCode = kerr.GroupIDNotFound.Code
				d.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("group %s not found", id))
			}
			resp.Groups = append(resp.Groups, d)
			continue
		}
		d.State = g.state.String()
		d.ProtocolType = g.protocolType
		if g.state == Stable {
			d.Protocol = g.protocol
		}
		for _, m := range g.sortedMembers() {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
			dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
			if g.state == Stable {
				dm.ProtocolMetadata = m.metadataFor(g.protocol)
				if m.assignment != nil {
					dm.MemberAssignment = m.assignment
				}
			}
			d.Members = append(d.Members, dm)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// ListGroups handles a ListGroups request (all versions): the groups of
// the loaded partitions, filtered by state (v4+, case-insensitive) and
// type (v5+: every group here is "classic"). While any partition loads,
// the answer carries COORDINATOR_LOAD_IN_PROGRESS with what is loaded.
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.Version
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	for _, st := range c.parts {
		if st == Loading {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		}
	}
	match := func(v string, filter []string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	ids := make([]string, 0, len(c.groups))
	for id := range c.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		g := c.groups[id]
		if g.state == Dead || c.parts[g.partition] != Loaded {
			continue
		}
		if (req.Version >= 4 && !match(g.state.String(), req.StatesFilter)) ||
			(req.Version >= 5 && !match(classicGroupType, req.TypesFilter)) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, g.protocolType, g.state.String(), classicGroupType
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

// DeleteGroups handles a DeleteGroups request (all versions): an Empty
// group is marked Dead, its metadata and offsets tombstoned
// ([Persister.DeleteGroup]) and it is forgotten; a group with members gets
// NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND. If the tombstones
// cannot be written the group goes back to Empty and the error is
// answered.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = req.Version
	var doomed []*group
	results := map[string]int16{}
	c.mu.Lock()
	for _, id := range req.Groups {
		if _, dup := results[id]; dup {
			continue
		}
		if code := c.checkLocked(id, true); code != 0 {
			results[id] = code
			continue
		}
		g := c.groups[id]
		switch {
		case g == nil || g.state == Dead:
			results[id] = kerr.GroupIDNotFound.Code
		case g.state == Empty:
			c.transitionLocked(g, Dead)
			results[id] = 0
			doomed = append(doomed, g)
		default:
			results[id] = kerr.NonEmptyGroup.Code
		}
	}
	c.mu.Unlock()
	for _, g := range doomed {
		g.storeMu.Lock()
		var err error
		if c.persister != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			err = c.persister.DeleteGroup(sctx, g.partition, g.id)
			cancel()
		}
		c.mu.Lock()
		if c.groups[g.id] == g {
			if err != nil {
				results[g.id] = storeErrorCode(err)
				c.transitionLocked(g, Empty)
			} else {
				g.deleted = true
				c.stopTimersLocked(g)
				delete(c.groups, g.id)
			}
		}
		c.mu.Unlock()
		g.storeMu.Unlock()
	}
	for _, id := range req.Groups {
		code, ok := results[id]
		if !ok {
			continue
		}
		delete(results, id)
		r := kmsg.NewDeleteGroupsResponseGroup()
		r.Group, r.ErrorCode = id, code
		resp.Groups = append(resp.Groups, r)
	}
	return resp
}
