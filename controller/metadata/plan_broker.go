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
		recs = s.moveAwayFrom(req.BrokerID, s.UncleanLeaderElection)
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
}

// PlanBrokerHeartbeat decides what a heartbeat changes:
//   - WantShutDown: controlled shutdown; leadership and ISR membership move
//     away, the broker is fenced and marked in controlled shutdown, and told
//     to shut down;
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
	case req.WantShutDown:
		recs = s.moveAwayFrom(b.ID, s.UncleanLeaderElection)
		if !b.Fenced || !b.InControlledShutdown {
			recs = append(recs, &BrokerRegistrationChangeRecord{
				BrokerID: b.ID, BrokerEpoch: b.Epoch,
				Fenced: ptr(true), InControlledShutdown: ptr(true),
			})
		}
		resp.IsFenced, resp.ShouldShutDown = true, true
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

// PlanFenceBroker fences broker id (its session expired, or it asked to be
// fenced) and moves its leaderships away:
//   - it leaves every ISR it is in as a follower;
//   - each partition it led becomes leaderless (NoLeader, leader epoch
//     bumped) with an ISR of just this broker: replication is not built
//     yet (see [MaxReplicationFactor]), so the leader is the only replica
//     holding the partition's records, whatever an ISR written by an older
//     version says. It leads again, cleanly, when it returns
//     ([State.PlanBrokerHeartbeat] unfencing it); until then the partition
//     is offline (Kafka keeps the last ISR member for the same reason);
//   - a clean election only ever picks a partition's sole ISR member: a
//     leaderless partition whose ISR lists several brokers (left by an
//     older version) does not know which of them holds its records, and
//     stays offline;
//   - with uncleanAllowed(topic) (unclean.leader.election.enable, Kafka's
//     explicit choice of availability over the acknowledged records) the
//     first eligible replica outside the ISR leads instead, with an ISR of
//     just itself: its log is empty, every record of the old leader is lost.
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
	recs := s.moveAwayFrom(id, uncleanAllowed)
	if !b.Fenced {
		recs = append(recs, &BrokerRegistrationChangeRecord{BrokerID: id, BrokerEpoch: b.Epoch, Fenced: ptr(true)})
	}
	return recs
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
// every ISR and leadership; see PlanFenceBroker for the rules.
func (s *State) moveAwayFrom(id int32, unclean func(topic string) bool) []Record {
	var recs []Record
	s.eachPartition(func(t *topicState, p *PartitionInfo) {
		inISR := slices.Contains(p.ISR, id)
		if !inISR && p.Leader != id {
			return
		}
		isr := p.ISR
		switch {
		case p.Leader == id:
			// The leader is the one replica holding the records.
			isr = []int32{id}
		case p.Leader == NoLeader && len(p.ISR) > 1:
			// An older version's ISR: which member holds the records is
			// unknown, so none may become the sole (electable) member.
		case inISR && len(p.ISR) > 1:
			isr = slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == id })
		}
		leader := p.Leader
		if leader == id || leader == NoLeader {
			leader, isr = s.elect(p.Replicas, isr, id, unclean(t.name))
		}
		if rec := partitionChange(p, leader, isr); rec != nil {
			recs = append(recs, rec)
		}
	})
	return recs
}

// elect picks a leader for a partition: its holder (see [holder]) if
// eligible; failing that, with unclean, the first eligible replica, whose
// ISR becomes just itself. It returns the leader (NoLeader if none) and
// the resulting ISR.
func (s *State) elect(replicas, isr []int32, except int32, unclean bool) (int32, []int32) {
	if h, ok := holder(replicas, isr); ok && s.eligible(h, except) {
		return h, isr
	}
	if unclean {
		for _, r := range replicas {
			if s.eligible(r, except) {
				return r, []int32{r}
			}
		}
	}
	return NoLeader, isr
}

// holder returns the replica of a leaderless partition that holds its
// records: the sole member of its ISR. Without replication only the last
// leader has the data, and the planners leave it alone in the ISR when it
// goes (moveAwayFrom). An ISR of several brokers, written by a version that
// listed every replica as in sync, does not say which one it is: no holder.
func holder(replicas, isr []int32) (int32, bool) {
	if len(isr) != 1 || !slices.Contains(replicas, isr[0]) {
		return NoLeader, false
	}
	return isr[0], true
}

// electLeaderless plans elections for leaderless partitions that have
// broker id (just unfenced) as a replica. The broker is not yet unfenced in
// s, so it is passed in as eligible.
func (s *State) electLeaderless(id int32, unclean func(topic string) bool) []Record {
	var recs []Record
	s.eachPartition(func(t *topicState, p *PartitionInfo) {
		if p.Leader != NoLeader || !slices.Contains(p.Replicas, id) {
			return
		}
		ok := func(r int32) bool { return r == id || s.eligible(r, -1) }
		leader, isr := NoLeader, p.ISR
		if h, found := holder(p.Replicas, p.ISR); found && ok(h) {
			leader = h
		}
		if leader == NoLeader && unclean(t.name) {
			for _, r := range p.Replicas {
				if ok(r) {
					leader, isr = r, []int32{r}
					break
				}
			}
		}
		if rec := partitionChange(p, leader, isr); rec != nil {
			recs = append(recs, rec)
		}
	})
	return recs
}

// PlanOneReplicaISRs plans, for every partition with a leader whose ISR
// lists other brokers too, the change to an ISR of the leader alone.
// Versions before [MaxReplicationFactor] created partitions with every
// replica in the ISR although only the leader received records; Metadata
// reported them in sync and the planners would have elected them. The
// controller plans this once per leadership term, before any other
// decision, so such an image is corrected before it can mislead.
func (s *State) PlanOneReplicaISRs() []Record {
	var recs []Record
	s.eachPartition(func(t *topicState, p *PartitionInfo) {
		if p.Leader == NoLeader || slices.Equal(p.ISR, []int32{p.Leader}) {
			return
		}
		if rec := partitionChange(p, p.Leader, []int32{p.Leader}); rec != nil {
			recs = append(recs, rec)
		}
	})
	return recs
}

// partitionChange returns the record moving p to (leader, isr), or nil if
// nothing changes.
func partitionChange(p *PartitionInfo, leader int32, isr []int32) *PartitionChangeRecord {
	rec := &PartitionChangeRecord{TopicID: p.TopicID, Partition: p.Partition}
	changed := false
	if leader != p.Leader {
		rec.Leader = ptr(leader)
		changed = true
	}
	if !slices.Equal(isr, p.ISR) {
		rec.ISR = slices.Clone(isr)
		changed = true
	}
	if !changed {
		return nil
	}
	return rec
}

func ptr[T any](v T) *T { return &v }
