package metadata

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/google/uuid"
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
}

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
	// clusterID is the quorum's cluster id ([ClusterIDRecord]); "" until
	// recorded.
	clusterID string
}

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
	}
}

// ClusterID returns the cluster id the quorum recorded ([ClusterIDRecord]),
// "" before the first leader has recorded one.
func (s *State) ClusterID() string { return s.clusterID }

// applyClusterID records the cluster id once; repeating it is a no-op.
func (s *State) applyClusterID(r *ClusterIDRecord) error {
	if err := validClusterID(r.ClusterID); err != nil {
		return inconsistent("cluster id: %v", err)
	}
	if s.clusterID != "" && s.clusterID != r.ClusterID {
		return inconsistent("cluster id %q, already %q", r.ClusterID, s.clusterID)
	}
	s.clusterID = r.ClusterID
	return nil
}

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
	return c
}

func copyBroker(b BrokerInfo) BrokerInfo {
	b.Listeners = slices.Clone(b.Listeners)
	return b
}

func copyPartition(p PartitionInfo) PartitionInfo {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
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

// Apply folds the record at offset into the image. It is a pure function of
// (state, offset, record): no clock, no randomness, no map-order dependence.
// A record that contradicts the image returns [ErrInconsistentRecord]
// (wrapped) and leaves the state, including Offset, unchanged. The record is
// not retained: Apply copies what it keeps.
func (s *State) Apply(offset int64, r Record) error {
	if offset <= s.offset {
		return fmt.Errorf("%w: %d <= %d", ErrOffsetRegression, offset, s.offset)
	}
	var err error
	switch r := r.(type) {
	case *RegisterBrokerRecord:
		err = s.applyRegisterBroker(offset, r)
	case *UnregisterBrokerRecord:
		err = s.applyUnregisterBroker(r)
	case *BrokerRegistrationChangeRecord:
		err = s.applyBrokerChange(r)
	case *TopicRecord:
		err = s.applyTopic(r)
	case *PartitionRecord:
		err = s.applyPartition(r)
	case *PartitionChangeRecord:
		err = s.applyPartitionChange(r)
	case *ConfigRecord:
		err = s.applyConfig(r)
	case *RemoveTopicRecord:
		err = s.applyRemoveTopic(r)
	case *RemoteSegmentRecord:
		err = s.applyRemoteSegment(r)
	case *NoOpRecord:
	case *ClusterIDRecord:
		err = s.applyClusterID(r)
	case *FeatureLevelRecord:
		if r.Level < 0 {
			err = inconsistent("feature %q level %d", r.Name, r.Level)
		} else if r.Level == 0 {
			delete(s.features, r.Name)
		} else {
			s.features[r.Name] = r.Level
		}
	default:
		err = inconsistent("foreign record type %T", r)
	}
	if err != nil {
		return err
	}
	s.offset = offset
	return nil
}

func inconsistent(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInconsistentRecord, fmt.Sprintf(format, args...))
}

func (s *State) applyRegisterBroker(offset int64, r *RegisterBrokerRecord) error {
	if r.BrokerID < 0 {
		return inconsistent("broker id %d", r.BrokerID)
	}
	if old, ok := s.brokers[r.BrokerID]; ok && r.BrokerEpoch <= old.Epoch {
		return inconsistent("broker %d epoch %d not above current %d", r.BrokerID, r.BrokerEpoch, old.Epoch)
	}
	s.brokers[r.BrokerID] = &BrokerInfo{
		ID:                 r.BrokerID,
		IncarnationID:      r.IncarnationID,
		Epoch:              r.BrokerEpoch,
		Listeners:          slices.Clone(r.Listeners),
		Rack:               r.Rack,
		Fenced:             r.Fenced,
		RegistrationOffset: offset,
	}
	s.maxBrokerEpoch = max(s.maxBrokerEpoch, r.BrokerEpoch)
	return nil
}

func (s *State) registered(id int32, epoch int64) (*BrokerInfo, error) {
	b, ok := s.brokers[id]
	if !ok {
		return nil, inconsistent("broker %d not registered", id)
	}
	if b.Epoch != epoch {
		return nil, inconsistent("broker %d epoch %d, current %d", id, epoch, b.Epoch)
	}
	return b, nil
}

func (s *State) applyUnregisterBroker(r *UnregisterBrokerRecord) error {
	if _, err := s.registered(r.BrokerID, r.BrokerEpoch); err != nil {
		return err
	}
	delete(s.brokers, r.BrokerID)
	return nil
}

func (s *State) applyBrokerChange(r *BrokerRegistrationChangeRecord) error {
	b, err := s.registered(r.BrokerID, r.BrokerEpoch)
	if err != nil {
		return err
	}
	if r.Fenced != nil {
		b.Fenced = *r.Fenced
	}
	if r.InControlledShutdown != nil {
		b.InControlledShutdown = *r.InControlledShutdown
	}
	return nil
}

func (s *State) applyTopic(r *TopicRecord) error {
	if err := validTopicName(r.Name); err != nil {
		return inconsistent("%v", err)
	}
	if r.TopicID == uuid.Nil {
		return inconsistent("topic %q has the nil topic ID", r.Name)
	}
	if _, ok := s.topicsByName[r.Name]; ok {
		return inconsistent("topic %q exists", r.Name)
	}
	if _, ok := s.topics[r.TopicID]; ok {
		return inconsistent("topic ID %s exists", r.TopicID)
	}
	if s.hasRemote(r.TopicID) {
		// A removed topic's segments are still being deleted under this
		// ID; a new topic would inherit them.
		return inconsistent("topic ID %s has remote segments of a removed topic", r.TopicID)
	}
	s.topics[r.TopicID] = &topicState{name: r.Name, id: r.TopicID}
	s.topicsByName[r.Name] = r.TopicID
	return nil
}

// checkAssignment validates a partition's replicas, ISR and leader.
func checkAssignment(replicas, isr []int32, leader int32) error {
	if len(replicas) == 0 {
		return errors.New("no replicas")
	}
	for i, r := range replicas {
		if r < 0 {
			return fmt.Errorf("replica id %d", r)
		}
		if slices.Contains(replicas[:i], r) {
			return fmt.Errorf("duplicate replica %d", r)
		}
	}
	for i, r := range isr {
		if !slices.Contains(replicas, r) {
			return fmt.Errorf("ISR member %d not a replica", r)
		}
		if slices.Contains(isr[:i], r) {
			return fmt.Errorf("duplicate ISR member %d", r)
		}
	}
	if leader != NoLeader && !slices.Contains(isr, leader) {
		return fmt.Errorf("leader %d not in ISR", leader)
	}
	return nil
}

func (s *State) applyPartition(r *PartitionRecord) error {
	t, ok := s.topics[r.TopicID]
	if !ok {
		return inconsistent("partition of unknown topic %s", r.TopicID)
	}
	if int(r.Partition) != len(t.partitions) {
		return inconsistent("topic %q partition %d, next is %d", t.name, r.Partition, len(t.partitions))
	}
	if err := checkAssignment(r.Replicas, r.ISR, r.Leader); err != nil {
		return inconsistent("topic %q partition %d: %v", t.name, r.Partition, err)
	}
	if r.LeaderEpoch < 0 || r.PartitionEpoch < 0 {
		return inconsistent("topic %q partition %d: negative epoch", t.name, r.Partition)
	}
	t.partitions = append(t.partitions, &PartitionInfo{
		TopicID:        r.TopicID,
		Partition:      r.Partition,
		Replicas:       slices.Clone(r.Replicas),
		ISR:            nonNil(slices.Clone(r.ISR)),
		Leader:         r.Leader,
		LeaderEpoch:    r.LeaderEpoch,
		PartitionEpoch: r.PartitionEpoch,
	})
	return nil
}

func nonNil(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}

func (s *State) applyPartitionChange(r *PartitionChangeRecord) error {
	p := s.partition(r.TopicID, r.Partition)
	if p == nil {
		return inconsistent("change of unknown partition %s/%d", r.TopicID, r.Partition)
	}
	replicas, isr, leader := p.Replicas, p.ISR, p.Leader
	if r.Replicas != nil {
		replicas = r.Replicas
	}
	if r.ISR != nil {
		isr = r.ISR
	}
	if r.Leader != nil {
		leader = *r.Leader
	}
	if err := checkAssignment(replicas, isr, leader); err != nil {
		return inconsistent("partition %s/%d: %v", r.TopicID, r.Partition, err)
	}
	p.Replicas = slices.Clone(replicas)
	p.ISR = nonNil(slices.Clone(isr))
	if r.Leader != nil {
		p.Leader = leader
		p.LeaderEpoch++
	}
	p.PartitionEpoch++
	return nil
}

func (s *State) applyConfig(r *ConfigRecord) error {
	switch r.ResourceType {
	case ResourceTopic:
		if _, ok := s.topicsByName[r.ResourceName]; !ok {
			return inconsistent("config of unknown topic %q", r.ResourceName)
		}
	case ResourceBroker:
		if r.ResourceName != "" {
			if id, err := strconv.ParseInt(r.ResourceName, 10, 32); err != nil || id < 0 || strconv.FormatInt(id, 10) != r.ResourceName {
				return inconsistent("broker config resource %q", r.ResourceName)
			}
		}
	default:
		return inconsistent("resource type %d", r.ResourceType)
	}
	if r.Name == "" {
		return inconsistent("empty config name")
	}
	k := configKey{r.ResourceType, r.ResourceName}
	if r.Value == nil {
		if m := s.configs[k]; m != nil {
			delete(m, r.Name)
			if len(m) == 0 {
				delete(s.configs, k)
			}
		}
		return nil
	}
	m := s.configs[k]
	if m == nil {
		m = map[string]string{}
		s.configs[k] = m
	}
	m[r.Name] = *r.Value
	return nil
}

func (s *State) applyRemoveTopic(r *RemoveTopicRecord) error {
	t, ok := s.topics[r.TopicID]
	if !ok {
		return inconsistent("removal of unknown topic %s", r.TopicID)
	}
	delete(s.topics, r.TopicID)
	delete(s.topicsByName, t.name)
	delete(s.configs, configKey{ResourceTopic, t.name})
	// Remote segments stay, and with them the name their object keys
	// carry: see RemoveTopicRecord.
	if s.hasRemote(r.TopicID) {
		s.removedNames[r.TopicID] = t.name
	}
	return nil
}

// remoteTransitionOK reports whether a segment may move from 'from' to 'to'
// (from is ignored when exists is false).
func remoteTransitionOK(exists bool, from, to RemoteSegmentState) bool {
	if !exists {
		return to == CopyStarted
	}
	if from == to {
		return true
	}
	switch from {
	case CopyStarted:
		return to == CopyFinished || to == DeleteStarted
	case CopyFinished:
		return to == DeleteStarted
	case DeleteStarted:
		return to == DeleteFinished
	}
	return false
}

func (s *State) applyRemoteSegment(r *RemoteSegmentRecord) error {
	tp := TopicPartition{r.TopicID, r.Partition}
	seg, exists := s.remote[tp][r.SegmentID]
	var from RemoteSegmentState
	if exists {
		from = seg.State
	}
	if !remoteTransitionOK(exists, from, r.State) {
		if !exists {
			return inconsistent("segment %s unknown, cannot become %s", r.SegmentID, r.State)
		}
		return inconsistent("segment %s cannot go from %s to %s", r.SegmentID, from, r.State)
	}
	if !exists {
		if err := checkSegment(r); err != nil {
			return inconsistent("segment %s: %v", r.SegmentID, err)
		}
		if s.partition(r.TopicID, r.Partition) == nil {
			return inconsistent("segment %s of unknown partition %s/%d", r.SegmentID, r.TopicID, r.Partition)
		}
		m := s.remote[tp]
		if m == nil {
			m = map[uuid.UUID]*RemoteSegmentInfo{}
			s.remote[tp] = m
			s.remoteTopics[tp.TopicID]++
		}
		m[r.SegmentID] = &RemoteSegmentInfo{
			SegmentID: r.SegmentID, TopicID: r.TopicID, Partition: r.Partition,
			BaseOffset: r.BaseOffset, EndOffset: r.EndOffset, MaxTimestamp: r.MaxTimestamp,
			LeaderEpochs: slices.Clone(r.LeaderEpochs), SizeBytes: r.SizeBytes,
			State: r.State, BrokerID: r.BrokerID, EventTimestamp: r.EventTimestamp,
		}
		return nil
	}
	if r.State == DeleteFinished {
		delete(s.remote[tp], r.SegmentID)
		if len(s.remote[tp]) == 0 {
			delete(s.remote, tp)
			if s.remoteTopics[tp.TopicID]--; s.remoteTopics[tp.TopicID] == 0 {
				delete(s.remoteTopics, tp.TopicID)
				delete(s.removedNames, tp.TopicID) // its last object is gone
			}
		}
		return nil
	}
	seg.State = r.State
	seg.BrokerID = r.BrokerID
	seg.EventTimestamp = r.EventTimestamp
	return nil
}

// checkSegment validates a new segment's description.
func checkSegment(r *RemoteSegmentRecord) error {
	if r.SegmentID == uuid.Nil {
		return errors.New("nil segment id")
	}
	if r.BaseOffset < 0 || r.EndOffset < r.BaseOffset {
		return fmt.Errorf("offsets [%d, %d]", r.BaseOffset, r.EndOffset)
	}
	if r.SizeBytes < 0 {
		return fmt.Errorf("size %d", r.SizeBytes)
	}
	for i, e := range r.LeaderEpochs {
		if e.StartOffset < r.BaseOffset || e.StartOffset > r.EndOffset {
			return fmt.Errorf("epoch %d starts at %d outside the segment", e.Epoch, e.StartOffset)
		}
		if i > 0 && (e.Epoch <= r.LeaderEpochs[i-1].Epoch || e.StartOffset < r.LeaderEpochs[i-1].StartOffset) {
			return errors.New("leader epochs not increasing")
		}
	}
	return nil
}

func sortedKeys[K int32 | string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ApplyBatch applies the records of one log entry, all at offset, in order.
// Records that contradict the image are refused one by one (the others
// still apply) and their errors are joined into the result; the offset
// advances regardless, so a refusal is never retried. Refusal is
// deterministic, so every replica ends in the same state. A batch planned
// against the state it is applied to is never refused.
func (s *State) ApplyBatch(offset int64, recs []Record) error {
	if offset <= s.offset {
		return fmt.Errorf("%w: %d <= %d", ErrOffsetRegression, offset, s.offset)
	}
	var errs []error
	for i, r := range recs {
		// Apply requires a rising offset; the batch shares one, so step
		// the recorded offset back for each record.
		s.offset = offset - 1
		if err := s.Apply(offset, r); err != nil {
			errs = append(errs, fmt.Errorf("record %d: %w", i, err))
		}
	}
	s.offset = offset
	return errors.Join(errs...)
}
