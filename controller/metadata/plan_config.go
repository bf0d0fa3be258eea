package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ConfigOp is an incremental config operation; the numbers are Kafka's
// IncrementalAlterConfigs op types.
type ConfigOp uint8

// Config operations.
const (
	OpSet      ConfigOp = 0
	OpDelete   ConfigOp = 1
	OpAppend   ConfigOp = 2 // list configs only: add the value if absent
	OpSubtract ConfigOp = 3 // list configs only: remove the value
)

// AlterConfigEntry is one config change. In full-replace mode Op is ignored
// and a nil Value means "not set".
type AlterConfigEntry struct {
	Name  string
	Value *string
	Op    ConfigOp
}

// AlterConfigResource is the set of changes to one resource.
type AlterConfigResource struct {
	Type ResourceType
	// Name is the topic's name, or a broker id in decimal ("" is the
	// cluster-wide broker default).
	Name    string
	Configs []AlterConfigEntry
}

// AlterConfigsRequest asks to change configs: Kafka's AlterConfigs
// (Incremental false: each resource's configs are replaced by exactly the
// given set) or IncrementalAlterConfigs (Incremental true).
type AlterConfigsRequest struct {
	Resources    []AlterConfigResource
	Incremental  bool
	ValidateOnly bool
	// GroupBounds validates GROUP resources' configs; nil is
	// [DefaultGroupConfigBounds]. The broker that takes the request sends
	// its own group.consumer.* settings: the bounds are broker settings,
	// which a separate controller does not have.
	GroupBounds *GroupConfigBounds `json:",omitempty"`
}

// AlterConfigsResult is the outcome for one resource, in request order.
type AlterConfigsResult struct {
	Type ResourceType
	Name string
	Err  error
}

// listConfigs are the configs whose values are comma-separated lists.
var listConfigs = map[string]bool{ConfigCleanupPolicy: true, "log.cleanup.policy": true}

// PlanAlterConfigs plans ConfigRecords for every change that validation
// accepts: the resulting config of each resource is computed first and
// checked as a whole ([ValidateTopicConfigs] for topics,
// [ValidateGroupConfigs] for groups, [ValidateBrokerConfig] per entry for
// brokers); only differences from the
// current configs become records, sorted by name. Enabling
// unclean.leader.election.enable (on a topic, or as the cluster default for
// topics without their own) also elects leaders for leaderless partitions
// it concerns, as Kafka does. A failed resource
// produces no records; others still go ahead. Errors per resource:
// INVALID_REQUEST (resource repeated, bad broker name, append/subtract on a
// non-list config, unknown op), UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG.
func (s *State) PlanAlterConfigs(req AlterConfigsRequest) ([]Record, []AlterConfigsResult) {
	type key = configKey
	seen := map[key]int{}
	for _, r := range req.Resources {
		seen[key{r.Type, r.Name}]++
	}
	var recs []Record
	elected := map[TopicPartition]bool{}
	results := make([]AlterConfigsResult, len(req.Resources))
	for i, res := range req.Resources {
		results[i] = AlterConfigsResult{Type: res.Type, Name: res.Name}
		if seen[key{res.Type, res.Name}] > 1 {
			results[i].Err = fmt.Errorf("%w: resource %s %q repeated", kerr.InvalidRequest, res.Type, res.Name)
			continue
		}
		cur := s.configs[key{res.Type, res.Name}]
		next, err := s.nextConfig(res, cur, req.Incremental, req.GroupBounds)
		if err != nil {
			results[i].Err = err
			continue
		}
		if req.ValidateOnly {
			continue
		}
		recs = append(recs, configRecords(res, cur, next)...)
		switch {
		case res.Type == ResourceTopic && isTrue(next[ConfigUncleanLeaderElectionEnable]) && !isTrue(cur[ConfigUncleanLeaderElectionEnable]):
			recs = append(recs, s.electUnclean(elected, func(topic string) bool { return topic == res.Name })...)
		case res.Type == ResourceBroker && res.Name == "" && isTrue(next[clusterUnclean]) && !isTrue(cur[clusterUnclean]):
			recs = append(recs, s.electUnclean(elected, func(topic string) bool {
				_, own := s.configs[configKey{ResourceTopic, topic}][ConfigUncleanLeaderElectionEnable]
				return !own
			})...)
		}
	}
	return recs, results
}

// clusterUnclean is the cluster-default (broker resource "") name of
// unclean.leader.election.enable.
const clusterUnclean = "unclean.leader.election.enable"

func isTrue(v string) bool { return strings.EqualFold(v, "true") }

// electUnclean plans elections for the leaderless partitions of the topics
// match accepts, once unclean election has just been enabled for them (as
// Kafka does when the config changes): an eligible ISR or ELR member if
// any, else the first eligible replica with an ISR of itself, RECOVERING.
// elected collects the partitions already given a leader by this plan.
func (s *State) electUnclean(elected map[TopicPartition]bool, match func(topic string) bool) []Record {
	var recs []Record
	s.eachPartition(func(t *topicState, p *PartitionInfo) {
		tp := TopicPartition{p.TopicID, p.Partition}
		if p.Leader != NoLeader || !match(t.name) || elected[tp] {
			return
		}
		elected[tp] = true
		res := s.changePartition(t, p, p.ISR, changeOpts{
			acceptable:      func(r int32) bool { return s.eligible(r, -1) },
			unclean:         true,
			uncleanShutdown: NoLeader,
		})
		if res.rec != nil {
			recs = append(recs, res.rec)
		}
	})
	return recs
}

// configRecords returns the records turning cur into next, sorted by name.
func configRecords(res AlterConfigResource, cur, next map[string]string) []Record {
	var recs []Record
	names := sortedKeys(next)
	for _, n := range sortedKeys(cur) {
		if _, ok := next[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		nv, inNext := next[n]
		cv, inCur := cur[n]
		switch {
		case inNext && (!inCur || cv != nv):
			recs = append(recs, &ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: n, Value: ptr(nv)})
		case !inNext && inCur:
			recs = append(recs, &ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: n})
		}
	}
	return recs
}

// nextConfig computes and validates a resource's config after the change.
func (s *State) nextConfig(res AlterConfigResource, cur map[string]string, incremental bool, gb *GroupConfigBounds) (map[string]string, error) {
	switch res.Type {
	case ResourceTopic:
		if _, ok := s.topicsByName[res.Name]; !ok {
			return nil, fmt.Errorf("%w: topic %q", kerr.UnknownTopicOrPartition, res.Name)
		}
	case ResourceBroker:
		if res.Name != "" {
			id, err := strconv.ParseInt(res.Name, 10, 32)
			if err != nil || id < 0 || strconv.FormatInt(id, 10) != res.Name {
				return nil, fmt.Errorf("%w: broker resource name %q", kerr.InvalidRequest, res.Name)
			}
		}
	case ResourceGroup:
		if res.Name == "" {
			return nil, fmt.Errorf("%w: empty group id", kerr.InvalidRequest)
		}
	default:
		return nil, fmt.Errorf("%w: resource type %d", kerr.InvalidRequest, res.Type)
	}
	next := map[string]string{}
	if incremental {
		next = maps.Clone(cur)
		if next == nil {
			next = map[string]string{}
		}
	}
	for _, e := range res.Configs {
		if e.Name == "" {
			return nil, fmt.Errorf("%w: empty config name", kerr.InvalidRequest)
		}
		if !incremental {
			if e.Value != nil {
				next[e.Name] = *e.Value
			}
			continue
		}
		val := ""
		if e.Value != nil {
			val = *e.Value
		}
		switch e.Op {
		case OpSet:
			if e.Value == nil {
				return nil, fmt.Errorf("%w: set of %s without a value", kerr.InvalidRequest, e.Name)
			}
			next[e.Name] = val
		case OpDelete:
			delete(next, e.Name)
		case OpAppend, OpSubtract:
			if !listConfigs[e.Name] {
				return nil, fmt.Errorf("%w: %s is not a list config", kerr.InvalidRequest, e.Name)
			}
			items := splitList(next[e.Name])
			for _, v := range splitList(val) {
				has := slices.Contains(items, v)
				if e.Op == OpAppend && !has {
					items = append(items, v)
				}
				if e.Op == OpSubtract && has {
					items = slices.DeleteFunc(items, func(x string) bool { return x == v })
				}
			}
			if len(items) == 0 {
				delete(next, e.Name)
			} else {
				next[e.Name] = strings.Join(items, ",")
			}
		default:
			return nil, fmt.Errorf("%w: config op %d", kerr.InvalidRequest, e.Op)
		}
	}
	if res.Type == ResourceTopic {
		if err := ValidateTopicConfigs(next); err != nil {
			return nil, fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
		}
		// As in Kafka (before KIP-950's disablement policy): a tiered
		// topic stays tiered; its remote data would otherwise be
		// unreachable and never deleted.
		if strings.EqualFold(cur[ConfigRemoteStorageEnable], "true") && !strings.EqualFold(next[ConfigRemoteStorageEnable], "true") {
			return nil, fmt.Errorf("%w: %s cannot be disabled on a topic that has it enabled (delete the topic instead)", kerr.InvalidConfig, ConfigRemoteStorageEnable)
		}
	} else if res.Type == ResourceGroup {
		b := DefaultGroupConfigBounds
		if gb != nil {
			b = *gb
		}
		if err := ValidateGroupConfigs(next, b); err != nil {
			return nil, fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
		}
	} else {
		for _, n := range sortedKeys(next) {
			if err := ValidateBrokerConfig(n, next[n]); err != nil {
				return nil, fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
			}
		}
	}
	return next, nil
}

func splitList(v string) []string {
	var out []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
