package consumer

import (
	"maps"
	"slices"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ValidateOffsetCommit is Kafka's ConsumerGroup.validateOffsetCommit: may
// memberID at memberEpoch commit offsets to this group with an
// OffsetCommit of apiVersion (transactional: a TxnOffsetCommit)? A
// negative epoch (admin clients, consumers without group management) may
// commit only while the group is empty. It returns nil, or
// UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION (a KIP-848 member must commit
// with OffsetCommit v9+, which carries its epoch; a classic member of the
// group commits with any version, its generation being its member epoch)
// or STALE_MEMBER_EPOCH (the member must heartbeat to learn its epoch,
// then retry; ILLEGAL_GENERATION for a classic member).
func (g *Group) ValidateOffsetCommit(memberID string, memberEpoch int32, transactional bool, apiVersion int16) *kerr.Error {
	if memberEpoch < 0 && len(g.Members) == 0 {
		return nil
	}
	m := g.Members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID
	case !transactional && apiVersion < 9 && m.Classic == nil:
		return kerr.UnsupportedVersion
	case memberEpoch != m.Epoch:
		return staleEpoch(m)
	}
	return nil
}

// staleEpoch is Kafka's validateMemberEpoch error: a classic member (in
// this group after an online upgrade, committing with its generation) gets
// ILLEGAL_GENERATION, which its client knows; a consumer-protocol member
// STALE_MEMBER_EPOCH.
func staleEpoch(m *Member) *kerr.Error {
	if m.Classic != nil {
		return kerr.IllegalGeneration
	}
	return kerr.StaleMemberEpoch
}

// ValidateOffsetFetch is Kafka's ConsumerGroup.validateOffsetFetch for an
// OffsetFetch v9+ (which carries member id and epoch): a request without a
// member id and with a negative epoch (admin clients) is always allowed;
// otherwise the member must exist (UNKNOWN_MEMBER_ID) at that epoch
// (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for a classic member).
func (g *Group) ValidateOffsetFetch(memberID *string, memberEpoch int32) *kerr.Error {
	if memberID == nil && memberEpoch < 0 {
		return nil
	}
	var m *Member
	if memberID != nil {
		m = g.Members[*memberID]
	}
	switch {
	case m == nil:
		return kerr.UnknownMemberID
	case memberEpoch != m.Epoch:
		return staleEpoch(m)
	}
	return nil
}

// Describe is the group's ConsumerGroupDescribe entry (Kafka's
// ConsumerGroup.asDescribedGroup): epochs, state, the assignor in use, and
// per member its subscription, current and target assignment, with topic
// names from img. AuthorizedOperations is left for the handler.
func (g *Group) Describe(img TopicImage) kmsg.ConsumerGroupDescribeResponseGroup {
	names := make(map[uuid.UUID]string, len(img))
	for name, t := range img {
		names[t.ID] = name
	}
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group, d.State, d.Epoch, d.AssignmentEpoch = g.ID, string(g.State()), g.Epoch, g.TargetEpoch
	d.AssignorName = g.preferredAssignor().Name()
	d.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
		dm.InstanceID, dm.RackID, dm.SubscribedTopicRegex = nullable(m.InstanceID), nullable(m.RackID), nullable(m.SubscribedTopicRegex)
		dm.SubscribedTopics = slices.Clone(m.SubscribedTopicNames)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		dm.Assignment = describeAssignment(m.Assigned, names)
		dm.TargetAssignment = describeAssignment(g.Target[id], names)
		dm.MemberType = 1 // a consumer (KIP-848) member; classic members come with migration
		d.Members = append(d.Members, dm)
	}
	return d
}

func describeAssignment(a Assignment, names map[uuid.UUID]string) kmsg.Assignment {
	out := kmsg.NewAssignment()
	out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, t := range a.topicIDs() {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = t, names[t], slices.Clone(a[t])
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}
