package metadata

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/sasl"
)

// ErrInconsistentRecord is returned by [State.Apply] for a record that
// contradicts the image (unknown topic, stale broker epoch, illegal remote
// segment transition, ...). The state is left unchanged. Because Apply is
// deterministic, every replica refuses the same record at the same offset,
// so a caller may log the refusal and carry on with [State.AdvanceTo].
var ErrInconsistentRecord = errors.New("metadata: record inconsistent with state")

// ErrOffsetRegression is returned by [State.Apply] and [State.AdvanceTo]
// when the offset is not above the last applied offset.
var ErrOffsetRegression = errors.New("metadata: offset not above last applied offset")

// BrokerInfo is a broker's registration as the image holds it.
type BrokerInfo struct {
	ID                   int32
	IncarnationID        uuid.UUID
	Epoch                int64
	Listeners            []Listener
	Rack                 string
	Fenced               bool
	InControlledShutdown bool
	// RegistrationOffset is the log offset of the RegisterBrokerRecord that
	// created this registration; a broker has caught up once its metadata
	// offset reaches it.
	RegistrationOffset int64
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name          string
	ID            uuid.UUID
	NumPartitions int32
}

// PartitionInfo describes one partition.
type PartitionInfo struct {
	TopicID        uuid.UUID
	Partition      int32
	Replicas       []int32
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	// ELR is KIP-966's eligible leader replicas: members that left the ISR
	// while it was below min.insync.replicas, still electable.
	// LastKnownELR is the ELR members last seen before they all went.
	ELR          []int32
	LastKnownELR []int32
	// LeaderRecoveryState is KIP-704's: LeaderRecovered, or
	// LeaderRecovering after an unclean election until the leader reports
	// it has recovered.
	LeaderRecoveryState int8
	// AddingReplicas and RemovingReplicas are KIP-455's ongoing
	// reassignment: Replicas is then the union of the target (first, in
	// its order) and the original replicas; adding = target − original,
	// removing = original − target. Both nil when none is in progress.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Reassigning reports whether a reassignment is in progress.
func (p *PartitionInfo) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// KIP-704 leader recovery states ([PartitionInfo.LeaderRecoveryState]).
const (
	LeaderRecovered  int8 = 0
	LeaderRecovering int8 = 1
)

// RemoteSegmentInfo describes one segment in the remote tier.
type RemoteSegmentInfo struct {
	SegmentID      uuid.UUID
	TopicID        uuid.UUID
	Partition      int32
	BaseOffset     int64
	EndOffset      int64
	MaxTimestamp   int64
	LeaderEpochs   []EpochStart
	SizeBytes      int64
	State          RemoteSegmentState
	BrokerID       int32
	EventTimestamp int64
}

// TopicPartition names a partition by topic ID.
type TopicPartition struct {
	TopicID   uuid.UUID
	Partition int32
}

type configKey struct {
	typ  ResourceType
	name string
}

type topicState struct {
	name       string
	id         uuid.UUID
	partitions []*PartitionInfo // index = partition number
}

// State is the metadata image: the fold of every applied record. It is a
// plain value with no locks, goroutines or I/O; it is not safe for concurrent
// use (the controller serialises Apply and planning, and hands brokers
// copies). Read accessors return copies the caller owns.
type State struct {
	offset int64
	// maxBrokerEpoch is the highest broker epoch ever applied; planners hand
	// out maxBrokerEpoch+1 so epochs never repeat, even across unregister.
	maxBrokerEpoch int64
	features       map[string]int16
	brokers        map[int32]*BrokerInfo
	topics         map[uuid.UUID]*topicState
	topicsByName   map[string]uuid.UUID
	configs        map[configKey]map[string]string
	// remote holds segments per partition, including partitions of deleted
	// topics until their segments reach DELETE_FINISHED.
	remote map[TopicPartition]map[uuid.UUID]*RemoteSegmentInfo
	// remoteTopics counts, per topic ID, the partitions in remote. It is
	// derived from remote (never snapshotted) so that "does this topic
	// still have remote data" is one lookup.
	remoteTopics map[uuid.UUID]int
	// removedNames remembers the name of each removed topic that still has
	// remote segments: object keys carry the name, and the tiering layer
	// deletes the objects after the RemoveTopicRecord. An entry goes when
	// the topic's last remote segment reaches DELETE_FINISHED.
	removedNames map[uuid.UUID]string
	// acls are the ACL bindings by ID ([AccessControlEntryRecord]).
	acls map[uuid.UUID]authz.ACL
	// scram are the SCRAM credentials by user and mechanism
	// ([UserScramCredentialRecord]).
	scram map[scramKey]sasl.ScramCredential
	// quotas are the client quotas by entity, then key
	// ([ClientQuotaRecord]); an entity without values is absent.
	quotas map[QuotaEntity]map[string]float64
	// clusterID is the quorum's cluster id ([ClusterIDRecord]); "" until
	// recorded.
	clusterID string
	// defaults are the static broker configs planners fall back to
	// ([State.SetDefaults]); not part of the image (never snapshotted,
	// never compared), carried by Clone.
	defaults Defaults
}

// Defaults are the broker-level configs a controller's planners fall back
// to when neither a topic nor the cluster-wide dynamic default (broker
// resource "") sets one: the controller's own server.properties values.
// The zero value means Kafka's defaults (min.insync.replicas 1,
// unclean.leader.election.enable false).
type Defaults struct {
	MinInsyncReplicas     int32
	UncleanLeaderElection bool
}

// SetDefaults sets the static broker defaults planners use. It changes no
// part of the image: Marshal ignores it, and replicas applying the same
// records agree whatever their defaults (they only steer planning).
func (s *State) SetDefaults(d Defaults) { s.defaults = d }

// NewState returns an empty image at offset -1 (nothing applied).
func NewState() *State {
	return &State{
		offset:       -1,
		features:     map[string]int16{},
		brokers:      map[int32]*BrokerInfo{},
		topics:       map[uuid.UUID]*topicState{},
		topicsByName: map[string]uuid.UUID{},
		configs:      map[configKey]map[string]string{},
		remote:       map[TopicPartition]map[uuid.UUID]*RemoteSegmentInfo{},
		remoteTopics: map[uuid.UUID]int{},
		removedNames: map[uuid.UUID]string{},
		acls:         map[uuid.UUID]authz.ACL{},
		scram:        map[scramKey]sasl.ScramCredential{},
		quotas:       map[QuotaEntity]map[string]float64{},
	}
}

// ClusterID returns the cluster id the quorum recorded ([ClusterIDRecord]),
// "" before the first leader has recorded one.
func (s *State) ClusterID() string { return s.clusterID }

// validClusterID accepts what Kafka's meta.properties may carry: a non-empty
// id of letters, digits, '-' and '_' (a URL-safe base64 UUID, as Kafka
// generates, or an operator's own), at most 255 bytes.
func validClusterID(id string) error {
	if id == "" || len(id) > 255 {
		return fmt.Errorf("%d bytes, want 1 to 255", len(id))
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%q has illegal character %q", id, c)
		}
	}
	return nil
}

// Offset returns the last applied offset, -1 if none.
func (s *State) Offset() int64 { return s.offset }

// AdvanceTo marks offset as applied without a record: for log entries that
// carry no metadata record (Raft configuration changes, empty entries) or
// whose record Apply refused.
func (s *State) AdvanceTo(offset int64) error {
	if offset <= s.offset {
		return fmt.Errorf("%w: %d <= %d", ErrOffsetRegression, offset, s.offset)
	}
	s.offset = offset
	return nil
}

// Clone returns a deep copy, for planning speculatively ahead of apply.
func (s *State) Clone() *State {
	c := NewState()
	c.offset = s.offset
	c.maxBrokerEpoch = s.maxBrokerEpoch
	c.clusterID = s.clusterID
	c.defaults = s.defaults
	for k, v := range s.features {
		c.features[k] = v
	}
	for id, b := range s.brokers {
		cb := copyBroker(*b)
		c.brokers[id] = &cb
	}
	for id, t := range s.topics {
		ct := &topicState{name: t.name, id: t.id, partitions: make([]*PartitionInfo, len(t.partitions))}
		for i, p := range t.partitions {
			cp := copyPartition(*p)
			ct.partitions[i] = &cp
		}
		c.topics[id] = ct
		c.topicsByName[t.name] = id
	}
	for k, m := range s.configs {
		cm := make(map[string]string, len(m))
		for n, v := range m {
			cm[n] = v
		}
		c.configs[k] = cm
	}
	for tp, m := range s.remote {
		cm := make(map[uuid.UUID]*RemoteSegmentInfo, len(m))
		for id, seg := range m {
			cs := copySegment(*seg)
			cm[id] = &cs
		}
		c.remote[tp] = cm
	}
	for id, n := range s.remoteTopics {
		c.remoteTopics[id] = n
	}
	for id, name := range s.removedNames {
		c.removedNames[id] = name
	}
	for id, a := range s.acls {
		c.acls[id] = a
	}
	for k, v := range s.scram {
		c.scram[k] = v // the slices are never changed in place
	}
	for e, vals := range s.quotas {
		m := make(map[string]float64, len(vals))
		for k, v := range vals {
			m[k] = v
		}
		c.quotas[e] = m
	}
	return c
}

func copyBroker(b BrokerInfo) BrokerInfo {
	b.Listeners = slices.Clone(b.Listeners)
	return b
}

func copyPartition(p PartitionInfo) PartitionInfo {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	p.ELR = slices.Clone(p.ELR)
	p.LastKnownELR = slices.Clone(p.LastKnownELR)
	p.AddingReplicas = slices.Clone(p.AddingReplicas)
	p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
	return p
}

func copySegment(s RemoteSegmentInfo) RemoteSegmentInfo {
	s.LeaderEpochs = slices.Clone(s.LeaderEpochs)
	return s
}

// Broker returns broker id's registration.
func (s *State) Broker(id int32) (BrokerInfo, bool) {
	b, ok := s.brokers[id]
	if !ok {
		return BrokerInfo{}, false
	}
	return copyBroker(*b), true
}

// Brokers returns every registered broker, by id.
func (s *State) Brokers() []BrokerInfo {
	out := make([]BrokerInfo, 0, len(s.brokers))
	for _, id := range sortedKeys(s.brokers) {
		out = append(out, copyBroker(*s.brokers[id]))
	}
	return out
}

// BrokerEpoch returns broker id's current epoch, or -1 if unregistered.
func (s *State) BrokerEpoch(id int32) int64 {
	if b, ok := s.brokers[id]; ok {
		return b.Epoch
	}
	return -1
}

// MaxBrokerEpoch returns the highest broker epoch ever applied.
func (s *State) MaxBrokerEpoch() int64 { return s.maxBrokerEpoch }

// Feature returns a finalized feature level, 0 if unset.
func (s *State) Feature(name string) int16 { return s.features[name] }

func (s *State) topicInfo(t *topicState) TopicInfo {
	return TopicInfo{Name: t.name, ID: t.id, NumPartitions: int32(len(t.partitions))}
}

// TopicByName returns the topic called name.
func (s *State) TopicByName(name string) (TopicInfo, bool) {
	id, ok := s.topicsByName[name]
	if !ok {
		return TopicInfo{}, false
	}
	return s.topicInfo(s.topics[id]), true
}

// TopicByID returns the topic with the given ID.
func (s *State) TopicByID(id uuid.UUID) (TopicInfo, bool) {
	t, ok := s.topics[id]
	if !ok {
		return TopicInfo{}, false
	}
	return s.topicInfo(t), true
}

// TopicNameByID returns the name of topic id. exists reports whether the
// topic is live; known whether its name is known at all: live, or removed
// while it still has remote segments (the name is kept, because object keys
// carry it, until the topic's last remote segment reaches DELETE_FINISHED).
// A removed topic restored from a version 0 snapshot, which did not record
// removed names, is not known.
func (s *State) TopicNameByID(id uuid.UUID) (name string, exists, known bool) {
	if t, ok := s.topics[id]; ok {
		return t.name, true, true
	}
	if name, ok := s.removedNames[id]; ok {
		return name, false, true
	}
	return "", false, false
}

// hasRemote reports whether any remote segment of topic ID id is in the
// image, whether the topic is live or removed.
func (s *State) hasRemote(id uuid.UUID) bool { return s.remoteTopics[id] > 0 }

// Topics returns every topic, by name.
func (s *State) Topics() []TopicInfo {
	out := make([]TopicInfo, 0, len(s.topics))
	for _, name := range sortedKeys(s.topicsByName) {
		out = append(out, s.topicInfo(s.topics[s.topicsByName[name]]))
	}
	return out
}

func (s *State) partition(topicID uuid.UUID, p int32) *PartitionInfo {
	t, ok := s.topics[topicID]
	if !ok || p < 0 || int(p) >= len(t.partitions) {
		return nil
	}
	return t.partitions[p]
}

// Partition returns one partition.
func (s *State) Partition(topicID uuid.UUID, p int32) (PartitionInfo, bool) {
	pi := s.partition(topicID, p)
	if pi == nil {
		return PartitionInfo{}, false
	}
	return copyPartition(*pi), true
}

// Partitions returns a topic's partitions in order, nil for an unknown topic.
func (s *State) Partitions(topicID uuid.UUID) []PartitionInfo {
	t, ok := s.topics[topicID]
	if !ok {
		return nil
	}
	out := make([]PartitionInfo, len(t.partitions))
	for i, p := range t.partitions {
		out[i] = copyPartition(*p)
	}
	return out
}

// TopicConfig returns the configs set on a topic (not the defaults), nil
// when none are set.
func (s *State) TopicConfig(name string) map[string]string {
	return s.Config(ResourceTopic, name)
}

// Config returns the configs set on a resource; for brokers, name is the
// broker id in decimal or "" for the cluster default.
func (s *State) Config(typ ResourceType, name string) map[string]string {
	m := s.configs[configKey{typ, name}]
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// RemoteSegments returns a partition's remote segments ordered by base
// offset (then segment id). Segments of deleted topics stay listed until
// they reach DELETE_FINISHED.
func (s *State) RemoteSegments(topicID uuid.UUID, p int32) []RemoteSegmentInfo {
	m := s.remote[TopicPartition{topicID, p}]
	out := make([]RemoteSegmentInfo, 0, len(m))
	for _, seg := range m {
		out = append(out, copySegment(*seg))
	}
	slices.SortFunc(out, func(a, b RemoteSegmentInfo) int {
		if a.BaseOffset != b.BaseOffset {
			if a.BaseOffset < b.BaseOffset {
				return -1
			}
			return 1
		}
		return compareUUID(a.SegmentID, b.SegmentID)
	})
	return out
}

// FinishedRemoteSegmentAt returns the COPY_FINISHED segment of the
// partition that holds offset (of several, the one [RemoteSegments] sorts
// last: highest base offset, then segment ID) and the finished segment
// that starts right after it (nil when none; of several, the lowest
// segment ID). It walks the partition's segments once and copies only the
// two it returns: the remote fetch path asks this on every fetch, and a
// long-retention partition holds thousands of segments.
func (s *State) FinishedRemoteSegmentAt(topicID uuid.UUID, p int32, offset int64) (seg RemoteSegmentInfo, next *RemoteSegmentInfo, ok bool) {
	m := s.remote[TopicPartition{topicID, p}]
	var hit *RemoteSegmentInfo
	for _, c := range m {
		if c.State != CopyFinished || c.BaseOffset > offset || offset > c.EndOffset {
			continue
		}
		if hit == nil || c.BaseOffset > hit.BaseOffset || c.BaseOffset == hit.BaseOffset && compareUUID(c.SegmentID, hit.SegmentID) > 0 {
			hit = c
		}
	}
	if hit == nil {
		return RemoteSegmentInfo{}, nil, false
	}
	var after *RemoteSegmentInfo
	for _, c := range m {
		if c.State == CopyFinished && c.BaseOffset == hit.EndOffset+1 && (after == nil || compareUUID(c.SegmentID, after.SegmentID) < 0) {
			after = c
		}
	}
	if after != nil {
		n := copySegment(*after)
		next = &n
	}
	return copySegment(*hit), next, true
}

// RemotePartitions returns every partition that has remote segments,
// including partitions of deleted topics, sorted.
func (s *State) RemotePartitions() []TopicPartition {
	out := make([]TopicPartition, 0, len(s.remote))
	for tp := range s.remote {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTP)
	return out
}

func compareUUID(a, b uuid.UUID) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func compareTP(a, b TopicPartition) int {
	if c := compareUUID(a.TopicID, b.TopicID); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

func sortedKeys[K int32 | string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
