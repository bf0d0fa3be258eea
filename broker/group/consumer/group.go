package consumer

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Special member epochs of ConsumerGroupHeartbeat.
const (
	// JoinEpoch joins (or rejoins after being fenced).
	JoinEpoch int32 = 0
	// LeaveEpoch leaves the group for good.
	LeaveEpoch int32 = -1
	// StaticLeaveEpoch is a static member (instance id) leaving
	// temporarily: it keeps its assignment for a member rejoining with the
	// same instance id until its session times out.
	StaticLeaveEpoch int32 = -2
)

// Config holds the group.consumer.* settings the core applies.
type Config struct {
	// SessionTimeoutMs is group.consumer.session.timeout.ms (45 s): a
	// member not heard from for this long is fenced.
	SessionTimeoutMs int32
	// HeartbeatIntervalMs is group.consumer.heartbeat.interval.ms (5 s),
	// returned to members.
	HeartbeatIntervalMs int32
	// MaxSize is group.consumer.max.size; 0 is unbounded.
	MaxSize int
	// Assignors is group.consumer.assignors; the first is the default.
	Assignors []Assignor
	// NewMemberID generates the member id of a version-0 join that did
	// not bring one (version 1 clients generate their own). Nil: a random
	// UUID.
	NewMemberID func() string
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{SessionTimeoutMs: 45000, HeartbeatIntervalMs: 5000, Assignors: Assignors()}
}

// Client is the connection a heartbeat came on.
type Client struct{ ID, Host string }

// TopicImage is the cluster's topics by name, as the caller's metadata
// image has them at the time of a call.
type TopicImage map[string]Topic

// Member is one member of a consumer group: its subscription (the
// ConsumerGroupMemberMetadata record) and its current assignment (the
// ConsumerGroupCurrentMemberAssignment record).
type Member struct {
	ID                   string
	InstanceID           string
	RackID               string
	ClientID, ClientHost string
	SubscribedTopicNames []string // sorted
	SubscribedTopicRegex string
	RebalanceTimeoutMs   int32
	ServerAssignor       string

	Epoch, PreviousEpoch int32
	State                MemberState
	Assigned             Assignment
	PendingRevocation    Assignment

	// Classic is set for a member speaking the classic protocol
	// (JoinGroup/SyncGroup/Heartbeat) inside this consumer group, after
	// an online upgrade ([FromClassic]); nil for a consumer-protocol
	// member.
	Classic *ClassicMetadata
}

func (m *Member) clone() *Member {
	n := *m
	n.Classic = m.Classic.clone()
	n.SubscribedTopicNames = slices.Clone(m.SubscribedTopicNames)
	n.Assigned = m.Assigned.Clone()
	n.PendingRevocation = m.PendingRevocation.Clone()
	return &n
}

// setEpoch is Kafka's updateMemberEpoch: the epoch before becomes the
// previous one (a member whose response was lost may retry with it).
func (m *Member) setEpoch(e int32) { m.PreviousEpoch, m.Epoch = m.Epoch, e }

func (m *Member) sameMetadata(o *Member) bool {
	return m.InstanceID == o.InstanceID && m.RackID == o.RackID && m.ClientID == o.ClientID &&
		m.ClientHost == o.ClientHost && slices.Equal(m.SubscribedTopicNames, o.SubscribedTopicNames) &&
		m.SubscribedTopicRegex == o.SubscribedTopicRegex && m.RebalanceTimeoutMs == o.RebalanceTimeoutMs &&
		m.ServerAssignor == o.ServerAssignor && m.Classic.equal(o.Classic)
}

func (m *Member) sameSubscription(o *Member) bool {
	return slices.Equal(m.SubscribedTopicNames, o.SubscribedTopicNames) && m.SubscribedTopicRegex == o.SubscribedTopicRegex
}

func (m *Member) sameAssignment(o *Member) bool {
	return m.Epoch == o.Epoch && m.PreviousEpoch == o.PreviousEpoch && m.State == o.State &&
		m.Assigned.Equal(o.Assigned) && m.PendingRevocation.Equal(o.PendingRevocation)
}

// GroupState is a consumer group's state as ConsumerGroupDescribe and
// ListGroups report it.
type GroupState string

// The consumer group states (Kafka's ConsumerGroup.ConsumerGroupState).
const (
	StateEmpty       GroupState = "Empty"
	StateAssigning   GroupState = "Assigning"
	StateReconciling GroupState = "Reconciling"
	StateStable      GroupState = "Stable"
)

// Group is one consumer group's state machine. It is not safe for
// concurrent use: the caller serialises calls per group (Kafka's
// coordinator runs one partition's groups on one thread).
type Group struct {
	ID  string
	cfg Config

	// Epoch is the group epoch, bumped by every membership, subscription
	// or subscribed-topic metadata change.
	Epoch int32
	// MetadataHash digests the subscribed topics' metadata (names, IDs,
	// partition counts, racks) at Epoch (KIP-1101): a change bumps Epoch.
	MetadataHash int64
	// TargetEpoch is the epoch Target was computed at; Epoch > TargetEpoch
	// means a new target is due (the group is Assigning).
	TargetEpoch int32
	Target      map[string]Assignment
	Members     map[string]*Member

	// Derived, rebuilt from Members: the epoch of each held partition's
	// owner (assigned or pending revocation).
	owners map[tp]int32
	// Timers, not persisted (re-armed by [Group.Loaded]).
	session   map[string]int64
	rebalance map[string]rebalanceTimer
	// joinBy is, per classic member told to rejoin (REBALANCE_IN_PROGRESS
	// on its Heartbeat), when it is fenced unless it rejoined (Kafka's
	// consumer group join timeout: its rebalance timeout).
	joinBy map[string]int64
	// syncBy is, per classic member whose JoinGroup was answered, when it
	// is fenced unless its SyncGroup came (Kafka's consumer group sync
	// timeout: its rebalance timeout).
	syncBy  map[string]int64
	regexes map[string]*regexp.Regexp
	// Subscription counts over Members (derived): how many members name
	// each topic, and use each regex. They make the metadata hash cost
	// the number of subscribed topics, not of members.
	subNames map[string]int
	subRegex map[string]int
}

type rebalanceTimer struct {
	epoch int32
	at    int64
}

// NewGroup returns an empty group.
func NewGroup(id string, cfg Config) *Group {
	if len(cfg.Assignors) == 0 {
		cfg.Assignors = Assignors()
	}
	return &Group{
		ID: id, cfg: cfg,
		Target: map[string]Assignment{}, Members: map[string]*Member{},
		owners: map[tp]int32{}, session: map[string]int64{}, rebalance: map[string]rebalanceTimer{}, joinBy: map[string]int64{}, syncBy: map[string]int64{},
		regexes: map[string]*regexp.Regexp{}, subNames: map[string]int{}, subRegex: map[string]int{},
	}
}

// SetTimeouts sets the group's session timeout and heartbeat interval (a
// group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms,
// KIP-848's group configs, else the broker's settings: the caller passes
// the effective values); values <= 0 keep the current ones. A changed
// session timeout applies from each member's next heartbeat, a changed
// interval to the next response, as in Kafka.
func (g *Group) SetTimeouts(sessionTimeoutMs, heartbeatIntervalMs int32) {
	if sessionTimeoutMs > 0 {
		g.cfg.SessionTimeoutMs = sessionTimeoutMs
	}
	if heartbeatIntervalMs > 0 {
		g.cfg.HeartbeatIntervalMs = heartbeatIntervalMs
	}
}

// sessionTimeout is m's session timeout: its own (JoinGroup's) for a
// classic member, else the group's.
func (g *Group) sessionTimeout(m *Member) int32 {
	if m.Classic != nil && m.Classic.SessionTimeoutMs > 0 {
		return m.Classic.SessionTimeoutMs
	}
	return g.cfg.SessionTimeoutMs
}

// State is the group's state.
func (g *Group) State() GroupState {
	switch {
	case len(g.Members) == 0:
		return StateEmpty
	case g.Epoch > g.TargetEpoch:
		return StateAssigning
	}
	for _, m := range g.Members {
		if m.State != Stable || m.Epoch != g.TargetEpoch {
			return StateReconciling
		}
	}
	return StateStable
}

// Result is a heartbeat's outcome: the response to send and the records to
// persist first (in order). On an error response Records is empty and the
// group is unchanged.
type Result struct {
	Response *kmsg.ConsumerGroupHeartbeatResponse
	Records  []Record
}

type hbError struct {
	err *kerr.Error
	msg string
}

func fail(e *kerr.Error, format string, args ...any) *hbError {
	return &hbError{e, fmt.Sprintf(format, args...)}
}

// Heartbeat processes one ConsumerGroupHeartbeat (Kafka's
// GroupMetadataManager.consumerGroupHeartbeat) at time now (ms), with the
// topics as img has them.
func (g *Group) Heartbeat(now int64, req *kmsg.ConsumerGroupHeartbeatRequest, c Client, img TopicImage) Result {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = req.Version
	var (
		recs []Record
		herr *hbError
	)
	if herr = g.validate(req); herr == nil {
		if req.MemberEpoch == LeaveEpoch || req.MemberEpoch == StaticLeaveEpoch {
			recs, herr = g.leave(now, req, resp, img)
		} else {
			recs, herr = g.heartbeat(now, req, c, resp, img, nil)
		}
	}
	if herr != nil {
		resp.ErrorCode = herr.err.Code
		resp.ErrorMessage = kmsg.StringPtr(herr.msg)
		return Result{Response: resp}
	}
	return Result{Response: resp, Records: recs}
}

// validate is Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid.
func (g *Group) validate(req *kmsg.ConsumerGroupHeartbeatRequest) *hbError {
	switch {
	case blank(&req.MemberID) && (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == LeaveEpoch):
		// Version 1 clients generate their member id (KIP-1082).
		return fail(kerr.InvalidRequest, "MemberId can't be empty.")
	case blank(&req.Group):
		return fail(kerr.InvalidRequest, "GroupId can't be empty.")
	case req.InstanceID != nil && blank(req.InstanceID):
		return fail(kerr.InvalidRequest, "InstanceId can't be empty.")
	case req.RackID != nil && blank(req.RackID):
		return fail(kerr.InvalidRequest, "RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == JoinEpoch:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return fail(kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request.")
		case req.Topics == nil || len(req.Topics) > 0:
			return fail(kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return fail(kerr.InvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case req.MemberEpoch == StaticLeaveEpoch && req.InstanceID == nil:
		return fail(kerr.InvalidRequest, "InstanceId can't be null.")
	case req.MemberEpoch < StaticLeaveEpoch:
		return fail(kerr.InvalidRequest, "MemberEpoch is invalid.")
	}
	if req.ServerAssignor != nil && g.assignor(*req.ServerAssignor) == nil {
		return fail(kerr.UnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %s.", *req.ServerAssignor, g.assignorNames())
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := g.compile(*req.SubscribedTopicRegex); err != nil {
			return fail(kerr.InvalidRegularExpression, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *req.SubscribedTopicRegex, err)
		}
	}
	return nil
}

// blank reports whether *s is empty or only white space (Kafka trims).
func blank(s *string) bool { return strings.TrimSpace(*s) == "" }

func (g *Group) assignor(name string) Assignor {
	for _, a := range g.cfg.Assignors {
		if a.Name() == name {
			return a
		}
	}
	return nil
}

func (g *Group) assignorNames() string {
	s := ""
	for i, a := range g.cfg.Assignors {
		if i > 0 {
			s += ", "
		}
		s += a.Name()
	}
	return s
}

// compile compiles a subscription regex matched on the whole topic name
// (Kafka's RE2J Pattern.matches); Go's regexp is RE2 too.
func (g *Group) compile(re string) (*regexp.Regexp, error) {
	if r, ok := g.regexes[re]; ok {
		return r, nil
	}
	r, err := regexp.Compile(`^(?:` + re + `)$`)
	if err != nil {
		return nil, err
	}
	g.regexes[re] = r
	return r, nil
}

// byInstance returns the member with instance id, or nil.
func (g *Group) byInstance(id string) *Member {
	for _, m := range g.Members {
		if m.InstanceID == id {
			return m
		}
	}
	return nil
}

// leave handles epochs -1 (leave) and -2 (static leave).
func (g *Group) leave(now int64, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse, img TopicImage) ([]Record, *hbError) {
	var m *Member
	if req.InstanceID != nil {
		m = g.byInstance(*req.InstanceID)
		if m == nil {
			return nil, fail(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		}
		if m.ID != req.MemberID {
			return nil, fail(kerr.FencedInstanceID, "Static member %s with instance id %s is not the owner of the instance id.", req.MemberID, *req.InstanceID)
		}
	} else if m = g.Members[req.MemberID]; m == nil {
		return nil, fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.ID)
	}
	resp.MemberID = kmsg.StringPtr(req.MemberID)
	resp.MemberEpoch = req.MemberEpoch
	if req.MemberEpoch == StaticLeaveEpoch {
		// The static member keeps its assignment (and its partitions stay
		// held) for a rejoin with its instance id; no new epoch.
		n := m.clone()
		n.setEpoch(StaticLeaveEpoch)
		g.install(n)
		g.session[n.ID] = now + int64(g.cfg.SessionTimeoutMs)
		delete(g.rebalance, n.ID)
		return []Record{g.currentAssignmentRecord(n)}, nil
	}
	return g.fence(m, img), nil
}

// fence removes m and bumps the group epoch (leave, session or rebalance
// timeout): Kafka's consumerGroupFenceMember.
func (g *Group) fence(m *Member, img TopicImage) []Record {
	recs := g.removeRecords(m)
	g.uninstall(m)
	delete(g.Target, m.ID)
	g.MetadataHash = g.metadataHash(img)
	g.Epoch++
	return append(recs, &GroupMetadataRecord{Group: g.ID, Epoch: g.Epoch, MetadataHash: g.MetadataHash})
}

func (g *Group) removeRecords(m *Member) []Record {
	return []Record{
		&CurrentAssignmentRecord{Group: g.ID, MemberID: m.ID, Deleted: true},
		&TargetMemberRecord{Group: g.ID, MemberID: m.ID, Deleted: true},
		&MemberMetadataRecord{Group: g.ID, MemberID: m.ID, Deleted: true},
	}
}

// install puts n in place of the member with its id, keeping the partition
// owners map in step.
func (g *Group) install(n *Member) {
	if old := g.Members[n.ID]; old != nil {
		g.dropOwners(old)
		g.count(old, -1)
	}
	g.count(n, 1)
	g.Members[n.ID] = n
	for _, a := range []Assignment{n.Assigned, n.PendingRevocation} {
		for t, ps := range a {
			for _, p := range ps {
				g.owners[tp{t, p}] = n.Epoch
			}
		}
	}
}

// count adds d to the subscription counts of m's names and regex.
func (g *Group) count(m *Member, d int) {
	for _, n := range m.SubscribedTopicNames {
		if g.subNames[n] += d; g.subNames[n] == 0 {
			delete(g.subNames, n)
		}
	}
	if re := m.SubscribedTopicRegex; re != "" {
		if g.subRegex[re] += d; g.subRegex[re] == 0 {
			delete(g.subRegex, re)
		}
	}
}

func (g *Group) uninstall(m *Member) {
	g.dropOwners(m)
	g.count(m, -1)
	delete(g.Members, m.ID)
	delete(g.session, m.ID)
	delete(g.rebalance, m.ID)
	delete(g.joinBy, m.ID)
	delete(g.syncBy, m.ID)
}

func (g *Group) dropOwners(m *Member) {
	for _, a := range []Assignment{m.Assigned, m.PendingRevocation} {
		for t, ps := range a {
			for _, p := range ps {
				delete(g.owners, tp{t, p})
			}
		}
	}
}

func (g *Group) ownerEpoch(t uuid.UUID, p int32) int32 {
	if e, ok := g.owners[tp{t, p}]; ok {
		return e
	}
	return -1
}

// heartbeat handles joins (epoch 0) and regular heartbeats.
//
// classic, when not nil, is a classic member's JoinGroup ([Group.ClassicJoin])
// expressed as this heartbeat: the member keeps that classic metadata.
func (g *Group) heartbeat(now int64, req *kmsg.ConsumerGroupHeartbeatRequest, c Client, resp *kmsg.ConsumerGroupHeartbeatResponse, img TopicImage, classic *ClassicMetadata) ([]Record, *hbError) {
	join := req.MemberEpoch == JoinEpoch
	memberID := req.MemberID
	var (
		old      *Member // the member as persisted before this heartbeat (nil: none)
		replaced *Member // a left static member this join takes over
	)
	owned := ownedAssignment(req.Topics, img)
	if req.InstanceID != nil {
		existing := g.byInstance(*req.InstanceID)
		switch {
		case join && existing != nil && existing.Epoch != StaticLeaveEpoch:
			return nil, fail(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s.", memberID, *req.InstanceID, existing.ID)
		case join && existing != nil:
			replaced = existing
		case !join && existing == nil:
			return nil, fail(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		case !join && existing.ID != memberID:
			return nil, fail(kerr.FencedInstanceID, "Static member %s with instance id %s is not the owner of the instance id.", memberID, *req.InstanceID)
		case !join:
			old = existing
		}
	} else {
		old = g.Members[memberID]
		if old == nil && !join {
			return nil, fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.ID)
		}
	}
	if old != nil && !join {
		if herr := checkEpoch(old, req.MemberEpoch, owned); herr != nil {
			return nil, herr
		}
	}
	if old != nil && old.State == UnknownState && (owned == nil || owned.Size() > 0) {
		// A state from a newer version: start over from nothing.
		return nil, fail(kerr.FencedMemberEpoch, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
	}
	if old == nil && replaced == nil && g.cfg.MaxSize > 0 && len(g.Members) >= g.cfg.MaxSize {
		return nil, fail(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", g.cfg.MaxSize)
	}
	if memberID == "" { // a version-0 join: the coordinator names the member
		memberID = g.newMemberID()
	}

	// The updated subscription: a field left null keeps its value.
	var n *Member
	switch {
	case old != nil:
		n = old.clone()
	case replaced != nil:
		// The new instance is the left member under a new id, from epoch
		// 0: its subscription and assignment carry over, so nothing moves
		// (Kafka copies the member the same way).
		n = replaced.clone()
		n.ID, n.Epoch, n.PreviousEpoch = memberID, 0, 0
	default:
		n = &Member{ID: memberID, Assigned: Assignment{}, PendingRevocation: Assignment{}, RebalanceTimeoutMs: -1}
		if req.InstanceID != nil {
			n.InstanceID = *req.InstanceID
		}
	}
	n.ClientID, n.ClientHost = c.ID, c.Host
	if req.RackID != nil {
		n.RackID = *req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		n.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.SubscribedTopicNames != nil {
		n.SubscribedTopicNames = slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
	}
	if req.SubscribedTopicRegex != nil {
		n.SubscribedTopicRegex = *req.SubscribedTopicRegex
	}
	if req.ServerAssignor != nil {
		n.ServerAssignor = *req.ServerAssignor
	}
	if classic != nil {
		n.Classic = classic.clone()
	}

	var recs []Record
	persisted := old // what the log says about this member id
	if persisted == nil {
		persisted = &Member{Assigned: Assignment{}, PendingRevocation: Assignment{}, RebalanceTimeoutMs: -1}
	}
	var bump bool
	if replaced != nil {
		// Kafka's replaceMember: the left instance's records go, the new
		// member id gets its subscription, target and assignment.
		recs = append(recs, g.removeRecords(replaced)...)
		carried, hasTarget := g.Target[replaced.ID]
		g.uninstall(replaced)
		delete(g.Target, replaced.ID)
		recs = append(recs, g.metadataRecord(n))
		if hasTarget {
			g.Target[n.ID] = carried
			recs = append(recs, &TargetMemberRecord{Group: g.ID, MemberID: n.ID, Partitions: carried.Clone()})
		}
		bump = !n.sameSubscription(replaced)
	} else {
		if !n.sameMetadata(persisted) {
			recs = append(recs, g.metadataRecord(n))
		}
		bump = old == nil || !n.sameSubscription(old)
	}
	// Install the subscription before hashing and assigning.
	g.install(n)

	if h := g.metadataHash(img); bump || h != g.MetadataHash {
		g.Epoch++
		g.MetadataHash = h
		recs = append(recs, &GroupMetadataRecord{Group: g.ID, Epoch: g.Epoch, MetadataHash: h})
	}
	if g.Epoch > g.TargetEpoch {
		recs = append(recs, g.computeTarget(img)...)
	}

	// Reconcile this member towards its target.
	prevAssigned := n.Assigned.Clone()
	r := reconcile(n, reconcileInput{
		targetEpoch: g.TargetEpoch,
		target:      g.Target[n.ID],
		subscribed:  g.subscribedIDs(n, img),
		owned:       owned,
		ownerEpoch:  g.ownerEpoch,
	})
	if r != n {
		g.install(r)
	}
	if !r.sameAssignment(persisted) || replaced != nil {
		recs = append(recs, g.currentAssignmentRecord(r))
	}

	g.session[r.ID] = now + int64(g.sessionTimeout(r))
	// The rebalance timeout runs from the step that asked the member to
	// revoke (Kafka reschedules it whenever the reconciliation changes the
	// member, and cancels it once nothing is left to revoke).
	if r != n {
		if r.State == UnrevokedPartitions {
			g.rebalance[r.ID] = rebalanceTimer{epoch: r.Epoch, at: now + int64(max(r.RebalanceTimeoutMs, 0))}
		} else {
			delete(g.rebalance, r.ID)
		}
	}

	resp.MemberID = kmsg.StringPtr(r.ID)
	resp.MemberEpoch = r.Epoch
	resp.HeartbeatIntervalMillis = g.cfg.HeartbeatIntervalMs
	// The assignment goes back on a join, on a full heartbeat (every
	// field set, as a client sends after an error), when it changed, or
	// when the member reports owning something else (a lost response).
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if join || full || !r.Assigned.Equal(prevAssigned) || (owned != nil && !owned.Equal(r.Assigned)) {
		resp.Assignment = responseAssignment(r.Assigned)
	}
	return recs, nil
}

// checkEpoch is Kafka's throwIfMemberEpochIsInvalid: an epoch ahead of the
// member's is fenced; one behind is accepted only when it is the previous
// epoch and the member owns a subset of its assignment (the response that
// bumped it was lost).
func checkEpoch(m *Member, epoch int32, owned Assignment) *hbError {
	if epoch > m.Epoch {
		return fail(kerr.FencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.Epoch)
	}
	if epoch < m.Epoch && (epoch != m.PreviousEpoch || owned == nil || !subset(owned, m.Assigned)) {
		return fail(kerr.FencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.Epoch)
	}
	return nil
}

func subset(a, b Assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if !b.Has(t, p) {
				return false
			}
		}
	}
	return true
}

// ownedAssignment converts a heartbeat's owned partitions; nil stays nil
// (not reported). Topic IDs are kept even when the image no longer has
// them: a member still reporting a deleted topic's partitions has not
// revoked them (as Kafka compares raw IDs).
func ownedAssignment(topics []kmsg.ConsumerGroupHeartbeatRequestTopic, img TopicImage) Assignment {
	if topics == nil {
		return nil
	}
	a := Assignment{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			a.add(t.TopicID, p)
		}
	}
	return a
}

func responseAssignment(a Assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	out.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, t := range a.topicIDs() {
		rt := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		rt.TopicID, rt.Partitions = t, slices.Clone(a[t])
		out.Topics = append(out.Topics, rt)
	}
	return &out
}

func (g *Group) newMemberID() string {
	if g.cfg.NewMemberID != nil {
		return g.cfg.NewMemberID()
	}
	return uuid.NewString()
}

func (g *Group) metadataRecord(m *Member) *MemberMetadataRecord {
	return &MemberMetadataRecord{
		Group: g.ID, MemberID: m.ID, InstanceID: m.InstanceID, RackID: m.RackID,
		ClientID: m.ClientID, ClientHost: m.ClientHost,
		SubscribedTopicNames: slices.Clone(m.SubscribedTopicNames), SubscribedTopicRegex: m.SubscribedTopicRegex,
		RebalanceTimeoutMs: m.RebalanceTimeoutMs, ServerAssignor: m.ServerAssignor,
		Classic: m.Classic.clone(),
	}
}

func (g *Group) currentAssignmentRecord(m *Member) *CurrentAssignmentRecord {
	return &CurrentAssignmentRecord{
		Group: g.ID, MemberID: m.ID, MemberEpoch: m.Epoch, PreviousMemberEpoch: m.PreviousEpoch,
		State: m.State, Assigned: m.Assigned.Clone(), PendingRevocation: m.PendingRevocation.Clone(),
	}
}

// subscribedTopics returns the topics member m subscribes to that exist:
// its names, and the topics its regex matches on the whole name. An
// internal topic is picked by a regex only where the regex spells its
// name out ([namesLiterally]): `__.*` never picks __consumer_offsets.
func (g *Group) subscribedTopics(m *Member, img TopicImage) []Topic {
	var out []Topic
	seen := map[string]bool{}
	for _, name := range m.SubscribedTopicNames {
		if t, ok := img[name]; ok && !seen[name] {
			seen[name] = true
			out = append(out, t)
		}
	}
	if m.SubscribedTopicRegex != "" {
		if re, err := g.compile(m.SubscribedTopicRegex); err == nil {
			for name, t := range img {
				if !seen[name] && re.MatchString(name) && (!t.Internal || namesLiterally(m.SubscribedTopicRegex, name)) {
					seen[name] = true
					out = append(out, t)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Topic) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func (g *Group) subscribedIDs(m *Member, img TopicImage) map[uuid.UUID]bool {
	ids := map[uuid.UUID]bool{}
	for _, t := range g.subscribedTopics(m, img) {
		ids[t.ID] = true
	}
	return ids
}

// metadataHash digests the metadata of every topic a member subscribes
// to (by name, or by a regex: internal topics excepted). Each topic's
// digest covers its name, ID, partition count and racks, mixed (mix64);
// the group's is their sum, which needs no sorting: a heartbeat pays one map lookup and
// a short FNV per subscribed topic (a regex costs a match per topic of
// the image; the wiring should cache that per image version).
func (g *Group) metadataHash(img TopicImage) int64 {
	var sum uint64
	seen := 0
	add := func(t Topic) {
		h := fnv.New64a()
		h.Write([]byte(t.Name))
		h.Write(t.ID[:])
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(t.Partitions))
		h.Write(n[:])
		for _, rs := range t.Racks {
			for _, r := range slices.Sorted(slices.Values(rs)) {
				h.Write([]byte(r))
				h.Write([]byte{','})
			}
			h.Write([]byte{0})
		}
		sum += mix64(h.Sum64())
		seen++
	}
	for name := range g.subNames {
		if t, ok := img[name]; ok {
			add(t)
		}
	}
	if len(g.subRegex) > 0 {
		var res []*regexp.Regexp
		var exprs []string
		for expr := range g.subRegex {
			if re, err := g.compile(expr); err == nil {
				res = append(res, re)
				exprs = append(exprs, expr)
			}
		}
		for name, t := range img {
			if g.subNames[name] > 0 {
				continue // already counted by name
			}
			for i, re := range res {
				if re.MatchString(name) && (!t.Internal || namesLiterally(exprs[i], name)) {
					add(t)
					break
				}
			}
		}
	}
	if seen == 0 {
		return 0
	}
	return int64(sum)
}

// preferredAssignor is the server assignor most members ask for (ties:
// the first in the configured order), else the default.
func (g *Group) preferredAssignor() Assignor {
	counts := map[string]int{}
	for _, m := range g.Members {
		if m.ServerAssignor != "" {
			counts[m.ServerAssignor]++
		}
	}
	best, n := g.cfg.Assignors[0], 0
	for _, a := range g.cfg.Assignors {
		if counts[a.Name()] > n {
			best, n = a, counts[a.Name()]
		}
	}
	return best
}

// computeTarget runs the assignor at the group epoch (Kafka's
// TargetAssignmentBuilder): a record per member whose target changed,
// then the target's epoch.
func (g *Group) computeTarget(img TopicImage) []Record {
	in := AssignInput{Topics: map[uuid.UUID]Topic{}}
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		spec := MemberSpec{ID: m.ID, InstanceID: m.InstanceID, Rack: m.RackID, Current: g.Target[m.ID]}
		for _, t := range g.subscribedTopics(m, img) {
			in.Topics[t.ID] = t
			spec.Topics = append(spec.Topics, t.ID)
		}
		in.Members = append(in.Members, spec)
	}
	out, err := g.preferredAssignor().Assign(in)
	if err != nil {
		// Member IDs are unique map keys: the assignors cannot fail here.
		panic(err)
	}
	var recs []Record
	for _, id := range slices.Sorted(maps.Keys(out)) {
		if prev, ok := g.Target[id]; !ok || !prev.Equal(out[id]) {
			recs = append(recs, &TargetMemberRecord{Group: g.ID, MemberID: id, Partitions: out[id].Clone()})
		}
	}
	g.Target = out
	g.TargetEpoch = g.Epoch
	return append(recs, &TargetMetadataRecord{Group: g.ID, AssignmentEpoch: g.TargetEpoch})
}

// MetadataChanged re-evaluates the subscribed topics against img (a topic
// created, deleted or grown, which may also change what a regex matches)
// and bumps the group epoch when their metadata differs; the new target
// is computed at the next heartbeat. It returns the records to persist.
func (g *Group) MetadataChanged(img TopicImage) []Record {
	if len(g.Members) == 0 {
		return nil
	}
	h := g.metadataHash(img)
	if h == g.MetadataHash {
		return nil
	}
	g.Epoch++
	g.MetadataHash = h
	return []Record{&GroupMetadataRecord{Group: g.ID, Epoch: g.Epoch, MetadataHash: h}}
}

// NextDeadline returns the earliest session or rebalance deadline, if any.
func (g *Group) NextDeadline() (int64, bool) {
	var at int64
	ok := false
	for _, d := range g.session {
		if !ok || d < at {
			at, ok = d, true
		}
	}
	for _, t := range g.rebalance {
		if !ok || t.at < at {
			at, ok = t.at, true
		}
	}
	for _, d := range g.joinBy {
		if !ok || d < at {
			at, ok = d, true
		}
	}
	for _, d := range g.syncBy {
		if !ok || d < at {
			at, ok = d, true
		}
	}
	return at, ok
}

// Expire fences every member whose session timed out by now, every
// member still holding partitions to revoke when its rebalance timeout
// ran out, every classic member told to rejoin that did not within its
// rebalance timeout, and every classic member whose JoinGroup was answered
// and that sent no SyncGroup within its rebalance timeout (Kafka's
// session, rebalance, join and sync timeouts), in member id order.
func (g *Group) Expire(now int64, img TopicImage) []Record {
	var recs []Record
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		expired := false
		if d, ok := g.session[id]; ok && d <= now {
			expired = true
		}
		if d, ok := g.joinBy[id]; ok && d <= now {
			expired = true
		}
		if d, ok := g.syncBy[id]; ok && d <= now {
			expired = true
		}
		if t, ok := g.rebalance[id]; ok && t.at <= now {
			if m.Epoch == t.epoch && m.State == UnrevokedPartitions {
				expired = true
			} else {
				delete(g.rebalance, id)
			}
		}
		if expired {
			recs = append(recs, g.fence(m, img)...)
		}
	}
	return recs
}

// Loaded arms the timers of a group rebuilt by [Replay], as Kafka's
// coordinator does on loading a partition: every member gets a full
// session from now, members still revoking a full rebalance timeout.
func (g *Group) Loaded(now int64) {
	for id, m := range g.Members {
		g.session[id] = now + int64(g.sessionTimeout(m))
		if m.State == UnrevokedPartitions {
			g.rebalance[id] = rebalanceTimer{epoch: m.Epoch, at: now + int64(max(m.RebalanceTimeoutMs, 0))}
		}
	}
}

// namesLiterally reports whether regular expression expr spells topic
// name out: the name, or its regexp.QuoteMeta form, appears verbatim in
// the expression (`orders|__consumer_offsets`; franz-go's
// `.*(?:(?:orders)|(?:__consumer_offsets)).*` for ConsumeTopics under
// ConsumeRegex). An internal topic is subscribed to by a regex only this
// way, and only if the regex also matches its whole name: `__.*` or
// `.*offsets` never pick __consumer_offsets.
func namesLiterally(expr, name string) bool {
	return strings.Contains(expr, name) || strings.Contains(expr, regexp.QuoteMeta(name))
}

// mix64 is splitmix64's finalizer, applied to each topic's FNV-1a digest
// before the sum: FNV-1a is linear in its last byte (the partition
// count's), so raw digests let one topic's count going up by one and
// another's going down by one cancel out in the sum, and the group epoch
// did not move (TestMetadataHashSeesOppositeCountChanges).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
