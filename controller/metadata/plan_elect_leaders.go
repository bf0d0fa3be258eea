package metadata

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Elections an operator asks for (Kafka's ElectLeaders, key 43) and the
// controller's automatic preferred-leader rebalance
// (auto.leader.rebalance.enable). Both go through [State.changePartition],
// the election every other planner uses, so the ELR (KIP-966) and the
// leader recovery state (KIP-704) follow the same rules.

// ElectionType is ElectLeaders' election type, Kafka's numbering.
type ElectionType int8

const (
	// ElectPreferred elects each partition's preferred replica (the first
	// of its replicas) if it is in the ISR and may lead.
	ElectPreferred ElectionType = 0
	// ElectUnclean elects a leader for a leaderless partition, an
	// out-of-sync live replica if no ISR or ELR member can lead (as
	// unclean.leader.election.enable would), whatever the topic's setting.
	ElectUnclean ElectionType = 1
)

// String is Kafka's name of the type.
func (e ElectionType) String() string {
	switch e {
	case ElectPreferred:
		return "PREFERRED"
	case ElectUnclean:
		return "UNCLEAN"
	}
	return fmt.Sprintf("ElectionType(%d)", int8(e))
}

// ElectLeadersRequest is an ElectLeaders request. Topics nil means every
// partition of every topic (Kafka's null topic list); an empty list
// elects nothing.
type ElectLeadersRequest struct {
	Type   ElectionType
	Topics []ElectLeadersTopic
}

// ElectLeadersTopic names partitions of one topic.
type ElectLeadersTopic struct {
	Name       string
	Partitions []int32
}

// ElectLeadersResult is one topic's answer, its partitions in the
// request's order.
type ElectLeadersResult struct {
	Topic      string
	Partitions []ElectLeadersPartitionResult
}

// ElectLeadersPartitionResult is one partition's answer: nil when a leader
// was elected, else a wrapped [kerr.Error].
type ElectLeadersPartitionResult struct {
	Partition int32
	Err       error
}

// PlanElectLeaders plans req as Kafka's ReplicationControlManager
// (electLeaders / electLeader) does. Per partition:
//   - UNKNOWN_TOPIC_OR_PARTITION: no such topic or partition;
//   - ELECTION_NOT_NEEDED: PREFERRED and the preferred replica leads, or
//     UNCLEAN and the partition has a leader;
//   - otherwise the election: PREFERRED elects the preferred replica if it
//     is in the ISR and acceptable (registered, unfenced, not shutting
//     down), else keeps an acceptable leader, else elects as a lost
//     leader is replaced; UNCLEAN elects an ISR member, else an ELR member,
//     else any acceptable replica, RECOVERING (KIP-704);
//   - PREFERRED_LEADER_NOT_AVAILABLE (PREFERRED) or
//     ELIGIBLE_LEADERS_NOT_AVAILABLE (UNCLEAN) when that changes nothing.
//
// With req.Topics nil every partition is tried, and partitions answering
// ELECTION_NOT_NEEDED are left out of the results (Kafka does so: they
// already have the leader wanted); every topic is listed, if only with no
// partitions. A partition named twice is elected once and answered
// twice, alike. It plans the whole request at once; the controller plans
// it in steps ([ElectLeadersPlan]).
func (s *State) PlanElectLeaders(req ElectLeadersRequest) ([]Record, []ElectLeadersResult) {
	p := NewElectLeadersPlan(req)
	recs := p.Step(s, 0)
	return recs, p.Results()
}

// MaxElectionsPerStep bounds the partitions one step of an
// [ElectLeadersPlan] tries, as [MaxElectionsPerImbalance] bounds a
// rebalance check: a request naming (or, with null topics, meaning) every
// partition of a large cluster commits as entries of at most this many
// elections, the controller's decider free for other requests between
// them.
const MaxElectionsPerStep = MaxElectionsPerImbalance

// ElectLeadersPlan is one ElectLeaders request planned in steps, each on
// the image as the steps before it left it (their records applied), each
// step's records committed as their own entry. The answers are those of
// [State.PlanElectLeaders]; like Kafka's (whose ElectLeaders result is
// not atomic either, written in batches), the elections are not one
// atomic change. With null topics the partitions are the first step's
// image's; a topic deleted between steps answers its remaining partitions
// UNKNOWN_TOPIC_OR_PARTITION. Not safe for concurrent use.
type ElectLeadersPlan struct {
	typ     ElectionType
	all     bool // null topics: every partition; ELECTION_NOT_NEEDED left out
	started bool
	topics  []ElectLeadersTopic      // what is planned, in order
	ti, pi  int                      // the next partition: topics[ti].Partitions[pi]
	done    map[TopicPartition]error // each partition's answer, once planned
	out     []ElectLeadersResult     // one per topic started, in order
}

// NewElectLeadersPlan starts planning req.
func NewElectLeadersPlan(req ElectLeadersRequest) *ElectLeadersPlan {
	p := &ElectLeadersPlan{typ: req.Type, all: req.Topics == nil, topics: req.Topics, done: map[TopicPartition]error{}}
	if !p.all {
		p.out = []ElectLeadersResult{}
	}
	return p
}

// Step plans up to max more partitions (max <= 0: every one left) on s
// and returns their elections' records.
func (p *ElectLeadersPlan) Step(s *State, max int) []Record {
	if !p.started {
		p.started = true
		if p.all {
			for _, name := range sortedKeys(s.topicsByName) {
				parts := make([]int32, len(s.topics[s.topicsByName[name]].partitions))
				for i := range parts {
					parts[i] = int32(i)
				}
				p.topics = append(p.topics, ElectLeadersTopic{Name: name, Partitions: parts})
			}
		}
	}
	var recs []Record
	tried := 0
	for ; p.ti < len(p.topics); p.ti, p.pi = p.ti+1, 0 {
		rt := p.topics[p.ti]
		if len(p.out) == p.ti {
			p.out = append(p.out, ElectLeadersResult{Topic: rt.Name, Partitions: []ElectLeadersPartitionResult{}})
		}
		r := &p.out[p.ti]
		for ; p.pi < len(rt.Partitions); p.pi++ {
			if max > 0 && tried >= max {
				return recs
			}
			tried++
			pn := rt.Partitions[p.pi]
			rec, err := p.elect(s, rt.Name, pn)
			if rec != nil {
				recs = append(recs, rec)
			}
			if p.all && errors.Is(err, kerr.ElectionNotNeeded) {
				continue
			}
			r.Partitions = append(r.Partitions, ElectLeadersPartitionResult{Partition: pn, Err: err})
		}
	}
	return recs
}

// elect plans topic-pn once (a partition named again gets its first answer
// and no record).
func (p *ElectLeadersPlan) elect(s *State, name string, pn int32) (*PartitionChangeRecord, error) {
	ti, ok := s.topicsByName[name]
	if !ok {
		return nil, fmt.Errorf("%w: no such topic as %s", kerr.UnknownTopicOrPartition, name)
	}
	t := s.topics[ti]
	if pn < 0 || int(pn) >= len(t.partitions) {
		return nil, fmt.Errorf("%w: no such partition as %s-%d", kerr.UnknownTopicOrPartition, name, pn)
	}
	key := TopicPartition{t.id, pn}
	if err, ok := p.done[key]; ok {
		return nil, err
	}
	rec, err := s.electLeader(t, t.partitions[pn], p.typ)
	p.done[key] = err
	return rec, err
}

// Done reports whether every partition has been planned.
func (p *ElectLeadersPlan) Done() bool { return p.started && p.ti >= len(p.topics) }

// Results are the answers so far, per topic in order; complete once Done.
// The plan keeps writing them while it steps.
func (p *ElectLeadersPlan) Results() []ElectLeadersResult { return p.out }

// electLeader plans one election of type typ on p (Kafka's electLeader).
func (s *State) electLeader(t *topicState, p *PartitionInfo, typ ElectionType) (*PartitionChangeRecord, error) {
	opts := changeOpts{
		acceptable:      func(r int32) bool { return s.eligible(r, NoLeader) },
		uncleanShutdown: NoLeader,
	}
	var none error
	switch typ {
	case ElectPreferred:
		if len(p.Replicas) > 0 && p.Leader == p.Replicas[0] {
			return nil, fmt.Errorf("%w: %s-%d: the preferred replica %d leads", kerr.ElectionNotNeeded, t.name, p.Partition, p.Leader)
		}
		opts.preferred = true
		none = fmt.Errorf("%w: %s-%d: the preferred replica is not in the ISR, or is fenced or shutting down", kerr.PreferredLeaderNotAvailable, t.name, p.Partition)
	case ElectUnclean:
		if p.Leader != NoLeader {
			return nil, fmt.Errorf("%w: %s-%d has a leader (%d)", kerr.ElectionNotNeeded, t.name, p.Partition, p.Leader)
		}
		opts.unclean = true
		none = fmt.Errorf("%w: %s-%d: no live replica can lead", kerr.EligibleLeadersNotAvailable, t.name, p.Partition)
	default:
		return nil, fmt.Errorf("%w: unknown election type %d", kerr.InvalidRequest, int8(typ))
	}
	res := s.changePartition(t, p, p.ISR, opts)
	if res.rec == nil {
		return nil, none
	}
	return res.rec, nil
}

// MaxElectionsPerImbalance caps the elections one rebalance check plans
// (Kafka's QuorumController caps them at 1000, and reschedules at once
// for the rest).
const MaxElectionsPerImbalance = 1000

// PlanPreferredRebalance plans one check of auto.leader.rebalance.enable,
// as Kafka's (ZooKeeper) controller's checkAndTriggerAutoLeaderRebalance
// decides it: for each broker, the partitions whose preferred replica
// (first replica) it is are counted, and those it does not lead; when
// that share is above percent (leader.imbalance.per.broker.percentage)
// the preferred replica is elected for each of them where it can lead:
// it is in the ISR and registered, unfenced and not shutting down. The
// elections are one batch, at most [MaxElectionsPerImbalance] (the rest
// wait for the next check); brokers in id order, their partitions by
// topic name and number. more reports partitions left for the next check.
func (s *State) PlanPreferredRebalance(percent int) (recs []Record, more bool) {
	type counts struct {
		preferred int
		misled    []*PartitionInfo
		topics    []*topicState
	}
	byBroker := map[int32]*counts{}
	s.eachPartition(func(t *topicState, p *PartitionInfo) {
		if len(p.Replicas) == 0 {
			return
		}
		pref := p.Replicas[0]
		c := byBroker[pref]
		if c == nil {
			c = &counts{}
			byBroker[pref] = c
		}
		c.preferred++
		if p.Leader != pref {
			c.misled = append(c.misled, p)
			c.topics = append(c.topics, t)
		}
	})
	for _, id := range sortedKeys(byBroker) {
		c := byBroker[id]
		// imbalance ratio > percent/100, in integers
		if len(c.misled)*100 <= percent*c.preferred {
			continue
		}
		for i, p := range c.misled {
			if !slices.Contains(p.ISR, id) || !s.eligible(id, NoLeader) {
				continue
			}
			if len(recs) >= MaxElectionsPerImbalance {
				return recs, true
			}
			if rec, err := s.electLeader(c.topics[i], p, ElectPreferred); err == nil && rec.Leader != nil && *rec.Leader == id {
				recs = append(recs, rec)
			}
		}
	}
	return recs, false
}

// PreferredReplicaImbalance counts the partitions whose leader is not
// their preferred replica (the first of their replicas), offline ones
// included: Kafka's PreferredReplicaImbalanceCount, as its controllers
// compute it from the image (PartitionRegistration.hasPreferredLeader: a
// partition without replicas has preferred replica -1). O(partitions),
// allocating nothing.
func (s *State) PreferredReplicaImbalance() int {
	n := 0
	for _, t := range s.topics {
		for _, p := range t.partitions {
			pref := NoLeader
			if len(p.Replicas) > 0 {
				pref = p.Replicas[0]
			}
			if p.Leader != pref {
				n++
			}
		}
	}
	return n
}
