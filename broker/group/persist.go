package group

import "context"

// GroupSnapshot is a group's durable metadata: what one GroupMetadata
// record in __consumer_offsets carries (kmsg.GroupMetadataValue), and what
// a load hands back to [Coordinator.LoadGroup]. A snapshot with nil
// Members and an empty Protocol after a tombstone means "remove".
type GroupSnapshot struct {
	Group          string
	ProtocolType   string
	Protocol       string
	Leader         string
	Generation     int32
	StateTimestamp int64 // unix ms of the last state change, -1 unknown
	Members        []MemberSnapshot
}

// MemberSnapshot is one member of a [GroupSnapshot], field for field
// kmsg.GroupMetadataValueMember.
type MemberSnapshot struct {
	MemberID           string
	InstanceID         *string
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	SessionTimeoutMs   int32
	Subscription       []byte
	Assignment         []byte
}

// Persister writes group metadata to the __consumer_offsets partition that
// owns the group. It is safe for concurrent use. Both methods return once
// the record is appended to the partition's log (never earlier), or an
// error: one wrapping kerr.NotCoordinator when this broker no longer
// leads the partition, or the log's append error. Both are idempotent (a repeated
// StoreGroup appends a newer record with the same content; a repeated
// DeleteGroup appends tombstones again, which compaction folds away).
// The Persister keeps no reference to the snapshot's byte slices after it
// returns.
type Persister interface {
	// StoreGroup appends a GroupMetadata record (kmsg.GroupMetadataKey v2
	// / kmsg.GroupMetadataValue v3) for g to partition's log.
	StoreGroup(ctx context.Context, partition int32, g GroupSnapshot) error
	// DeleteGroup appends tombstones (null values) for the group's
	// metadata and for every offset the group has committed.
	DeleteGroup(ctx context.Context, partition int32, group string) error
}
