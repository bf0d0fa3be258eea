package admincli

import (
	"flag"
	"io"
	"sort"
	"strconv"
	"strings"
)

// cluster under-replicated: the partitions an operator must look at, as
// kafka-topics.sh --describe --under-replicated-partitions /
// --under-min-isr-partitions / --at-min-isr-partitions /
// --unavailable-partitions report them, in one listing with each
// partition's states.

// Partition states, as kafka-topics.sh names its filters.
const (
	stateUnderReplicated = "under-replicated" // ISR smaller than the replica set
	stateUnderMinISR     = "under-min-isr"    // ISR below the topic's min.insync.replicas: acks=all refused
	stateAtMinISR        = "at-min-isr"       // ISR at min.insync.replicas: one more loss refuses acks=all
	stateUnavailable     = "unavailable"      // no leader
)

type partitionHealth struct {
	Topic           string   `json:"topic"`
	Partition       int32    `json:"partition"`
	Leader          int32    `json:"leader"`
	Replicas        []int32  `json:"replicas"`
	ISR             []int32  `json:"isr"`
	OfflineReplicas []int32  `json:"offline_replicas"`
	MinISR          int      `json:"min_insync_replicas"`
	States          []string `json:"states"`
}

type clusterHealth struct {
	Partitions []partitionHealth `json:"partitions"`
}

// healthStates is which states a partition is in; atMin is listed only
// when asked for (a healthy RF=2, min.insync.replicas=2 topic is always
// at its minimum).
func healthStates(leader int32, replicas, isr int, minISR int, atMin bool) []string {
	var s []string
	if leader < 0 {
		s = append(s, stateUnavailable)
	}
	if isr < replicas {
		s = append(s, stateUnderReplicated)
	}
	if isr < minISR {
		s = append(s, stateUnderMinISR)
	} else if atMin && isr == minISR {
		s = append(s, stateAtMinISR)
	}
	return s
}

func defineClusterUnderReplicated(fs *flag.FlagSet) runFunc {
	atMin := fs.Bool("at-min-isr", false, "also list partitions whose ISR is exactly min.insync.replicas")
	internal := fs.Bool("internal", true, "include internal topics (__consumer_offsets)")
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("cluster under-replicated takes no arguments, got %q", pos)
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		m, err := e.adm.Metadata(ctx)
		if err != nil {
			return fail("describe cluster", err, "")
		}
		var names []string
		for name, t := range m.Topics {
			if t.Err == nil && (*internal || !t.IsInternal) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		minISR := map[string]int{}
		if len(names) > 0 {
			rcs, err := e.adm.DescribeTopicConfigs(ctx, names...)
			if err != nil {
				return fail("describe topic configs", err, "")
			}
			for _, rc := range rcs {
				for _, c := range rc.Configs {
					if c.Key == "min.insync.replicas" && c.Value != nil {
						if v, err := strconv.Atoi(*c.Value); err == nil {
							minISR[rc.Name] = v
						}
					}
				}
			}
		}
		out := clusterHealth{Partitions: []partitionHealth{}}
		for _, name := range names {
			for _, p := range m.Topics[name].Partitions.Sorted() {
				mi := max(minISR[name], 1)
				st := healthStates(p.Leader, len(p.Replicas), len(p.ISR), mi, *atMin)
				if len(st) == 0 {
					continue
				}
				out.Partitions = append(out.Partitions, partitionHealth{Topic: name, Partition: p.Partition, Leader: p.Leader,
					Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), OfflineReplicas: nonNil(p.OfflineReplicas), MinISR: mi, States: st})
			}
		}
		return e.emit(out, func(w io.Writer) {
			if len(out.Partitions) == 0 {
				row(w, "every partition has its full ISR and a leader")
				return
			}
			row(w, "TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE", "MIN-ISR", "STATE")
			for _, p := range out.Partitions {
				row(w, p.Topic, p.Partition, p.Leader, ids(p.Replicas), ids(p.ISR), ids(p.OfflineReplicas), p.MinISR, strings.Join(p.States, ","))
			}
		})
	}
}

func ids(xs []int32) string {
	if len(xs) == 0 {
		return "-"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}
