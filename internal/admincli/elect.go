package admincli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// cluster elect-leaders: Kafka's ElectLeaders (key 43) through kadm, as
// kafka-leader-election.sh runs it. ELECTION_NOT_NEEDED is not a
// failure (the wanted leader leads); any other error is (exit 1).

// electedPartition is one partition of elect-leaders' JSON output.
type electedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Status is "elected", "not-needed" or "failed".
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

func defineElectLeaders(fs *flag.FlagSet) runFunc {
	typ := fs.String("type", "preferred", "election type: preferred (the first replica, if in the ISR) or unclean (an out-of-sync live replica for a leaderless partition: may lose acknowledged records)")
	topic := fs.String("topic", "", "elect for this topic's partitions")
	partition := fs.Int("partition", -1, "with --topic: only this partition")
	all := fs.Bool("all", false, "elect for every partition of every topic")
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("cluster elect-leaders takes no arguments, got %q (use --topic)", pos)
		}
		var how kadm.ElectLeadersHow
		switch *typ {
		case "preferred":
			how = kadm.ElectPreferredReplica
		case "unclean":
			how = kadm.ElectLiveReplica
		default:
			return usagef("invalid value %q for flag --type: want preferred or unclean", *typ)
		}
		if *all == (*topic != "") {
			return usagef("give exactly one of --topic and --all")
		}
		if *partition < -1 || (*partition >= 0 && *topic == "") {
			return usagef("--partition needs --topic and a partition number")
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		var set kadm.TopicsSet // nil: every partition
		if *topic != "" {
			set = kadm.TopicsSet{}
			if *partition >= 0 {
				set.Add(*topic, int32(*partition))
			} else {
				td, err := e.topicDetail(ctx, "elect leaders", *topic)
				if err != nil {
					return err
				}
				for p := range td.Partitions {
					set.Add(*topic, p)
				}
			}
		}
		res, err := e.adm.ElectLeaders(ctx, how, set)
		if err != nil {
			return fail("elect leaders", err, "")
		}
		out := []electedPartition{}
		failed := false
		for t, ps := range res {
			for p, r := range ps {
				ep := electedPartition{Topic: t, Partition: p, Status: "elected"}
				switch {
				case errors.Is(r.Err, kerr.ElectionNotNeeded):
					ep.Status = "not-needed"
				case r.Err != nil:
					ep.Status, ep.Error = "failed", describeErr(r.Err, r.ErrMessage)
					failed = true
					fmt.Fprintf(e.stderr, "strata: elect leaders %s-%d: %s\n", t, p, ep.Error)
				}
				out = append(out, ep)
			}
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Topic != out[j].Topic {
				return out[i].Topic < out[j].Topic
			}
			return out[i].Partition < out[j].Partition
		})
		if err := e.emit(out, func(w io.Writer) {
			if len(out) == 0 {
				fmt.Fprintln(w, "nothing to elect: every partition has the leader wanted")
				return
			}
			row(w, "TOPIC", "PARTITION", "STATUS")
			for _, p := range out {
				s := p.Status
				if p.Error != "" {
					s = "FAILED: " + p.Error
				}
				row(w, p.Topic, p.Partition, s)
			}
		}); err != nil {
			return err
		}
		if failed {
			return reported{}
		}
		return nil
	}
}
