package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

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
	return c.validateCommit(name, generation, memberID, instanceID, false)
}

// ValidateTxnCommit checks a TxnOffsetCommit against the group, as Kafka's
// validateOffsetCommit does for transactional commits: as ValidateCommit,
// except that a commit without generation, member id and instance id (v0-v2
// requests carry none) is accepted whatever the group's state, and
// CompletingRebalance is no REBALANCE_IN_PROGRESS (a transaction may
// commit across a rebalance; its fencing is the producer epoch). It does
// not count as a heartbeat.
func (c *Coordinator) ValidateTxnCommit(name string, generation int32, memberID string, instanceID *string) error {
	return c.validateCommit(name, generation, memberID, instanceID, true)
}

func (c *Coordinator) validateCommit(name string, generation int32, memberID string, instanceID *string, txn bool) error {
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
	} else if g.state != Empty && !txn {
		return codeErr(name, kerr.UnknownMemberID.Code)
	}
	if txn {
		return nil
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

// StoreErrorCode is the error code a client is told when a write of its
// group's records failed with err (the mapping of a group metadata store).
func StoreErrorCode(err error) int16 { return storeErrorCode(err) }
