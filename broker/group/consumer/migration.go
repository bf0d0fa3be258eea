package consumer

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MigrationPolicy is group.consumer.migration.policy (KIP-848's online
// migration between classic and consumer groups): which conversions a
// group id may go through while it has members.
type MigrationPolicy uint8

// Migration policies, Kafka's names.
const (
	// MigrationBidirectional (Kafka's default) allows both conversions.
	MigrationBidirectional MigrationPolicy = iota
	// MigrationUpgrade allows classic → consumer only.
	MigrationUpgrade
	// MigrationDowngrade allows consumer → classic only.
	MigrationDowngrade
	// MigrationDisabled allows neither: a group id with members keeps its
	// type (empty groups still change type, as in Kafka).
	MigrationDisabled
)

var migrationNames = [...]string{"bidirectional", "upgrade", "downgrade", "disabled"}

// ParseMigrationPolicy parses a policy name, case-insensitively as Kafka.
func ParseMigrationPolicy(s string) (MigrationPolicy, error) {
	for i, n := range migrationNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return MigrationPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("consumer: migration policy %q is not one of %s", s, strings.Join(migrationNames[:], ", "))
}

func (p MigrationPolicy) String() string {
	if int(p) < len(migrationNames) {
		return migrationNames[p]
	}
	return fmt.Sprintf("MigrationPolicy(%d)", uint8(p))
}

// UpgradeEnabled reports whether a classic group with members may become a
// consumer group.
func (p MigrationPolicy) UpgradeEnabled() bool {
	return p == MigrationBidirectional || p == MigrationUpgrade
}

// DowngradeEnabled reports whether a consumer group whose remaining members
// all speak the classic protocol may become a classic group.
func (p MigrationPolicy) DowngradeEnabled() bool {
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// CanUpgrade decides, as Kafka's validateOnlineUpgrade, whether a classic
// group with members (protocolType its protocol type, members its member
// count) may be converted into a consumer group when a consumer-protocol
// member joins it: the policy allows upgrades, the group is a consumer
// group of the classic protocol (protocol type "consumer": its members'
// subscriptions and assignments are ConsumerProtocol bytes the conversion
// reads), and its members fit group.consumer.max.size (maxSize, 0
// unbounded). The reason says why not; the caller then answers the joining
// member as for any classic group with members (GROUP_ID_NOT_FOUND, "Group
// %s is not a consumer group").
func CanUpgrade(p MigrationPolicy, protocolType string, members, maxSize int) (ok bool, reason string) {
	switch {
	case !p.UpgradeEnabled():
		return false, "online upgrade is disabled (group.consumer.migration.policy=" + p.String() + ")"
	case protocolType != "consumer":
		return false, fmt.Sprintf("the classic group's protocol type is %q, not consumer", protocolType)
	case maxSize > 0 && members > maxSize:
		return false, fmt.Sprintf("its %d members exceed group.consumer.max.size (%d)", members, maxSize)
	}
	return true, ""
}

// CanDowngrade decides, as Kafka's validateOnlineDowngradeWithFencedMember,
// whether g becomes a classic group once member leaving is gone (it left
// or was fenced): every other member speaks the classic protocol, at least
// one remains, the policy allows downgrades and the remaining members fit
// group.max.size (classicMaxSize, 0 unbounded).
func CanDowngrade(p MigrationPolicy, g *Group, leaving string, classicMaxSize int) (ok bool, reason string) {
	return CanDowngradeWithout(p, g, []string{leaving}, classicMaxSize)
}

// CanDowngradeWithout is [CanDowngrade] for several members leaving at
// once (members fenced by one [Group.Expire] pass, or a LeaveGroup
// batch); leaving may name members already removed.
func CanDowngradeWithout(p MigrationPolicy, g *Group, leaving []string, classicMaxSize int) (ok bool, reason string) {
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		if !slices.Contains(leaving, id) && g.Members[id].Classic == nil {
			return false, "member " + id + " speaks the consumer protocol"
		}
	}
	remaining := len(g.Members)
	for _, id := range slices.Compact(slices.Sorted(slices.Values(leaving))) {
		if _, ok := g.Members[id]; ok {
			remaining--
		}
	}
	switch {
	case remaining <= 0:
		return false, "the group is empty"
	case !p.DowngradeEnabled():
		return false, "online downgrade is disabled (group.consumer.migration.policy=" + p.String() + ")"
	case classicMaxSize > 0 && remaining > classicMaxSize:
		return false, fmt.Sprintf("its %d members exceed group.max.size (%d)", remaining, classicMaxSize)
	}
	return true, ""
}

// ClassicMember is one member of a classic group as an online upgrade
// converts it: its JoinGroup (protocols, timeouts, ids) and its current
// assignment from SyncGroup (ConsumerProtocol assignment bytes; empty while
// the group had not synced).
type ClassicMember struct {
	ID, InstanceID       string
	ClientID, ClientHost string
	SessionTimeoutMs     int32
	RebalanceTimeoutMs   int32
	Protocols            []ClassicProtocol
	Assignment           []byte
}

// FromClassic converts a classic group (generation, its chosen protocol
// and its members) into a consumer group, as Kafka's
// ConsumerGroup.fromClassicGroup: the group epoch and target epoch are the
// generation; each member keeps its id, its subscription (the topics and
// rack of its ConsumerProtocol metadata for the chosen protocol), its
// current assignment (topics unknown to img dropped) as its target and
// assigned partitions, and is Stable at the generation, with its classic
// metadata. It returns the group and the records that create it, in
// Kafka's order (createConsumerGroupRecords: member metadata, group epoch,
// target members, target epoch, current assignments); the group is what
// [Replay] of those records gives, without timers: call [Group.Loaded]
// (each classic member's session is its own timeout). Undecodable metadata or assignments, a
// member without the chosen protocol, or a partition assigned twice are
// errors (the caller keeps the classic group).
func FromClassic(id string, cfg Config, generation int32, protocol string, members []ClassicMember, img TopicImage) (*Group, []Record, error) {
	byID := map[string]uuid.UUID{}
	for name, t := range img {
		byID[name] = t.ID
	}
	type converted struct {
		meta     *MemberMetadataRecord
		assigned Assignment
	}
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b ClassicMember) int { return strings.Compare(a.ID, b.ID) })
	var conv []converted
	owned := map[tp]string{}
	for _, cm := range sorted {
		i := slices.IndexFunc(cm.Protocols, func(p ClassicProtocol) bool { return p.Name == protocol })
		if i < 0 {
			return nil, nil, fmt.Errorf("consumer: member %s does not support protocol %q", cm.ID, protocol)
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(cm.Protocols[i].Metadata); err != nil {
			return nil, nil, fmt.Errorf("consumer: member %s subscription: %v", cm.ID, err)
		}
		assigned := Assignment{}
		if len(cm.Assignment) > 0 {
			var as kmsg.ConsumerMemberAssignment
			if err := as.ReadFrom(cm.Assignment); err != nil {
				return nil, nil, fmt.Errorf("consumer: member %s assignment: %v", cm.ID, err)
			}
			for _, t := range as.Topics {
				tid, ok := byID[t.Topic]
				if !ok {
					continue
				}
				for _, p := range t.Partitions {
					k := tp{tid, p}
					if o, dup := owned[k]; dup && o != cm.ID {
						return nil, nil, fmt.Errorf("consumer: %s-%d assigned to both %s and %s", t.Topic, p, o, cm.ID)
					}
					owned[k] = cm.ID
					if !slices.Contains(assigned[tid], p) {
						assigned[tid] = append(assigned[tid], p)
					}
				}
			}
			for t := range assigned {
				slices.Sort(assigned[t])
			}
		}
		topics := slices.Clone(sub.Topics)
		slices.Sort(topics)
		topics = slices.Compact(topics)
		rack := ""
		if sub.Rack != nil {
			rack = *sub.Rack
		}
		conv = append(conv, converted{meta: &MemberMetadataRecord{
			Group: id, MemberID: cm.ID, InstanceID: cm.InstanceID, RackID: rack,
			ClientID: cm.ClientID, ClientHost: cm.ClientHost, SubscribedTopicNames: topics,
			RebalanceTimeoutMs: cm.RebalanceTimeoutMs,
			Classic:            (&ClassicMetadata{SessionTimeoutMs: cm.SessionTimeoutMs, Protocols: cm.Protocols}).clone(),
		}, assigned: assigned})
	}
	var recs []Record
	for _, c := range conv {
		recs = append(recs, c.meta)
	}
	epoch := &GroupMetadataRecord{Group: id, Epoch: generation}
	recs = append(recs, epoch)
	for _, c := range conv {
		recs = append(recs, &TargetMemberRecord{Group: id, MemberID: c.meta.MemberID, Partitions: c.assigned.Clone()})
	}
	recs = append(recs, &TargetMetadataRecord{Group: id, AssignmentEpoch: generation})
	for _, c := range conv {
		recs = append(recs, &CurrentAssignmentRecord{Group: id, MemberID: c.meta.MemberID, MemberEpoch: generation,
			PreviousMemberEpoch: generation, State: Stable, Assigned: c.assigned.Clone(), PendingRevocation: Assignment{}})
	}
	g := NewGroup(id, cfg)
	for _, r := range recs {
		g.Apply(r)
	}
	// The hash of the subscribed topics as they are: a metadata change
	// after the conversion bumps the epoch, the conversion itself not.
	epoch.MetadataHash = g.metadataHash(img)
	g.MetadataHash = epoch.MetadataHash
	return g, recs, nil
}

// ClassicHeartbeat answers a classic Heartbeat (API 12) of a classic member
// of this consumer group, as Kafka's classicGroupHeartbeatToConsumerGroup:
// the member must exist (by instance id for a static member, which must
// then be this member id: FENCED_INSTANCE_ID), speak the classic protocol
// (UNKNOWN_MEMBER_ID otherwise) and send its member epoch as the
// generation (ILLEGAL_GENERATION). Its session is renewed with its own
// session timeout. It is told to rejoin (REBALANCE_IN_PROGRESS, with a join
// deadline of its rebalance timeout unless one runs) when the group epoch
// moved past its epoch, when it has partitions to revoke, or when the
// partitions it waits for are all released. Nothing is written.
func (g *Group) ClassicHeartbeat(now int64, memberID, instanceID string, generation int32) (*kerr.Error, string) {
	m, e, msg := g.classicMember(memberID, instanceID, generation)
	if e != nil {
		return e, msg
	}
	g.session[m.ID] = now + int64(g.sessionTimeout(m))
	if m.Epoch < g.Epoch || m.State == UnrevokedPartitions || (m.State == UnreleasedPartitions && !g.waitingOnUnreleased(m)) {
		if _, ok := g.joinBy[m.ID]; !ok {
			g.joinBy[m.ID] = now + int64(max(m.RebalanceTimeoutMs, 0))
		}
		return kerr.RebalanceInProgress, ""
	}
	return nil, ""
}

// waitingOnUnreleased reports whether a partition of m's target that m
// does not hold yet is still held by another member.
func (g *Group) waitingOnUnreleased(m *Member) bool {
	for t, ps := range g.Target[m.ID] {
		for _, p := range ps {
			if slices.Contains(m.Assigned[t], p) {
				continue
			}
			if _, held := g.owners[tp{t, p}]; held {
				return true
			}
		}
	}
	return false
}

// ClassicLeave answers a classic LeaveGroup (API 13) of this consumer
// group, as Kafka's classicGroupLeaveToConsumerGroup: each listed member
// (by member id, or by instance id, where a member id other than "" must
// match: FENCED_INSTANCE_ID) must be a classic member (UNKNOWN_MEMBER_ID
// otherwise) and is removed; the group epoch is bumped once if anyone
// left. It returns the per-member answers in request order and the
// records (the leavers' tombstones, then the new epoch).
func (g *Group) ClassicLeave(members []kmsg.LeaveGroupRequestMember, img TopicImage) ([]kmsg.LeaveGroupResponseMember, []Record) {
	var out []kmsg.LeaveGroupResponseMember
	var recs []Record
	for _, lm := range members {
		r := kmsg.NewLeaveGroupResponseMember()
		r.MemberID, r.InstanceID = lm.MemberID, lm.InstanceID
		var m *Member
		var err *kerr.Error
		switch {
		case lm.InstanceID == nil:
			if m = g.Members[lm.MemberID]; m == nil {
				err = kerr.UnknownMemberID
			}
		default:
			if m = g.byInstance(*lm.InstanceID); m == nil {
				err = kerr.UnknownMemberID
			} else if lm.MemberID != "" && lm.MemberID != m.ID {
				err = kerr.FencedInstanceID
			}
		}
		if err == nil && m.Classic == nil {
			err = kerr.UnknownMemberID
		}
		if err != nil {
			r.ErrorCode = err.Code
			out = append(out, r)
			continue
		}
		r.MemberID = m.ID
		recs = append(recs, g.removeRecords(m)...)
		g.uninstall(m)
		delete(g.Target, m.ID)
		out = append(out, r)
	}
	if len(recs) > 0 {
		g.MetadataHash = g.metadataHash(img)
		g.Epoch++
		recs = append(recs, &GroupMetadataRecord{Group: g.ID, Epoch: g.Epoch, MetadataHash: g.MetadataHash})
	}
	return out, recs
}

// classicMember finds the classic member a classic request names, as
// Kafka's validateConsumerGroupMember, throwIfMemberDoesNotUseClassicProtocol
// and throwIfGenerationIdUnmatched.
func (g *Group) classicMember(memberID, instanceID string, generation int32) (*Member, *kerr.Error, string) {
	var m *Member
	if instanceID == "" {
		m = g.Members[memberID]
		if m == nil {
			return nil, kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", memberID, g.ID)
		}
	} else {
		m = g.byInstance(instanceID)
		if m == nil {
			return nil, kerr.UnknownMemberID, fmt.Sprintf("Member with instance id %s is not a member of group %s.", instanceID, g.ID)
		}
		if m.ID != memberID {
			return nil, kerr.FencedInstanceID, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", memberID, instanceID, m.ID)
		}
	}
	if m.Classic == nil {
		return nil, kerr.UnknownMemberID, fmt.Sprintf("Member %s does not use the classic protocol.", m.ID)
	}
	if generation != m.Epoch {
		return nil, kerr.IllegalGeneration, fmt.Sprintf("The request generation id %d is not equal to the member epoch %d of member %s.", generation, m.Epoch, m.ID)
	}
	return m, nil, ""
}

// ClassicSync answers a classic SyncGroup (API 14) of a classic member of
// this consumer group, as Kafka's classicGroupSyncToConsumerGroup: the
// member checks of [Group.ClassicHeartbeat], the protocol type (consumer)
// and name (the member's first protocol) when given
// (INCONSISTENT_GROUP_PROTOCOL), and REBALANCE_IN_PROGRESS (with a join
// deadline) when the group epoch moved past the member's and it is not
// revoking. Otherwise its session is renewed and it gets its assigned
// partitions as a ConsumerProtocol assignment, in the version of its
// subscription (topics not in img left out). The leader's assignments in
// the request are ignored: the coordinator assigns. Nothing is written.
func (g *Group) ClassicSync(now int64, req *kmsg.SyncGroupRequest, img TopicImage) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	fail := func(e *kerr.Error) *kmsg.SyncGroupResponse { // SyncGroup has no error message
		resp.ErrorCode = e.Code
		return resp
	}
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	m, e, _ := g.classicMember(req.MemberID, instance, req.Generation)
	if e != nil {
		return fail(e)
	}
	first := ClassicProtocol{}
	if len(m.Classic.Protocols) > 0 {
		first = m.Classic.Protocols[0]
	}
	if req.ProtocolType != nil && *req.ProtocolType != "consumer" {
		return fail(kerr.InconsistentGroupProtocol)
	}
	if req.Protocol != nil && *req.Protocol != first.Name {
		return fail(kerr.InconsistentGroupProtocol)
	}
	delete(g.syncBy, m.ID) // it synced (or is told to rejoin: joinBy)
	if g.Epoch > m.Epoch && m.State != UnrevokedPartitions {
		if _, ok := g.joinBy[m.ID]; !ok {
			g.joinBy[m.ID] = now + int64(max(m.RebalanceTimeoutMs, 0))
		}
		return fail(kerr.RebalanceInProgress)
	}
	g.session[m.ID] = now + int64(g.sessionTimeout(m))
	names := map[uuid.UUID]string{}
	for name, t := range img {
		names[t.ID] = name
	}
	as := kmsg.NewConsumerMemberAssignment()
	if len(first.Metadata) >= 2 {
		as.Version = min(int16(first.Metadata[0])<<8|int16(first.Metadata[1]), 3)
	}
	for _, t := range m.Assigned.topicIDs() {
		name, ok := names[t]
		if !ok {
			continue
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = name, slices.Clone(m.Assigned[t])
		as.Topics = append(as.Topics, at)
	}
	slices.SortFunc(as.Topics, func(a, b kmsg.ConsumerMemberAssignmentTopic) int { return strings.Compare(a.Topic, b.Topic) })
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(first.Name)
	resp.MemberAssignment = as.AppendTo(nil)
	return resp
}

// ClassicJoin answers a classic JoinGroup (API 11) on this consumer group,
// as Kafka's classicGroupJoinToConsumerGroup: the protocol type must be
// consumer with a protocol every other classic member supports
// (INCONSISTENT_GROUP_PROTOCOL); a v4+ dynamic member without a member id
// gets MEMBER_ID_REQUIRED with one. Otherwise the join goes through the
// consumer-protocol path as a heartbeat (a new member joins at epoch 0; a
// known one heartbeats at its epoch with the partitions its subscription
// says it owns): its subscription (topics and rack of its first protocol's
// ConsumerProtocol metadata) and classic metadata (session timeout,
// protocols) are updated, the group epoch and target move as for any
// member, and the member is reconciled. The answer carries the member id,
// its epoch as the generation and its first protocol; there is no leader
// (the coordinator assigns, the member's SyncGroup gets its partitions);
// a member that sends no SyncGroup within its rebalance timeout is fenced
// (Kafka's sync timeout).
// Session-timeout bounds are the caller's (Kafka's
// group.min/max.session.timeout.ms).
func (g *Group) ClassicJoin(now int64, req *kmsg.JoinGroupRequest, c Client, img TopicImage) (*kmsg.JoinGroupResponse, []Record) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.MemberID, resp.Generation = req.MemberID, -1
	fail := func(e *kerr.Error) (*kmsg.JoinGroupResponse, []Record) { // JoinGroup has no error message
		resp.ErrorCode = e.Code
		return resp, nil
	}
	if req.ProtocolType != "consumer" || len(req.Protocols) == 0 {
		return fail(kerr.InconsistentGroupProtocol)
	}
	common := slices.ContainsFunc(req.Protocols, func(p kmsg.JoinGroupRequestProtocol) bool {
		for id, m := range g.Members {
			if id != req.MemberID && m.Classic != nil && !slices.ContainsFunc(m.Classic.Protocols, func(q ClassicProtocol) bool { return q.Name == p.Name }) {
				return false
			}
		}
		return true
	})
	if !common {
		return fail(kerr.InconsistentGroupProtocol)
	}
	memberID := req.MemberID
	if memberID == "" {
		memberID = g.newMemberID()
		if req.InstanceID == nil && req.GetVersion() >= 4 {
			resp.MemberID = memberID
			return fail(kerr.MemberIDRequired)
		}
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(req.Protocols[0].Metadata); err != nil {
		return fail(kerr.InconsistentGroupProtocol)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.InstanceID, hb.RackID = g.ID, memberID, req.InstanceID, sub.Rack
	hb.RebalanceTimeoutMillis = req.RebalanceTimeoutMillis
	if req.GetVersion() == 0 {
		hb.RebalanceTimeoutMillis = req.SessionTimeoutMillis
	}
	hb.SubscribedTopicNames = append([]string{}, sub.Topics...)
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	known := g.Members[memberID]
	if req.InstanceID != nil {
		if m := g.byInstance(*req.InstanceID); m != nil && m.ID == memberID {
			known = m
		}
	}
	if known != nil {
		hb.MemberEpoch = known.Epoch
		ids := map[string]uuid.UUID{}
		for name, t := range img {
			ids[name] = t.ID
		}
		for _, op := range sub.OwnedPartitions {
			if id, ok := ids[op.Topic]; ok {
				t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
				t.TopicID, t.Partitions = id, slices.Clone(op.Partitions)
				hb.Topics = append(hb.Topics, t)
			}
		}
	}
	classic := &ClassicMetadata{SessionTimeoutMs: req.SessionTimeoutMillis}
	for _, p := range req.Protocols {
		classic.Protocols = append(classic.Protocols, ClassicProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)})
	}
	if herr := g.validate(hb); herr != nil {
		return fail(herr.err)
	}
	hresp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	recs, herr := g.heartbeat(now, hb, c, hresp, img, classic)
	if herr != nil {
		return fail(herr.err)
	}
	delete(g.joinBy, *hresp.MemberID)
	g.syncBy[*hresp.MemberID] = now + int64(max(hb.RebalanceTimeoutMillis, 0))
	resp.MemberID, resp.Generation = *hresp.MemberID, hresp.MemberEpoch
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(req.Protocols[0].Name)
	return resp, recs
}

// ClassicGroup is a consumer group converted back into a classic group
// (an online downgrade, [Group.ToClassic]): Kafka's
// ClassicGroup.fromConsumerGroup. It is Stable at Generation (the group
// epoch) with protocol type consumer; the caller stores it as a classic
// group (a GroupMetadata record) and starts a rebalance, so the members
// rejoin with the classic protocol.
type ClassicGroup struct {
	Generation int32
	// Protocol is the selected protocol (Kafka's selectProtocol: among the
	// protocols every member supports, the most voted first preference;
	// ties by name, as the classic coordinator breaks them here).
	Protocol string
	// Leader is the first member (by id).
	Leader string
	// Members are sorted by id; each one's Assignment is its target
	// assignment as ConsumerProtocol bytes in the version of its
	// subscription for Protocol.
	Members []ClassicMember
}

// ToClassic converts g, without the leaving members (the last consumer-
// protocol member that left or was fenced: [CanDowngrade] said yes), into
// a classic group, as Kafka's convertToClassicGroup: it returns the
// classic group and the consumer group's tombstones in Kafka's order
// (createGroupTombstoneRecords: current assignments, target members,
// target metadata, member metadata, group epoch), after which [Replay]
// has no group of that id. g is not changed: the caller drops it once the
// records are appended. A remaining member without classic metadata, or
// with no protocol shared by all, is an error (the group stays).
func (g *Group) ToClassic(leaving []string, img TopicImage) (ClassicGroup, []Record, error) {
	names := map[uuid.UUID]string{}
	for name, t := range img {
		names[t.ID] = name
	}
	var staying []*Member
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		if slices.Contains(leaving, id) {
			continue
		}
		m := g.Members[id]
		if m.Classic == nil {
			return ClassicGroup{}, nil, fmt.Errorf("consumer: member %s does not speak the classic protocol", id)
		}
		staying = append(staying, m)
	}
	if len(staying) == 0 {
		return ClassicGroup{}, nil, fmt.Errorf("consumer: no member left for a classic group")
	}
	supported := map[string]int{}
	for _, m := range staying {
		seen := map[string]bool{}
		for _, p := range m.Classic.Protocols {
			if !seen[p.Name] {
				seen[p.Name] = true
				supported[p.Name]++
			}
		}
	}
	votes := map[string]int{}
	for _, m := range staying {
		for _, p := range m.Classic.Protocols {
			if supported[p.Name] == len(staying) {
				votes[p.Name]++
				break
			}
		}
	}
	protocol, best := "", 0
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if votes[name] > best {
			protocol, best = name, votes[name]
		}
	}
	if protocol == "" {
		return ClassicGroup{}, nil, fmt.Errorf("consumer: the classic members share no protocol")
	}
	cg := ClassicGroup{Generation: g.Epoch, Protocol: protocol, Leader: staying[0].ID}
	for _, m := range staying {
		var meta []byte
		for _, p := range m.Classic.Protocols {
			if p.Name == protocol {
				meta = p.Metadata
				break
			}
		}
		as := kmsg.NewConsumerMemberAssignment()
		if len(meta) >= 2 {
			as.Version = max(min(int16(meta[0])<<8|int16(meta[1]), 3), 0)
		}
		target := g.Target[m.ID]
		for _, t := range target.topicIDs() {
			name, ok := names[t]
			if !ok {
				continue
			}
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = name, slices.Clone(target[t])
			as.Topics = append(as.Topics, at)
		}
		slices.SortFunc(as.Topics, func(a, b kmsg.ConsumerMemberAssignmentTopic) int { return strings.Compare(a.Topic, b.Topic) })
		protos := make([]ClassicProtocol, len(m.Classic.Protocols))
		for i, p := range m.Classic.Protocols {
			protos[i] = ClassicProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)}
		}
		cg.Members = append(cg.Members, ClassicMember{
			ID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			SessionTimeoutMs: g.sessionTimeout(m), RebalanceTimeoutMs: m.RebalanceTimeoutMs,
			Protocols: protos, Assignment: as.AppendTo(nil),
		})
	}
	return cg, g.TombstoneRecords(), nil
}

// TombstoneRecords are the records deleting g from the log, in Kafka's
// order (ConsumerGroup.createGroupTombstoneRecords; the subscription
// metadata record, type 4, is never written here).
func (g *Group) TombstoneRecords() []Record {
	ids := slices.Sorted(maps.Keys(g.Members))
	var recs []Record
	for _, id := range ids {
		recs = append(recs, &CurrentAssignmentRecord{Group: g.ID, MemberID: id, Deleted: true})
	}
	for _, id := range ids {
		recs = append(recs, &TargetMemberRecord{Group: g.ID, MemberID: id, Deleted: true})
	}
	recs = append(recs, &TargetMetadataRecord{Group: g.ID, Deleted: true})
	for _, id := range ids {
		recs = append(recs, &MemberMetadataRecord{Group: g.ID, MemberID: id, Deleted: true})
	}
	return append(recs, &GroupMetadataRecord{Group: g.ID, Deleted: true})
}
