package sharegroup

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Epochs of ShareGroupHeartbeat.
const (
	JoinEpoch  int32 = 0
	LeaveEpoch int32 = -1
)

// Config is the coordinator's share group settings
// (group.share.session.timeout.ms, group.share.heartbeat.interval.ms,
// group.share.max.size); the shell passes a group's own
// share.session.timeout.ms / share.heartbeat.interval.ms through
// [Group.SetTimeouts].
type Config struct {
	SessionTimeoutMs    int32
	HeartbeatIntervalMs int32
	MaxSize             int
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{SessionTimeoutMs: 45000, HeartbeatIntervalMs: 5000, MaxSize: 200}
}

// Client is who sent a heartbeat.
type Client struct{ ID, Host string }

// Member is one member of a share group.
type Member struct {
	ID                   string
	Epoch, PreviousEpoch int32
	RackID               string
	ClientID, ClientHost string
	SubscribedTopicNames []string // sorted
	Assigned             Assignment
	// deadline is when the member is fenced unless it heartbeats (ms).
	deadline int64
}

func (m *Member) clone() *Member {
	c := *m
	c.SubscribedTopicNames = slices.Clone(m.SubscribedTopicNames)
	c.Assigned = m.Assigned.Clone()
	return &c
}

// GroupState is ShareGroupDescribe's / ListGroups' state of a share group.
type GroupState string

// Share group states (Kafka's ShareGroupState).
const (
	StateEmpty  GroupState = "Empty"
	StateStable GroupState = "Stable"
)

// Group is one share group. Not safe for concurrent use: the shell
// serialises calls.
type Group struct {
	ID              string
	Epoch           int32
	MetadataHash    int64
	AssignmentEpoch int32
	Members         map[string]*Member
	Target          map[string]Assignment
	// Initialized are the topic-partitions the group was ever assigned
	// (type 15's InitializedTopics): the share state to delete with the
	// group.
	Initialized map[uuid.UUID]StateTopic

	cfg                        Config
	sessionTimeout, hbInterval int32
	subCount                   map[string]int // topic name -> subscribers
}

// NewGroup returns an empty group.
func NewGroup(id string, cfg Config) *Group {
	return &Group{ID: id, cfg: cfg, Members: map[string]*Member{}, Target: map[string]Assignment{},
		Initialized: map[uuid.UUID]StateTopic{}, subCount: map[string]int{},
		sessionTimeout: cfg.SessionTimeoutMs, hbInterval: cfg.HeartbeatIntervalMs}
}

// SetTimeouts sets the group's effective session timeout and heartbeat
// interval (its share.* group configs, else the broker's); 0 keeps the
// broker's.
func (g *Group) SetTimeouts(sessionTimeoutMs, heartbeatIntervalMs int32) {
	g.sessionTimeout, g.hbInterval = g.cfg.SessionTimeoutMs, g.cfg.HeartbeatIntervalMs
	if sessionTimeoutMs > 0 {
		g.sessionTimeout = sessionTimeoutMs
	}
	if heartbeatIntervalMs > 0 {
		g.hbInterval = heartbeatIntervalMs
	}
}

// State is the group's state.
func (g *Group) State() GroupState {
	if len(g.Members) == 0 {
		return StateEmpty
	}
	return StateStable
}

// Result is a heartbeat's answer and the records to persist before it is
// sent.
type Result struct {
	Response *kmsg.ShareGroupHeartbeatResponse
	Records  []Record
}

type hbError struct {
	err *kerr.Error
	msg string
}

func fail(e *kerr.Error, format string, args ...any) *hbError {
	return &hbError{err: e, msg: fmt.Sprintf(format, args...)}
}

// maxMemberIDLen bounds a client-generated member id (a UUID string is 22
// or 36 characters), as kfake does.
const maxMemberIDLen = 36

// Validate checks a heartbeat as Kafka's
// throwIfShareGroupHeartbeatRequestIsInvalid (INVALID_REQUEST), before
// the group is looked up.
func Validate(req *kmsg.ShareGroupHeartbeatRequest) (*kerr.Error, string) {
	switch {
	case strings.TrimSpace(req.GroupID) == "":
		return kerr.InvalidRequest, "GroupId can't be empty."
	case strings.TrimSpace(req.MemberID) == "":
		return kerr.InvalidRequest, "MemberId can't be empty."
	case len(req.MemberID) > maxMemberIDLen:
		return kerr.InvalidRequest, fmt.Sprintf("MemberId can't be longer than %d characters.", maxMemberIDLen)
	case req.MemberEpoch < LeaveEpoch:
		return kerr.InvalidRequest, "MemberEpoch is invalid."
	case req.RackID != nil && strings.TrimSpace(*req.RackID) == "":
		return kerr.InvalidRequest, "RackId can't be empty."
	case req.MemberEpoch == JoinEpoch && len(req.SubscribedTopicNames) == 0:
		return kerr.InvalidRequest, "SubscribedTopicNames must be set in first request."
	}
	return nil, ""
}

// Heartbeat serves one ShareGroupHeartbeat at now (ms). An error answer
// changes nothing and has no records.
func (g *Group) Heartbeat(now int64, req *kmsg.ShareGroupHeartbeatRequest, c Client, img TopicImage) Result {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.Version = req.Version
	resp.HeartbeatIntervalMillis = g.hbInterval
	var recs []Record
	var e *hbError
	if code, msg := Validate(req); code != nil {
		e = &hbError{code, msg}
	} else if req.MemberEpoch == LeaveEpoch {
		recs, e = g.leave(req, resp, img)
	} else {
		recs, e = g.heartbeat(now, req, c, resp, img)
	}
	if e != nil {
		r := kmsg.NewPtrShareGroupHeartbeatResponse()
		r.Version = req.Version
		r.ErrorCode = e.err.Code
		if e.msg != "" {
			r.ErrorMessage = kmsg.StringPtr(e.msg)
		}
		return Result{Response: r}
	}
	return Result{Response: resp, Records: recs}
}

func (g *Group) leave(req *kmsg.ShareGroupHeartbeatRequest, resp *kmsg.ShareGroupHeartbeatResponse, img TopicImage) ([]Record, *hbError) {
	m := g.Members[req.MemberID]
	if m == nil {
		return nil, fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.ID)
	}
	resp.MemberID = kmsg.StringPtr(m.ID)
	resp.MemberEpoch = LeaveEpoch
	return g.remove(m, img), nil
}

// remove drops m: its records' tombstones, then the new group epoch and
// target.
func (g *Group) remove(m *Member, img TopicImage) []Record {
	recs := []Record{
		&CurrentAssignmentRecord{Group: g.ID, MemberID: m.ID, Deleted: true},
		&TargetMemberRecord{Group: g.ID, MemberID: m.ID, Deleted: true},
		&MemberMetadataRecord{Group: g.ID, MemberID: m.ID, Deleted: true},
	}
	g.uninstall(m)
	delete(g.Target, m.ID)
	g.Epoch++
	g.MetadataHash = g.metadataHash(img)
	recs = append(recs, &GroupMetadataRecord{Group: g.ID, Epoch: g.Epoch, MetadataHash: g.MetadataHash})
	return append(recs, g.computeTarget(img)...)
}

func (g *Group) install(m *Member) {
	if old := g.Members[m.ID]; old != nil {
		g.uninstall(old)
	}
	g.Members[m.ID] = m
	for _, t := range m.SubscribedTopicNames {
		g.subCount[t]++
	}
}

func (g *Group) uninstall(m *Member) {
	for _, t := range m.SubscribedTopicNames {
		if g.subCount[t]--; g.subCount[t] <= 0 {
			delete(g.subCount, t)
		}
	}
	delete(g.Members, m.ID)
}

func (g *Group) heartbeat(now int64, req *kmsg.ShareGroupHeartbeatRequest, c Client, resp *kmsg.ShareGroupHeartbeatResponse, img TopicImage) ([]Record, *hbError) {
	old := g.Members[req.MemberID]
	var m *Member
	switch {
	case old == nil && req.MemberEpoch != JoinEpoch:
		return nil, fail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.ID)
	case old == nil:
		if g.cfg.MaxSize > 0 && len(g.Members) >= g.cfg.MaxSize {
			return nil, fail(kerr.GroupMaxSizeReached, "The share group has reached its maximum capacity of %d members.", g.cfg.MaxSize)
		}
		m = &Member{ID: req.MemberID, Assigned: Assignment{}}
	case req.MemberEpoch != JoinEpoch && req.MemberEpoch != old.Epoch && req.MemberEpoch != old.PreviousEpoch:
		// Kafka accepts the previous epoch too: the answer that moved
		// the member on may have been lost.
		return nil, fail(kerr.FencedMemberEpoch, "The share group member has a smaller or larger member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, old.Epoch)
	default:
		m = old.clone()
	}
	m.ClientID, m.ClientHost = c.ID, c.Host
	if req.RackID != nil {
		m.RackID = *req.RackID
	}
	if req.SubscribedTopicNames != nil {
		m.SubscribedTopicNames = slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
	}
	m.deadline = now + int64(g.sessionTimeout)

	var recs []Record
	metaChanged := old == nil || old.RackID != m.RackID || old.ClientID != m.ClientID || old.ClientHost != m.ClientHost ||
		!slices.Equal(old.SubscribedTopicNames, m.SubscribedTopicNames)
	subChanged := old == nil || !slices.Equal(old.SubscribedTopicNames, m.SubscribedTopicNames)
	if metaChanged {
		recs = append(recs, g.memberMetadataRecord(m))
	}
	g.install(m)
	if hash := g.metadataHash(img); subChanged || hash != g.MetadataHash {
		g.Epoch++
		g.MetadataHash = hash
		recs = append(recs, &GroupMetadataRecord{Group: g.ID, Epoch: g.Epoch, MetadataHash: g.MetadataHash})
	}
	if g.AssignmentEpoch < g.Epoch {
		recs = append(recs, g.computeTarget(img)...)
	}
	// Share members take their target at once: no partition is revoked
	// first (a partition may have several consumers anyway).
	target := g.Target[m.ID]
	if target == nil {
		target = Assignment{}
	}
	changed := !m.Assigned.Equal(target)
	if m.Epoch != g.AssignmentEpoch || changed || old == nil {
		if m.Epoch != g.AssignmentEpoch {
			m.PreviousEpoch, m.Epoch = m.Epoch, g.AssignmentEpoch
		}
		m.Assigned = target.Clone()
		recs = append(recs, g.currentAssignmentRecord(m))
	}
	resp.MemberID = kmsg.StringPtr(m.ID)
	resp.MemberEpoch = m.Epoch
	if req.MemberEpoch == JoinEpoch || req.SubscribedTopicNames != nil || changed {
		resp.Assignment = responseAssignment(m.Assigned)
	}
	return recs, nil
}

func responseAssignment(a Assignment) *kmsg.ShareGroupHeartbeatResponseAssignment {
	out := new(kmsg.ShareGroupHeartbeatResponseAssignment)
	for _, t := range a.TopicIDs() {
		tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
		tp.TopicID = t
		tp.Partitions = slices.Clone(a[t])
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}

func (g *Group) memberMetadataRecord(m *Member) *MemberMetadataRecord {
	return &MemberMetadataRecord{Group: g.ID, MemberID: m.ID, RackID: m.RackID, ClientID: m.ClientID,
		ClientHost: m.ClientHost, SubscribedTopicNames: slices.Clone(m.SubscribedTopicNames)}
}

func (g *Group) currentAssignmentRecord(m *Member) *CurrentAssignmentRecord {
	return &CurrentAssignmentRecord{Group: g.ID, MemberID: m.ID, MemberEpoch: m.Epoch,
		PreviousMemberEpoch: m.PreviousEpoch, Assigned: m.Assigned.Clone()}
}

// metadataHash digests the subscribed topics' names, ids and partition
// counts (KIP-1101's role: a change bumps the group epoch): the sum of
// one mixed digest per topic, so no sorting. 0 when no subscribed topic
// exists.
func (g *Group) metadataHash(img TopicImage) int64 {
	var sum uint64
	for name := range g.subCount {
		t, ok := img[name]
		if !ok {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(t.Name))
		h.Write(t.ID[:])
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(t.Partitions))
		h.Write(n[:])
		sum += mix64(h.Sum64())
	}
	return int64(sum)
}

// mix64 is splitmix64's finalizer. Summing raw FNV-1a digests would
// collide: FNV-1a is linear in its last byte, so one topic's partition
// count going up by one and another's going down by one could leave the
// sum unchanged (found by TestGroupRandomRequests).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// computeTarget assigns at the group epoch and returns the changed target
// members, the target epoch, and the state metadata when new partitions
// got assigned.
func (g *Group) computeTarget(img TopicImage) []Record {
	byID := map[uuid.UUID]Topic{}
	for _, t := range img {
		byID[t.ID] = t
	}
	specs := make([]MemberSpec, 0, len(g.Members))
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		s := MemberSpec{ID: id}
		for _, name := range m.SubscribedTopicNames {
			if t, ok := img[name]; ok && !t.Internal {
				s.Topics = append(s.Topics, t.ID)
			}
		}
		specs = append(specs, s)
	}
	next := Simple(specs, byID, g.Target)
	var recs []Record
	for _, s := range specs {
		if a := next[s.ID]; !a.Equal(g.Target[s.ID]) || g.Target[s.ID] == nil {
			recs = append(recs, &TargetMemberRecord{Group: g.ID, MemberID: s.ID, Partitions: a.Clone()})
		}
	}
	g.Target = next
	g.AssignmentEpoch = g.Epoch
	recs = append(recs, &TargetMetadataRecord{Group: g.ID, AssignmentEpoch: g.AssignmentEpoch})
	if r := g.updateInitialized(byID); r != nil {
		recs = append(recs, r)
	}
	return recs
}

// updateInitialized adds the target's partitions to Initialized and drops
// deleted topics; the type 15 record when that changed.
func (g *Group) updateInitialized(byID map[uuid.UUID]Topic) Record {
	changed := false
	for t, st := range g.Initialized {
		if top, ok := byID[t]; !ok || top.Name != st.Name {
			delete(g.Initialized, t)
			changed = true
		}
	}
	for _, a := range g.Target {
		for t, ps := range a {
			st, ok := g.Initialized[t]
			if !ok {
				st = StateTopic{ID: t, Name: byID[t].Name}
			}
			for _, p := range ps {
				if i, found := slices.BinarySearch(st.Partitions, p); !found {
					st.Partitions = slices.Insert(st.Partitions, i, p)
					changed = true
				}
			}
			g.Initialized[t] = st
		}
	}
	if !changed {
		return nil
	}
	return g.stateRecord()
}

func (g *Group) stateRecord() *StatePartitionMetadataRecord {
	r := &StatePartitionMetadataRecord{Group: g.ID}
	for _, t := range slices.SortedFunc(maps.Keys(g.Initialized), func(a, b uuid.UUID) int { return strings.Compare(string(a[:]), string(b[:])) }) {
		st := g.Initialized[t]
		st.Partitions = slices.Clone(st.Partitions)
		r.Initialized = append(r.Initialized, st)
	}
	return r
}

// MetadataChanged is called when the topic image changed: a change of a
// subscribed topic bumps the group epoch and recomputes the target (the
// members pick it up at their next heartbeat).
func (g *Group) MetadataChanged(img TopicImage) []Record {
	if len(g.Members) == 0 {
		return nil
	}
	hash := g.metadataHash(img)
	if hash == g.MetadataHash {
		return nil
	}
	g.Epoch++
	g.MetadataHash = hash
	recs := []Record{&GroupMetadataRecord{Group: g.ID, Epoch: g.Epoch, MetadataHash: hash}}
	return append(recs, g.computeTarget(img)...)
}

// NextDeadline is the earliest session deadline of a member.
func (g *Group) NextDeadline() (int64, bool) {
	var at int64
	ok := false
	for _, m := range g.Members {
		if !ok || m.deadline < at {
			at, ok = m.deadline, true
		}
	}
	return at, ok
}

// Expire fences the members whose session timed out by now.
func (g *Group) Expire(now int64, img TopicImage) []Record {
	var recs []Record
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		if m := g.Members[id]; m.deadline <= now {
			recs = append(recs, g.remove(m, img)...)
		}
	}
	return recs
}

// Loaded gives every replayed member a fresh session (now + timeout), as
// Kafka schedules the session timers of a loaded group.
func (g *Group) Loaded(now int64) {
	for _, m := range g.Members {
		m.deadline = now + int64(g.sessionTimeout)
	}
}

// Partitions is the group's share-partitions with state (Initialized),
// sorted, for DeleteGroups.
func (g *Group) Partitions() []StateTopic {
	return g.stateRecord().Initialized
}

// DeleteRecords are the tombstones of an empty group's remaining records
// in Kafka's order (ShareGroup.createGroupTombstoneRecords: type 12, 15,
// 11) for DeleteGroups; nil while it has members.
func (g *Group) DeleteRecords() []Record {
	if len(g.Members) > 0 {
		return nil
	}
	return []Record{
		&TargetMetadataRecord{Group: g.ID, Deleted: true},
		&StatePartitionMetadataRecord{Group: g.ID, Deleted: true},
		&GroupMetadataRecord{Group: g.ID, Deleted: true},
	}
}

// Describe is the group's ShareGroupDescribe entry (topic names from img;
// a topic no longer in it is left out).
func (g *Group) Describe(img TopicImage) kmsg.ShareGroupDescribeResponseGroup {
	names := map[uuid.UUID]string{}
	for _, t := range img {
		names[t.ID] = t.Name
	}
	d := kmsg.NewShareGroupDescribeResponseGroup()
	d.GroupID = g.ID
	d.GroupState = string(g.State())
	d.GroupEpoch = g.Epoch
	d.AssignmentEpoch = g.AssignmentEpoch
	d.Assignor = AssignorName
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
		if m.RackID != "" {
			dm.RackID = kmsg.StringPtr(m.RackID)
		}
		dm.SubscribedTopicNames = slices.Clone(m.SubscribedTopicNames)
		for _, t := range m.Assigned.TopicIDs() {
			name, ok := names[t]
			if !ok {
				continue
			}
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = t, name, slices.Clone(m.Assigned[t])
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
		}
		d.Members = append(d.Members, dm)
	}
	return d
}
