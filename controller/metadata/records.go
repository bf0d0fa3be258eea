package metadata

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
)

// RecordType identifies the kind of a metadata record. It is the first byte
// of every encoded record. Numbers are assigned once and never reused: a
// retired record type keeps its number reserved forever, because old logs and
// snapshots still carry it.
type RecordType uint8

// Record types. Append new kinds at the end with the number typeEnd has,
// and move typeEnd up by one.
const (
	TypeRegisterBroker            RecordType = 1  // [RegisterBrokerRecord]
	TypeUnregisterBroker          RecordType = 2  // [UnregisterBrokerRecord]
	TypeBrokerRegistrationChange  RecordType = 3  // [BrokerRegistrationChangeRecord]
	TypeTopic                     RecordType = 4  // [TopicRecord]
	TypePartition                 RecordType = 5  // [PartitionRecord]
	TypePartitionChange           RecordType = 6  // [PartitionChangeRecord]
	TypeConfig                    RecordType = 7  // [ConfigRecord]
	TypeRemoveTopic               RecordType = 8  // [RemoveTopicRecord]
	TypeRemoteSegment             RecordType = 9  // [RemoteSegmentRecord]
	TypeNoOp                      RecordType = 10 // [NoOpRecord]
	TypeFeatureLevel              RecordType = 11 // [FeatureLevelRecord]
	TypeClusterID                 RecordType = 12 // [ClusterIDRecord]
	TypeAccessControlEntry        RecordType = 13 // [AccessControlEntryRecord]
	TypeRemoveAccessControlEntry  RecordType = 14 // [RemoveAccessControlEntryRecord]
	TypeUserScramCredential       RecordType = 15 // [UserScramCredentialRecord]
	TypeRemoveUserScramCredential RecordType = 16 // [RemoveUserScramCredentialRecord]
	TypeClientQuota               RecordType = 17 // [ClientQuotaRecord]

	// typeEnd is one past the last record type. The codec's tests walk
	// every type below it (a sample, a name, a decoder each) and check that
	// typeEnd itself is unknown, so a new type cannot be left out of them.
	typeEnd RecordType = 18
)

// String returns the record type's name.
func (t RecordType) String() string {
	switch t {
	case TypeRegisterBroker:
		return "RegisterBroker"
	case TypeUnregisterBroker:
		return "UnregisterBroker"
	case TypeBrokerRegistrationChange:
		return "BrokerRegistrationChange"
	case TypeTopic:
		return "Topic"
	case TypePartition:
		return "Partition"
	case TypePartitionChange:
		return "PartitionChange"
	case TypeConfig:
		return "Config"
	case TypeRemoveTopic:
		return "RemoveTopic"
	case TypeRemoteSegment:
		return "RemoteSegment"
	case TypeNoOp:
		return "NoOp"
	case TypeFeatureLevel:
		return "FeatureLevel"
	case TypeClusterID:
		return "ClusterID"
	case TypeAccessControlEntry:
		return "AccessControlEntry"
	case TypeRemoveAccessControlEntry:
		return "RemoveAccessControlEntry"
	case TypeUserScramCredential:
		return "UserScramCredential"
	case TypeRemoveUserScramCredential:
		return "RemoveUserScramCredential"
	case TypeClientQuota:
		return "ClientQuota"
	}
	return fmt.Sprintf("RecordType(%d)", uint8(t))
}

// Record is one entry of the metadata log. Every record is a plain value:
// [Encode] turns it into bytes, [Decode] back, and [State.Apply] folds it into
// the image. Implementations are the exported *Record structs of this
// package; Version reports the encoding version [Encode] writes for it.
type Record interface {
	Type() RecordType
	Version() uint8
}

// NoLeader is the leader id of a partition that has no leader.
const NoLeader int32 = -1

// Listener is one endpoint a broker accepts connections on.
type Listener struct {
	Name             string // e.g. "PLAINTEXT"
	Host             string
	Port             int32
	SecurityProtocol string // e.g. "PLAINTEXT"
}

// RegisterBrokerRecord registers (or re-registers) a broker. A registration
// with a new incarnation replaces the previous one; BrokerEpoch must be higher
// than the broker's current epoch. Brokers register fenced and are unfenced
// by a [BrokerRegistrationChangeRecord] once they have caught up.
type RegisterBrokerRecord struct {
	BrokerID      int32
	IncarnationID uuid.UUID
	BrokerEpoch   int64
	Listeners     []Listener
	Rack          string
	Fenced        bool
}

// UnregisterBrokerRecord removes a broker's registration. BrokerEpoch must
// match the current registration.
type UnregisterBrokerRecord struct {
	BrokerID    int32
	BrokerEpoch int64
}

// BrokerRegistrationChangeRecord changes the fencing or controlled-shutdown
// flag of a registered broker. Nil fields are unchanged. BrokerEpoch must
// match the current registration.
type BrokerRegistrationChangeRecord struct {
	BrokerID             int32
	BrokerEpoch          int64
	Fenced               *bool
	InControlledShutdown *bool
}

// TopicRecord creates a topic. Its partitions follow as [PartitionRecord]s
// and its configs as [ConfigRecord]s.
type TopicRecord struct {
	Name    string
	TopicID uuid.UUID
}

// PartitionRecord creates a partition of an existing topic. Partitions of a
// topic are created in order 0, 1, 2, ... so a topic's partitions are always
// dense.
type PartitionRecord struct {
	TopicID        uuid.UUID
	Partition      int32
	Replicas       []int32
	ISR            []int32
	Leader         int32 // NoLeader (-1) when none
	LeaderEpoch    int32
	PartitionEpoch int32
	// Version 1 (KIP-966, KIP-704): the eligible leader replicas, the
	// last known ones, and the leader recovery state. Planners create
	// partitions with them empty and LeaderRecovered; they are in the
	// record so a snapshot-free replay and a copied partition agree.
	ELR                 []int32
	LastKnownELR        []int32
	LeaderRecoveryState int8
	// Version 2 (KIP-455): the replicas an ongoing reassignment adds
	// and removes (both subsets of Replicas; empty when none).
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// PartitionChangeRecord changes an existing partition. Nil fields are
// unchanged. Applying it always bumps the partition epoch; a non-nil Leader
// (even NoLeader) bumps the leader epoch, as Kafka's PartitionChangeRecord does.
type PartitionChangeRecord struct {
	TopicID   uuid.UUID
	Partition int32
	Leader    *int32  // nil unchanged, NoLeader for none
	ISR       []int32 // nil unchanged
	Replicas  []int32 // nil unchanged
	// KIP-966 and KIP-704 (nil unchanged; an empty non-nil slice clears).
	ELR                 []int32
	LastKnownELR        []int32
	LeaderRecoveryState *int8
	// KIP-455 (version 2; nil unchanged, an empty non-nil slice clears):
	// the reassignment's adding and removing replicas.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// ResourceType is the kind of resource a [ConfigRecord] applies to. The
// numbers are Kafka's ConfigResource types.
type ResourceType uint8

// Resource types.
const (
	ResourceTopic  ResourceType = 2
	ResourceBroker ResourceType = 4
	// ResourceGroup is a consumer group's dynamic configs (Kafka's
	// GroupConfig, KIP-848): ResourceName is the group id.
	ResourceGroup ResourceType = 32
)

// String returns "topic", "broker" or "group".
func (t ResourceType) String() string {
	switch t {
	case ResourceTopic:
		return "topic"
	case ResourceBroker:
		return "broker"
	case ResourceGroup:
		return "group"
	}
	return fmt.Sprintf("ResourceType(%d)", uint8(t))
}

// ConfigRecord sets or deletes one config of a topic (ResourceName is the
// topic's name), of a broker (ResourceName is the broker id in decimal, or
// "" for the cluster-wide default) or of a group (ResourceName is the group
// id).
type ConfigRecord struct {
	ResourceType ResourceType
	ResourceName string
	Name         string
	Value        *string // nil deletes
}

// RemoveTopicRecord deletes a topic with its partitions and configs. Its
// remote segments stay in the image (KIP-405: the tiering layer deletes them
// from the object store and records DELETE_STARTED / DELETE_FINISHED), and
// so does its name, which their object keys carry, until the last of them
// reaches DELETE_FINISHED (see [State.TopicNameByID]).
type RemoveTopicRecord struct {
	TopicID uuid.UUID
}

// RemoteSegmentState is the lifecycle state of a segment in the remote tier:
//
//	             ┌──────────────┐        ┌───────────────┐
//	(none) ────▶ │ COPY_STARTED │ ─────▶ │ COPY_FINISHED │
//	             └──────┬───────┘        └───────┬───────┘
//	                    │                        │
//	                    ▼                        ▼
//	             ┌────────────────┐      ┌─────────────────┐
//	             │ DELETE_STARTED │ ───▶ │ DELETE_FINISHED │ ───▶ (gone)
//	             └────────────────┘      └─────────────────┘
//
// Self-transitions are idempotent. A DELETE_FINISHED segment leaves the image.
type RemoteSegmentState uint8

// Remote segment states (numbers as in Kafka's RemoteLogSegmentState).
const (
	CopyStarted    RemoteSegmentState = 0
	CopyFinished   RemoteSegmentState = 1
	DeleteStarted  RemoteSegmentState = 2
	DeleteFinished RemoteSegmentState = 3
)

// String returns Kafka's name of the state.
func (s RemoteSegmentState) String() string {
	switch s {
	case CopyStarted:
		return "COPY_STARTED"
	case CopyFinished:
		return "COPY_FINISHED"
	case DeleteStarted:
		return "DELETE_STARTED"
	case DeleteFinished:
		return "DELETE_FINISHED"
	}
	return fmt.Sprintf("RemoteSegmentState(%d)", uint8(s))
}

// EpochStart is one entry of a segment's leader-epoch history: Epoch began
// at StartOffset.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// RemoteSegmentRecord records a remote segment's state. The first record of
// a segment (COPY_STARTED) carries its full description; later records repeat
// it with the new State, BrokerID and EventTimestamp. Apply keeps the
// description of the first record and takes only the state, broker and
// timestamp from later ones.
//
// BrokerID and WriterLeaderEpoch name the writer: the broker and the leader
// epoch of the partition it acts under. [State.PlanRemoteSegment] fences
// on them (a deposed leader cannot register or delete segments);
// [UnknownLeaderEpoch] asks for no fencing (a restore from the bucket, the
// deleted-topics janitor, and every version 0 record).
type RemoteSegmentRecord struct {
	SegmentID      uuid.UUID
	TopicID        uuid.UUID
	Partition      int32
	BaseOffset     int64
	EndOffset      int64 // inclusive
	MaxTimestamp   int64
	LeaderEpochs   []EpochStart
	SizeBytes      int64
	State          RemoteSegmentState
	BrokerID       int32
	EventTimestamp int64 // unix milliseconds, set by the requester
	// WriterLeaderEpoch is the partition leader epoch BrokerID acts
	// under, or UnknownLeaderEpoch (version 1; version 0 decodes as
	// UnknownLeaderEpoch). Not kept in the image: it is the request's
	// credential, checked against the partition's current leader.
	WriterLeaderEpoch int32
}

// UnknownLeaderEpoch in [RemoteSegmentRecord.WriterLeaderEpoch]: the writer
// does not act as the partition's leader (a restore from the bucket, the
// deleted-topics janitor) or predates fencing (a version 0 record); the
// planner does not fence it. Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH.
const UnknownLeaderEpoch int32 = -1

// UnmarshalJSON decodes the JSON the controller RPC carries (field names
// as Go's encoding/json writes them). A body without WriterLeaderEpoch,
// from a broker that predates fencing, decodes as UnknownLeaderEpoch, not
// as epoch 0.
func (r *RemoteSegmentRecord) UnmarshalJSON(b []byte) error {
	type plain RemoteSegmentRecord // no methods: no recursion
	p := plain{WriterLeaderEpoch: UnknownLeaderEpoch}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = RemoteSegmentRecord(p)
	return nil
}

// NoOpRecord carries nothing. A new controller leader proposes one to commit
// an entry of its own term.
type NoOpRecord struct{}

// FeatureLevelRecord sets a feature's finalized level (e.g.
// "metadata.version"). Level 0 removes the feature.
type FeatureLevelRecord struct {
	Name  string
	Level int16
}

// ClusterIDRecord records the cluster's id (Kafka's cluster.id, as
// meta.properties and DescribeCluster carry it). The quorum's first leader
// writes it before its first decision; every node takes its cluster id
// from the image, so a broker-only node reports the quorum's id, and a
// node whose meta.properties names another cluster is refused. Apply
// accepts it once: the same id again is a no-op, another id is refused.
type ClusterIDRecord struct {
	ClusterID string
}

// Versions written by Encode. Decode accepts every version up to these.
const (
	versionRegisterBroker           = 0
	versionUnregisterBroker         = 0
	versionBrokerRegistrationChange = 0
	versionTopic                    = 0
	versionPartition                = 2 // 1: ELR, LastKnownELR, LeaderRecoveryState; 2: AddingReplicas, RemovingReplicas
	versionPartitionChange          = 2 // 1: ELR, LastKnownELR, LeaderRecoveryState; 2: AddingReplicas, RemovingReplicas
	versionConfig                   = 0
	versionRemoveTopic              = 0
	versionRemoteSegment            = 1 // 1: WriterLeaderEpoch
	versionNoOp                     = 0
	versionFeatureLevel             = 0
	versionClusterID                = 0
	versionAccessControlEntry       = 0
	versionRemoveAccessControlEntry = 0
	versionClientQuota              = 0
)

// FeatureReplication is the metadata feature a controller records (level
// [ReplicationVersion]) at the start of its first term on a version that
// replicates partitions. An image without it was written before
// replication existed, when every replica was listed in the ISR although
// only the leader held records: [State.PlanReplicationFeature] corrects
// those ISRs to the leader alone once, in the same entry that records the
// feature, and never again.
const FeatureReplication = "strata.replication.version"

// ReplicationVersion is the level of [FeatureReplication] this version
// records.
const ReplicationVersion int16 = 1

// Type implements [Record].
func (*RegisterBrokerRecord) Type() RecordType { return TypeRegisterBroker }

// Version implements [Record].
func (*RegisterBrokerRecord) Version() uint8 { return versionRegisterBroker }

// Type implements [Record].
func (*UnregisterBrokerRecord) Type() RecordType { return TypeUnregisterBroker }

// Version implements [Record].
func (*UnregisterBrokerRecord) Version() uint8 { return versionUnregisterBroker }

// Type implements [Record].
func (*BrokerRegistrationChangeRecord) Type() RecordType { return TypeBrokerRegistrationChange }

// Version implements [Record].
func (*BrokerRegistrationChangeRecord) Version() uint8 { return versionBrokerRegistrationChange }

// Type implements [Record].
func (*TopicRecord) Type() RecordType { return TypeTopic }

// Version implements [Record].
func (*TopicRecord) Version() uint8 { return versionTopic }

// Type implements [Record].
func (*PartitionRecord) Type() RecordType { return TypePartition }

// Version implements [Record].
func (*PartitionRecord) Version() uint8 { return versionPartition }

// Type implements [Record].
func (*PartitionChangeRecord) Type() RecordType { return TypePartitionChange }

// Version implements [Record].
func (*PartitionChangeRecord) Version() uint8 { return versionPartitionChange }

// Type implements [Record].
func (*ConfigRecord) Type() RecordType { return TypeConfig }

// Version implements [Record].
func (*ConfigRecord) Version() uint8 { return versionConfig }

// Type implements [Record].
func (*RemoveTopicRecord) Type() RecordType { return TypeRemoveTopic }

// Version implements [Record].
func (*RemoveTopicRecord) Version() uint8 { return versionRemoveTopic }

// Type implements [Record].
func (*RemoteSegmentRecord) Type() RecordType { return TypeRemoteSegment }

// Version implements [Record].
func (*RemoteSegmentRecord) Version() uint8 { return versionRemoteSegment }

// Type implements [Record].
func (*NoOpRecord) Type() RecordType { return TypeNoOp }

// Version implements [Record].
func (*NoOpRecord) Version() uint8 { return versionNoOp }

// Type implements [Record].
func (*FeatureLevelRecord) Type() RecordType { return TypeFeatureLevel }

// Version implements [Record].
func (*FeatureLevelRecord) Version() uint8 { return versionFeatureLevel }

// Type implements [Record].
func (*ClusterIDRecord) Type() RecordType { return TypeClusterID }

// Version implements [Record].
func (*ClusterIDRecord) Version() uint8 { return versionClusterID }
