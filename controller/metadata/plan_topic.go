package metadata

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// errUnreachableRF is Kafka's INVALID_REPLICATION_FACTOR answer for a
// replication factor above the number of usable (registered, unfenced, not
// shutting down) brokers, in Kafka's words.
func errUnreachableRF(rf, usable int) error {
	return fmt.Errorf("%w: Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", kerr.InvalidReplicationFactor, rf, rf, usable)
}

// CreateTopic is one topic of a [CreateTopicsRequest].
type CreateTopic struct {
	Name string
	// NumPartitions and ReplicationFactor of -1 take the request's
	// defaults (0 is invalid, as in Kafka); both must be -1 or 0 when
	// Assignments is given.
	NumPartitions     int32
	ReplicationFactor int16
	// Assignments, if non-nil, gives each partition's replicas (index =
	// partition) instead of automatic placement; the first replica is the
	// preferred leader.
	Assignments [][]int32
	Configs     map[string]string
	// TopicID, if not the nil UUID, is the ID the topic gets instead of a
	// generated one: a restore recreates a topic under the ID its objects
	// sit under in the bucket. Omitted from JSON when nil, so requests
	// without it look as they did before the field existed.
	TopicID uuid.UUID `json:",omitzero"`
}

// CreateTopicsRequest asks to create topics (Kafka's CreateTopics).
type CreateTopicsRequest struct {
	Topics       []CreateTopic
	ValidateOnly bool
	// DefaultPartitions and DefaultReplicationFactor are the broker's
	// num.partitions and default.replication.factor; 0 means 1.
	DefaultPartitions        int32
	DefaultReplicationFactor int16
}

// CreateTopicResult is the outcome for one topic, in request order.
type CreateTopicResult struct {
	Name              string
	TopicID           uuid.UUID // zero on error
	Err               error     // wraps a kerr error; nil on success
	NumPartitions     int32
	ReplicationFactor int16
	Configs           map[string]string
}

// PlanCreateTopics decides topic creations. For each valid topic it plans a
// TopicRecord, one PartitionRecord per partition (leader = the first
// eligible replica, ISR = every eligible replica, epochs 0: all logs are
// empty, so all in sync) and one ConfigRecord per config, sorted by
// name. Topic IDs come from rng, as does the placement's starting point, so
// the same state, request and seed always give the same records.
//
// Replicas are placed over registered, unfenced brokers not in controlled
// shutdown, following Kafka's rack-aware assignment: brokers are listed
// alternating between racks (racks sorted, brokers by id within a rack);
// partition p's first replica is list[(start+p) mod n] and the followers
// walk the list from a shifted position, taking a broker from a rack not
// yet used by the partition while one remains. With racks unset this is
// Kafka's rack-unaware round robin. Brokers without a rack form the rack "".
//
// A topic given a TopicID gets that ID. Generated IDs avoid the IDs of
// live topics, of removed topics whose remote segments remain, and the IDs
// given in the same request.
//
// Errors per topic: INVALID_REQUEST (name or given TopicID repeated in the
// request, counts given with Assignments, or a given TopicID whose removed
// topic's remote segments are still in the image, i.e. still being
// deleted), INVALID_TOPIC_EXCEPTION (illegal name, or one colliding with an
// existing topic once '.' and '_' are equated), TOPIC_ALREADY_EXISTS (the
// name, or a given TopicID, belongs to a live topic), INVALID_PARTITIONS,
// INVALID_REPLICATION_FACTOR (below 1, or above the number of usable
// brokers, asked for or defaulted: Kafka's "Unable to replicate the
// partition N time(s)" message), INVALID_REPLICA_ASSIGNMENT,
// INVALID_CONFIG. With ValidateOnly no records are returned but results are
// computed as if they were.
func (s *State) PlanCreateTopics(req CreateTopicsRequest, rng *rand.Rand) ([]Record, []CreateTopicResult) {
	seen := map[string]int{}
	givenIDs := map[uuid.UUID]int{} // given TopicIDs → how often given
	for _, t := range req.Topics {
		seen[t.Name]++
		if t.TopicID != uuid.Nil {
			givenIDs[t.TopicID]++
		}
	}
	usable := s.usableBrokers()
	accepted := map[string]string{}  // collisionKey → name, of topics accepted so far
	assigned := map[uuid.UUID]bool{} // IDs handed out so far in this request
	taken := func(id uuid.UUID) bool { return givenIDs[id] > 0 || assigned[id] }
	var recs []Record
	results := make([]CreateTopicResult, len(req.Topics))
	for i, t := range req.Topics {
		res := &results[i]
		res.Name = t.Name
		if seen[t.Name] > 1 {
			res.Err = fmt.Errorf("%w: topic %q appears %d times in the request", kerr.InvalidRequest, t.Name, seen[t.Name])
			continue
		}
		if t.TopicID != uuid.Nil && givenIDs[t.TopicID] > 1 {
			res.Err = fmt.Errorf("%w: topic id %s appears %d times in the request", kerr.InvalidRequest, t.TopicID, givenIDs[t.TopicID])
			continue
		}
		assign, err := s.checkNewTopic(t, req, usable, rng)
		if err != nil {
			res.Err = err
			continue
		}
		if other, ok := accepted[collisionKey(t.Name)]; ok {
			res.Err = fmt.Errorf("%w: topic %q collides with %q in the same request", kerr.InvalidTopicException, t.Name, other)
			continue
		}
		accepted[collisionKey(t.Name)] = t.Name
		id := t.TopicID
		if id == uuid.Nil {
			id = s.newTopicID(rng, taken)
		}
		assigned[id] = true
		res.TopicID = id
		res.NumPartitions = int32(len(assign))
		res.ReplicationFactor = int16(len(assign[0]))
		res.Configs = maps.Clone(t.Configs)
		if req.ValidateOnly {
			res.TopicID = uuid.Nil
			continue
		}
		recs = append(recs, &TopicRecord{Name: t.Name, TopicID: id})
		for p, replicas := range assign {
			recs = append(recs, s.newPartition(id, int32(p), replicas))
		}
		for _, name := range sortedKeys(t.Configs) {
			recs = append(recs, &ConfigRecord{ResourceType: ResourceTopic, ResourceName: t.Name, Name: name, Value: ptr(t.Configs[name])})
		}
	}
	return recs, results
}

// newPartition plans a fresh partition: its ISR is every eligible replica
// in replica order (every log is empty, so every live replica is in
// sync), its leader the first of them (manual assignments may name fenced
// brokers, which stay out of the ISR until their leader adds them).
func (s *State) newPartition(id uuid.UUID, p int32, replicas []int32) *PartitionRecord {
	isr := []int32{}
	for _, r := range replicas {
		if s.eligible(r, -1) {
			isr = append(isr, r)
		}
	}
	leader := NoLeader
	if len(isr) > 0 {
		leader = isr[0]
	}
	return &PartitionRecord{
		TopicID: id, Partition: p,
		Replicas: slices.Clone(replicas), ISR: isr, Leader: leader,
	}
}

// checkNewTopic validates one topic and returns its replica assignment.
func (s *State) checkNewTopic(t CreateTopic, req CreateTopicsRequest, usable []BrokerInfo, rng *rand.Rand) ([][]int32, error) {
	if err := validTopicName(t.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", kerr.InvalidTopicException, err)
	}
	if _, ok := s.topicsByName[t.Name]; ok {
		return nil, fmt.Errorf("%w: topic %q", kerr.TopicAlreadyExists, t.Name)
	}
	if other, ok := s.collidingTopic(t.Name); ok {
		return nil, fmt.Errorf("%w: topic %q collides with existing topic %q", kerr.InvalidTopicException, t.Name, other)
	}
	if t.TopicID != uuid.Nil {
		if live, ok := s.topics[t.TopicID]; ok {
			return nil, fmt.Errorf("%w: topic id %s belongs to topic %q", kerr.TopicAlreadyExists, t.TopicID, live.name)
		}
		if s.hasRemote(t.TopicID) {
			// Apply would refuse the TopicRecord too: the new topic would
			// inherit segments the tiering layer is deleting.
			return nil, fmt.Errorf("%w: topic id %s: remote segments of its removed topic are still being deleted", kerr.InvalidRequest, t.TopicID)
		}
	}
	if err := ValidateTopicConfigs(t.Configs); err != nil {
		return nil, fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
	}
	if t.Assignments != nil {
		if t.NumPartitions > 0 || t.ReplicationFactor > 0 {
			return nil, fmt.Errorf("%w: both assignments and partition count or replication factor given", kerr.InvalidRequest)
		}
		if len(t.Assignments) == 0 {
			return nil, fmt.Errorf("%w: empty assignments", kerr.InvalidPartitions)
		}
		if err := s.checkManualAssignment(t.Assignments, len(t.Assignments[0])); err != nil {
			return nil, err
		}
		return t.Assignments, nil
	}
	n, rf := t.NumPartitions, t.ReplicationFactor
	fromDefault := false
	if n == -1 {
		n = max(req.DefaultPartitions, 1)
	}
	if rf == -1 {
		rf = max(req.DefaultReplicationFactor, 1)
		fromDefault = true
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: %d partitions", kerr.InvalidPartitions, n)
	}
	if rf < 1 {
		return nil, fmt.Errorf("%w: replication factor %d", kerr.InvalidReplicationFactor, rf)
	}
	if int(rf) > len(usable) {
		if fromDefault {
			return nil, fmt.Errorf("%w (default.replication.factor)", errUnreachableRF(int(rf), len(usable)))
		}
		return nil, errUnreachableRF(int(rf), len(usable))
	}
	return placeReplicas(usable, 0, int(n), int(rf), rng), nil
}

// checkManualAssignment validates explicit replica lists: each of length
// rf, of registered brokers, without repeats, with at least one eligible.
func (s *State) checkManualAssignment(assign [][]int32, rf int) error {
	for p, replicas := range assign {
		if len(replicas) != rf || rf == 0 {
			return fmt.Errorf("%w: partition %d has %d replicas, want %d", kerr.InvalidReplicaAssignment, p, len(replicas), rf)
		}
		anyEligible := false
		for i, r := range replicas {
			if _, ok := s.brokers[r]; !ok {
				return fmt.Errorf("%w: partition %d: broker %d not registered", kerr.InvalidReplicaAssignment, p, r)
			}
			if slices.Contains(replicas[:i], r) {
				return fmt.Errorf("%w: partition %d: broker %d repeated", kerr.InvalidReplicaAssignment, p, r)
			}
			anyEligible = anyEligible || s.eligible(r, -1)
		}
		if !anyEligible {
			return fmt.Errorf("%w: partition %d: no replica is unfenced", kerr.InvalidReplicaAssignment, p)
		}
	}
	return nil
}

// collidingTopic finds an existing topic whose name equals name once '.' and
// '_' are treated alike (they collide in metric names; Kafka refuses them).
func (s *State) collidingTopic(name string) (string, bool) {
	want := collisionKey(name)
	for _, other := range sortedKeys(s.topicsByName) {
		if other != name && collisionKey(other) == want {
			return other, true
		}
	}
	return "", false
}

// collisionKey is a topic name with '.' replaced by '_'.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// newTopicID draws a random (version 4) UUID from rng that no live topic
// uses, that no removed topic's remote segments still carry, and that
// taken (IDs given in the same request) does not claim.
func (s *State) newTopicID(rng *rand.Rand, taken func(uuid.UUID) bool) uuid.UUID {
	for {
		var id uuid.UUID
		for i := 0; i < 16; i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8; j++ {
				id[i+j] = byte(v >> (8 * j))
			}
		}
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if _, live := s.topics[id]; !live && !s.hasRemote(id) && !taken(id) && id != uuid.Nil {
			return id
		}
	}
}

// usableBrokers returns the brokers replicas may be placed on, by id.
func (s *State) usableBrokers() []BrokerInfo {
	var out []BrokerInfo
	for _, b := range s.Brokers() {
		if !b.Fenced && !b.InControlledShutdown {
			out = append(out, b)
		}
	}
	return out
}

// rackAlternated lists brokers alternating between racks: racks sorted by
// name, brokers by id within a rack; round i takes the i-th broker of each
// rack that has one. E.g. a:{1,2} b:{3} c:{4,5} → 1 3 4 2 5.
func rackAlternated(brokers []BrokerInfo) (list []int32, rackOf map[int32]string, numRacks int) {
	byRack := map[string][]int32{}
	rackOf = map[int32]string{}
	for _, b := range brokers { // already sorted by id
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
		rackOf[b.ID] = b.Rack
	}
	racks := sortedKeys(byRack)
	for i := 0; len(list) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				list = append(list, byRack[r][i])
			}
		}
	}
	return list, rackOf, len(racks)
}

// placeReplicas assigns count partitions, numbered from first, rf replicas
// each, over brokers (sorted by id, rf <= len(brokers)). See
// PlanCreateTopics for the scheme. It follows Kafka's
// assignReplicasToBrokersRackAware: the first replica rotates through the
// rack-alternated list from a random start, and the follower walk starts at
// a random shift that grows by one each time the partitions wrap around the
// list, so followers of consecutive rounds land on different brokers.
func placeReplicas(brokers []BrokerInfo, first, count, rf int, rng *rand.Rand) [][]int32 {
	list, rackOf, numRacks := rackAlternated(brokers)
	n := len(list)
	start := rng.IntN(n)
	shift := rng.IntN(n)
	out := make([][]int32, count)
	for i := 0; i < count; i++ {
		p := first + i
		if p > 0 && p%n == 0 {
			shift++
		}
		lead := (p + start) % n
		replicas := []int32{list[lead]}
		racks := map[string]bool{rackOf[list[lead]]: true}
		for k := 0; len(replicas) < rf; k++ {
			// followerIndex never returns lead itself: the offset is in [1, n-1].
			b := list[(lead+1+(shift+k)%(n-1))%n]
			if slices.Contains(replicas, b) {
				continue
			}
			if racks[rackOf[b]] && len(racks) < numRacks && k < 2*n {
				continue // prefer an unused rack while one remains
			}
			replicas = append(replicas, b)
			racks[rackOf[b]] = true
		}
		out[i] = replicas
	}
	return out
}

// DeleteTopicResult is the outcome of deleting one topic.
type DeleteTopicResult struct {
	Name    string
	TopicID uuid.UUID
	Err     error // UNKNOWN_TOPIC_OR_PARTITION (by name), UNKNOWN_TOPIC_ID (by id), INVALID_REQUEST (nil id)
}

// PlanDeleteTopics plans a RemoveTopicRecord per existing topic named in
// names or ids (a topic named twice is removed once). Results come in the
// order names then ids. Remote segments of deleted topics stay in the image
// for the tiering layer to delete (KIP-405).
func (s *State) PlanDeleteTopics(names []string, ids []uuid.UUID) ([]Record, []DeleteTopicResult) {
	var recs []Record
	results := make([]DeleteTopicResult, 0, len(names)+len(ids))
	removed := map[uuid.UUID]bool{}
	remove := func(id uuid.UUID) {
		if !removed[id] {
			removed[id] = true
			recs = append(recs, &RemoveTopicRecord{TopicID: id})
		}
	}
	for _, name := range names {
		id, ok := s.topicsByName[name]
		if !ok {
			results = append(results, DeleteTopicResult{Name: name, Err: fmt.Errorf("%w: topic %q", kerr.UnknownTopicOrPartition, name)})
			continue
		}
		results = append(results, DeleteTopicResult{Name: name, TopicID: id})
		remove(id)
	}
	for _, id := range ids {
		t, ok := s.topics[id]
		switch {
		case id == uuid.Nil:
			results = append(results, DeleteTopicResult{Err: fmt.Errorf("%w: nil topic id", kerr.InvalidRequest)})
		case !ok:
			results = append(results, DeleteTopicResult{TopicID: id, Err: fmt.Errorf("%w: topic id %s", kerr.UnknownTopicID, id)})
		default:
			results = append(results, DeleteTopicResult{Name: t.name, TopicID: id})
			remove(id)
		}
	}
	return recs, results
}

// CreatePartitionsTopic asks to grow one topic to Count partitions.
type CreatePartitionsTopic struct {
	Name  string
	Count int32
	// Assignments, if non-nil, gives the replicas of each new partition.
	Assignments [][]int32
}

// CreatePartitionsRequest asks to add partitions (Kafka's CreatePartitions).
type CreatePartitionsRequest struct {
	Topics       []CreatePartitionsTopic
	ValidateOnly bool
}

// CreatePartitionsResult is the outcome for one topic, in request order.
type CreatePartitionsResult struct {
	Name string
	Err  error
}

// PlanCreatePartitions plans PartitionRecords growing topics to the
// requested counts, with the replication factor of partition 0 and the
// placement of [State.PlanCreateTopics] (numbering continuing from the
// existing partitions). Errors: INVALID_REQUEST (topic repeated),
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (count not above the
// current one), INVALID_REPLICATION_FACTOR (more replicas than usable
// brokers), INVALID_REPLICA_ASSIGNMENT (assignments of another length
// than the topic's replication factor, unregistered or repeated brokers,
// none unfenced).
func (s *State) PlanCreatePartitions(req CreatePartitionsRequest, rng *rand.Rand) ([]Record, []CreatePartitionsResult) {
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Name]++
	}
	usable := s.usableBrokers()
	var recs []Record
	results := make([]CreatePartitionsResult, len(req.Topics))
	for i, ct := range req.Topics {
		results[i].Name = ct.Name
		if seen[ct.Name] > 1 {
			results[i].Err = fmt.Errorf("%w: topic %q repeated", kerr.InvalidRequest, ct.Name)
			continue
		}
		id, ok := s.topicsByName[ct.Name]
		if !ok {
			results[i].Err = fmt.Errorf("%w: topic %q", kerr.UnknownTopicOrPartition, ct.Name)
			continue
		}
		t := s.topics[id]
		cur := len(t.partitions)
		if int(ct.Count) <= cur {
			results[i].Err = fmt.Errorf("%w: topic %q has %d partitions, asked for %d", kerr.InvalidPartitions, ct.Name, cur, ct.Count)
			continue
		}
		if cur == 0 {
			// Only if a batch creating the topic was partly refused.
			results[i].Err = fmt.Errorf("%w: topic %q has no partitions to take a replication factor from", kerr.InvalidRequest, ct.Name)
			continue
		}
		// The replication factor of the first partition not being
		// reassigned (a reassigning one's replicas are a union); none:
		// REASSIGNMENT_IN_PROGRESS, as Kafka's createPartitions.
		rf := 0
		for _, p := range t.partitions {
			if !p.Reassigning() {
				rf = len(p.Replicas)
				break
			}
		}
		if rf == 0 {
			results[i].Err = fmt.Errorf("%w: every partition of topic %q is being reassigned", kerr.ReassignmentInProgress, ct.Name)
			continue
		}
		add := int(ct.Count) - cur
		var assign [][]int32
		if ct.Assignments != nil {
			if len(ct.Assignments) != add {
				results[i].Err = fmt.Errorf("%w: %d assignments for %d new partitions", kerr.InvalidReplicaAssignment, len(ct.Assignments), add)
				continue
			}
			if err := s.checkManualAssignment(ct.Assignments, rf); err != nil {
				results[i].Err = err
				continue
			}
			assign = ct.Assignments
		} else {
			if rf > len(usable) {
				results[i].Err = errUnreachableRF(rf, len(usable))
				continue
			}
			assign = placeReplicas(usable, cur, add, rf, rng)
		}
		if req.ValidateOnly {
			continue
		}
		for j, replicas := range assign {
			recs = append(recs, s.newPartition(id, int32(cur+j), replicas))
		}
	}
	return recs, results
}
