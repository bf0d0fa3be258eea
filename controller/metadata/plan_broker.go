package metadata

import (
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
)

// RegisterBrokerRequest asks to register a broker (Kafka's
// BrokerRegistration).
type RegisterBrokerRequest struct {
	BrokerID      int32
	IncarnationID uuid.UUID
	Listeners     []Listener
	Rack          string
	// ClusterID is the cluster id the broker's meta.properties records,
	// "" on a node that has none yet (its first start): it takes the
	// quorum's from the response. A different id than the image's is
	// refused (INCONSISTENT_CLUSTER_ID): the node belongs to another
	// cluster.
	ClusterID string `json:",omitempty"`
	// PreviousBrokerEpoch is the broker epoch the broker's clean-shutdown
	// marker recorded (BrokerRegistration v3, KIP-966), or, re-registering
	// while running, its current epoch; 0 or -1 when it has none: it did
	// not shut down cleanly (or never registered before).
	PreviousBrokerEpoch int64 `json:",omitempty"`
	// ExistingSessionAlive is the caller's liveness verdict on the current
	// registration of BrokerID (if any): true if its heartbeat session has
	// not expired. A live session held by another incarnation makes the
	// request a DUPLICATE_BROKER_REGISTRATION. Liveness is time, which this
	// package never reads, so the caller passes it in.
	ExistingSessionAlive bool
}

// RegisterBrokerResponse answers a registration.
type RegisterBrokerResponse struct {
	BrokerEpoch int64
	// ClusterID is the quorum's cluster id, which the broker keeps in its
	// meta.properties and reports in Metadata and DescribeCluster.
	ClusterID string `json:",omitempty"`
}

// PlanRegisterBroker decides a registration. Every registration, even a
// retry by the same incarnation, gets a new epoch (MaxBrokerEpoch+1), so a
// restarted broker's old session can never be confused with its new one.
// The broker registers fenced; it is unfenced by a heartbeat once caught up.
// If the broker was registered and still led or replicated partitions in
// the ISR, those leaderships move away first (as in [State.PlanFenceBroker]),
// since a fenced broker must lead nothing.
//
// Unclean shutdown detection (KIP-966): a registered broker whose
// PreviousBrokerEpoch is not its registered epoch restarted without a
// clean-shutdown marker of that incarnation and may have lost records it
// had acknowledged to the leader. As Kafka's handleBrokerUncleanShutdown
// (with ELR enabled) does, it leaves every ISR and every ELR, even as the
// last member of an ISR (that partition is then offline until an ELR or
// last-known-ELR member can lead, or unclean election allows another); it
// is remembered in the last known ELR. It never leads at that point: the
// re-registration moves its leaderships first. It rejoins ISRs only
// through its leaders' AlterPartition, once caught up.
//
// Errors: INVALID_REQUEST (bad id or nil incarnation),
// INCONSISTENT_CLUSTER_ID (req.ClusterID is not the image's; an image
// without one checks nothing and answers "": the controller plans
// [State.PlanClusterID] before any registration),
// DUPLICATE_BROKER_REGISTRATION (another incarnation holds a live session).
func (s *State) PlanRegisterBroker(req RegisterBrokerRequest) ([]Record, RegisterBrokerResponse, error) {
	if req.BrokerID < 0 || req.IncarnationID == uuid.Nil {
		return nil, RegisterBrokerResponse{}, fmt.Errorf("%w: broker id %d incarnation %s", kerr.InvalidRequest, req.BrokerID, req.IncarnationID)
	}
	if req.ClusterID != "" && s.clusterID != "" && req.ClusterID != s.clusterID {
		return nil, RegisterBrokerResponse{}, fmt.Errorf("%w: broker %d has cluster.id %s in its meta.properties, but this cluster's id is %s: it belongs to another cluster (or its data directory does)", kerr.InconsistentClusterID, req.BrokerID, req.ClusterID, s.clusterID)
	}
	for i, l := range req.Listeners {
		if l.Name == "" || l.Port < 0 || l.Port > 65535 {
			return nil, RegisterBrokerResponse{}, fmt.Errorf("%w: listener %d (%q port %d)", kerr.InvalidRequest, i, l.Name, l.Port)
		}
	}
	var recs []Record
	if old, ok := s.brokers[req.BrokerID]; ok {
		if old.IncarnationID != req.IncarnationID && req.ExistingSessionAlive {
			return nil, RegisterBrokerResponse{}, fmt.Errorf("%w: broker %d is registered by incarnation %s with a live session", kerr.DuplicateBrokerRegistration, req.BrokerID, old.IncarnationID)
		}
		recs = s.moveAwayFrom(req.BrokerID, s.UncleanLeaderElection, req.PreviousBrokerEpoch != old.Epoch)
	}
	epoch := s.maxBrokerEpoch + 1
	recs = append(recs, &RegisterBrokerRecord{
		BrokerID:      req.BrokerID,
		IncarnationID: req.IncarnationID,
		BrokerEpoch:   epoch,
		Listeners:     slices.Clone(req.Listeners),
		Rack:          req.Rack,
		Fenced:        true,
	})
	return recs, RegisterBrokerResponse{BrokerEpoch: epoch, ClusterID: s.clusterID}, nil
}

// PlanClusterID plans the [ClusterIDRecord] of an image that has none:
// candidate, the id the new leader proposes (its own meta.properties', so
// that a cluster created before the record existed keeps the id its first
// node had, or a fresh one). Nothing once an id is recorded. Errors:
// INVALID_REQUEST for a candidate that is not a valid cluster id.
func (s *State) PlanClusterID(candidate string) ([]Record, error) {
	if s.clusterID != "" {
		return nil, nil
	}
	if err := validClusterID(candidate); err != nil {
		return nil, fmt.Errorf("%w: cluster id: %v", kerr.InvalidRequest, err)
	}
	return []Record{&ClusterIDRecord{ClusterID: candidate}}, nil
}

// BrokerHeartbeatRequest is a broker's periodic heartbeat (Kafka's
// BrokerHeartbeat).
type BrokerHeartbeatRequest struct {
	BrokerID    int32
	BrokerEpoch int64
	// CurrentMetadataOffset is the highest metadata offset the broker has
	// applied; it has caught up once this reaches its registration's offset.
	CurrentMetadataOffset int64
	WantFence             bool
	WantShutDown          bool
}

// BrokerHeartbeatResponse answers a heartbeat, as the state will be once
// the planned records apply.
type BrokerHeartbeatResponse struct {
	IsCaughtUp     bool
	IsFenced       bool
	ShouldShutDown bool
	// MetadataOffset is the offset of the controller leader's last applied
	// entry with records when it answered (set by the controller, not the
	// planner; 0, absent on the wire, from controllers before it): a
	// broker whose view stays below it follows a metadata stream that is
	// behind (a lagging controller, a stuck connection) and reopens it.
	MetadataOffset int64 `json:",omitempty"`
}

// PlanBrokerHeartbeat decides what a heartbeat changes:
//   - WantShutDown (controlled shutdown, Kafka's CONTROLLED_SHUTDOWN →
//     SHUTDOWN_NOW): the broker is marked in controlled shutdown, leaves
//     every ISR (the last member of one stays, leader -1, as fencing
//     leaves it) and its leaderships move to other ISR (or ELR) members,
//     in the same entry. ShouldShutDown is true once it leads nothing in
//     the image as it will be when these records apply; it is then fenced
//     too (it stops serving), as Kafka fences a broker told to shut down
//     now. A fenced broker is told to shut down at once. Kafka also waits
//     for every broker to have caught up with the leadership changes; here
//     the brokers follow the Watch stream and the stopping broker's
//     clients retry on NOT_LEADER_OR_FOLLOWER until they have;
//   - fenced, caught up and not WantFence: the broker is unfenced, and every
//     leaderless partition it can lead gets it as leader;
//   - unfenced and WantFence: fenced as by [State.PlanFenceBroker].
//
// The caller resets the broker's session timer on any successful heartbeat.
// Errors: BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH.
func (s *State) PlanBrokerHeartbeat(req BrokerHeartbeatRequest) ([]Record, BrokerHeartbeatResponse, error) {
	b, ok := s.brokers[req.BrokerID]
	if !ok {
		return nil, BrokerHeartbeatResponse{}, fmt.Errorf("%w: broker %d", kerr.BrokerIDNotRegistered, req.BrokerID)
	}
	if req.BrokerEpoch != b.Epoch {
		return nil, BrokerHeartbeatResponse{}, fmt.Errorf("%w: broker %d epoch %d, current %d", kerr.StaleBrokerEpoch, req.BrokerID, req.BrokerEpoch, b.Epoch)
	}
	resp := BrokerHeartbeatResponse{
		IsCaughtUp: req.CurrentMetadataOffset >= b.RegistrationOffset,
		IsFenced:   b.Fenced,
	}
	var recs []Record
	switch {
	case req.WantShutDown && b.Fenced:
		resp.ShouldShutDown = true
	case req.WantShutDown:
		recs = s.moveAwayFrom(b.ID, s.UncleanLeaderElection, false)
		change := &BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, InControlledShutdown: ptr(true)}
		if s.leadsAfter(b.ID, recs) == 0 {
			change.Fenced = ptr(true)
			resp.IsFenced, resp.ShouldShutDown = true, true
		}
		recs = append(recs, change)
	case b.Fenced && resp.IsCaughtUp && !req.WantFence && !b.InControlledShutdown:
		recs = append(recs, &BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: ptr(false)})
		recs = append(recs, s.electLeaderless(b.ID, s.UncleanLeaderElection)...)
		resp.IsFenced = false
	case !b.Fenced && req.WantFence:
		recs = s.PlanFenceBroker(b.ID, nil)
		resp.IsFenced = true
	}
	// A broker in controlled shutdown keeps being told to shut down.
	resp.ShouldShutDown = resp.ShouldShutDown || b.InControlledShutdown
	return recs, resp, nil
}

// leadsAfter counts the partitions broker id leads once recs (partition
// changes planned on s) apply.
func (s *State) leadsAfter(id int32, recs []Record) int {
	moved := map[TopicPartition]int32{}
	for _, r := range recs {
		if pc, ok := r.(*PartitionChangeRecord); ok && pc.Leader != nil {
			moved[TopicPartition{pc.TopicID, pc.Partition}] = *pc.Leader
		}
	}
	n := 0
	s.eachPartition(func(_ *topicState, p *PartitionInfo) {
		leader := p.Leader
		if l, ok := moved[TopicPartition{p.TopicID, p.Partition}]; ok {
			leader = l
		}
		if leader == id {
			n++
		}
	})
	return n
}

// PlanFenceBroker fences broker id (its session expired, or it asked to be
// fenced) and moves its leaderships away ([State.changePartition] has the
// rules, in Kafka's order):
//   - it leaves every ISR (KIP-841), except that the last member of an ISR
//     stays, as Kafka keeps it: the partition goes offline (leader -1)
//     until it returns, or until another electable replica does;
//   - each partition it led elects the first acceptable ISR member in
//     replica order, else an acceptable ELR member (KIP-966), else (with
//     uncleanAllowed(topic), unclean.leader.election.enable) any
//     acceptable replica, RECOVERING (KIP-704); else it is offline;
//   - members removed while the ISR is below the effective min ISR join
//     the ELR.
//
// uncleanAllowed nil means [State.UncleanLeaderElection]. An unknown broker
// yields no records; an already-fenced one yields only leadership moves it
// still needs.
func (s *State) PlanFenceBroker(id int32, uncleanAllowed func(topic string) bool) []Record {
	b, ok := s.brokers[id]
	if !ok {
		return nil
	}
	if uncleanAllowed == nil {
		uncleanAllowed = s.UncleanLeaderElection
	}
	recs := s.moveAwayFrom(id, uncleanAllowed, false)
	if !b.Fenced {
		recs = append(recs, &BrokerRegistrationChangeRecord{BrokerID: id, BrokerEpoch: b.Epoch, Fenced: ptr(true)})
	}
	return recs
}

// PlanUnregisterBroker plans Kafka's UnregisterBroker (KIP-631): the
// broker leaves every ISR and leadership as if fenced (the rules of
// [State.PlanFenceBroker]; partitions it alone holds stay with it, led by
// no one), then its registration is removed. Its place in replica lists
// stays (an offline replica, as in Kafka): drain a broker before
// unregistering it. A broker that is still running registers again at its
// next heartbeat (Kafka's broker does the same). Errors:
// BROKER_ID_NOT_REGISTERED.
func (s *State) PlanUnregisterBroker(id int32) ([]Record, error) {
	b, ok := s.brokers[id]
	if !ok {
		return nil, fmt.Errorf("%w: broker %d", kerr.BrokerIDNotRegistered, id)
	}
	recs := s.moveAwayFrom(id, s.UncleanLeaderElection, false)
	return append(recs, &UnregisterBrokerRecord{BrokerID: id, BrokerEpoch: b.Epoch}), nil
}

// eligible reports whether broker id may lead or join an ISR; except is a
// broker to treat as ineligible regardless (the one being fenced).
func (s *State) eligible(id, except int32) bool {
	if id == except {
		return false
	}
	b, ok := s.brokers[id]
	return ok && !b.Fenced && !b.InControlledShutdown
}

// eachPartition visits every partition in a deterministic order: topics by
// name, then partition number.
func (s *State) eachPartition(f func(t *topicState, p *PartitionInfo)) {
	for _, name := range sortedKeys(s.topicsByName) {
		t := s.topics[s.topicsByName[name]]
		for _, p := range t.partitions {
			f(t, p)
		}
	}
}

// moveAwayFrom plans the partition changes that take broker id out of
// every ISR and leadership; see PlanFenceBroker for the rules. With
// uncleanShutdown (KIP-966's handleBrokerUncleanShutdown: the broker
// restarted without its clean-shutdown marker, and may have lost its
// unflushed tail) it leaves every ELR too, and even the last place in an
// ISR: electing it as the last replica standing is exactly what KIP-966
// prevents. It is then remembered in the last known ELR.
func (s *State) moveAwayFrom(id int32, unclean func(topic string) bool, uncleanShutdown bool) []Record {
	var recs []Record
	shutdownID := NoLeader
	if uncleanShutdown {
		shutdownID = id
	}
	s.eachPartition(func(t *topicState, p *PartitionInfo) {
		inISR := slices.Contains(p.ISR, id)
		inELR := uncleanShutdown && slices.Contains(p.ELR, id)
		if !inISR && !inELR && p.Leader != id {
			return
		}
		target := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == id })
		if len(target) == 0 && !uncleanShutdown {
			target = []int32{id} // the last member stays (leader -1 until it returns)
		}
		res := s.changePartition(t, p, target, changeOpts{
			acceptable:      func(r int32) bool { return s.eligible(r, id) },
			mustElect:       p.Leader == id,
			unclean:         unclean(t.name),
			uncleanShutdown: shutdownID,
		})
		if res.rec != nil {
			recs = append(recs, res.rec)
		}
	})
	return recs
}

// electLeaderless plans elections for leaderless partitions that have
// broker id (just unfenced) as a replica: an ISR, ELR or last known ELR
// member leads again, or (unclean allowed) any acceptable replica. The
// broker is not yet unfenced in s, so it is passed in as eligible.
func (s *State) electLeaderless(id int32, unclean func(topic string) bool) []Record {
	var recs []Record
	s.eachPartition(func(t *topicState, p *PartitionInfo) {
		if p.Leader != NoLeader || !slices.Contains(p.Replicas, id) {
			return
		}
		res := s.changePartition(t, p, p.ISR, changeOpts{
			acceptable:      func(r int32) bool { return r == id || s.eligible(r, -1) },
			unclean:         unclean(t.name),
			uncleanShutdown: NoLeader,
		})
		if res.rec != nil {
			recs = append(recs, res.rec)
		}
	})
	return recs
}

// PlanReplicationFeature plans, once, what a controller of a replicating
// version records at the start of its term: the [FeatureReplication]
// level, preceded — only if the image has no such level, i.e. was written
// before replication existed — by the correction of every led partition's
// ISR to the leader alone. Those versions listed every replica in the ISR
// although only the leader held records; Metadata reported them in sync
// and an election would have picked them. With the level recorded, an
// ISR is what leaders reported through AlterPartition and is never
// rewritten. Nothing once the level is recorded.
//
// A leaderless partition of such an image whose ISR lists several brokers
// is left alone: which of them holds the records is not known (versions
// since the one-replica limit always left a leaderless partition with its
// last leader alone in the ISR).
func (s *State) PlanReplicationFeature() []Record {
	if s.Feature(FeatureReplication) != 0 {
		return nil
	}
	var recs []Record
	s.eachPartition(func(t *topicState, p *PartitionInfo) {
		if p.Leader == NoLeader || slices.Equal(p.ISR, []int32{p.Leader}) {
			return
		}
		recs = append(recs, &PartitionChangeRecord{TopicID: p.TopicID, Partition: p.Partition, ISR: []int32{p.Leader}})
	})
	return append(recs, &FeatureLevelRecord{Name: FeatureReplication, Level: ReplicationVersion})
}

func ptr[T any](v T) *T { return &v }
