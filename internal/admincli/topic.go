package admincli

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func topicActions() []*action {
	return []*action{
		{name: "create", args: "NAME", summary: "create a topic (-p partitions, -r replicas, -c key=value configs; -1: the broker's default)", define: defineTopicCreate},
		{name: "list", args: "", summary: "list topics with their partition and replica counts", define: defineTopicList},
		{name: "describe", args: "NAME", summary: "partitions (leader, replicas, ISR, ELR and offline replicas when any, log start/end) and configs with their source", define: defineTopicDescribe},
		{name: "alter-config", args: "NAME", summary: "change topic configs incrementally (--set k=v, --delete k)", define: defineTopicAlterConfig},
		{name: "add-partitions", args: "NAME", summary: "grow a topic to --total N partitions", define: defineTopicAddPartitions},
		{name: "delete", args: "NAME...", summary: "delete topics", define: defineTopicDelete},
	}
}

func oneName(pos []string, what string) (string, error) {
	if len(pos) != 1 {
		return "", usagef("want exactly one %s, got %d arguments", what, len(pos))
	}
	if pos[0] == "" {
		return "", usagef("empty %s", what)
	}
	return pos[0], nil
}

// topicCreated is the JSON of topic create.
type topicCreated struct {
	Topic             string            `json:"topic"`
	ID                string            `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
}

func defineTopicCreate(fs *flag.FlagSet) runFunc {
	parts := fs.Int("p", -1, "number of partitions (-1: the broker's num.partitions)")
	fs.IntVar(parts, "partitions", -1, "same as -p")
	repl := fs.Int("r", -1, "replication factor (-1: the broker's default.replication.factor)")
	fs.IntVar(repl, "replicas", -1, "same as -r")
	var cfgs kvFlags
	fs.Var(&cfgs, "c", "topic config key=value (repeatable)")
	fs.Var(&cfgs, "config", "same as -c")
	return func(e *env, pos []string) error {
		name, err := oneName(pos, "topic name")
		if err != nil {
			return err
		}
		if *parts == 0 || *parts < -1 || *parts > 1<<31-1 {
			return usagef("invalid -p %d: want a positive partition count or -1", *parts)
		}
		if *repl == 0 || *repl < -1 || *repl > 1<<15-1 {
			return usagef("invalid -r %d: want a positive replication factor or -1", *repl)
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		configs := map[string]*string{}
		for _, k := range cfgs.keys {
			v := cfgs.vals[k]
			configs[k] = &v
		}
		resp, err := e.adm.CreateTopic(ctx, int32(*parts), int16(*repl), configs, name)
		what := fmt.Sprintf("create topic %q", name)
		if err != nil {
			// kadm's CreateTopic returns the topic's error as err: its
			// message (why the config is invalid) is in resp.
			return fail(what, err, resp.ErrMessage)
		}
		out := topicCreated{Topic: resp.Topic, ID: topicID(resp.ID), Partitions: resp.NumPartitions, ReplicationFactor: resp.ReplicationFactor, Configs: map[string]string{}}
		for k := range configs {
			out.Configs[k] = *configs[k]
		}
		return e.emit(out, func(w io.Writer) {
			row(w, "TOPIC", "ID", "PARTITIONS", "REPLICAS")
			row(w, out.Topic, out.ID, out.Partitions, out.ReplicationFactor)
		})
	}
}

// topicListed is one topic of topic list's JSON.
type topicListed struct {
	Topic             string `json:"topic"`
	ID                string `json:"id"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

func defineTopicList(fs *flag.FlagSet) runFunc {
	internal := fs.Bool("i", false, "include internal topics (__consumer_offsets)")
	fs.BoolVar(internal, "internal", false, "same as -i")
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("topic list takes no arguments, got %q", pos)
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		list := e.adm.ListTopics
		if *internal {
			list = e.adm.ListTopicsWithInternal
		}
		details, err := list(ctx)
		if err != nil {
			return fail("list topics", err, "")
		}
		out := []topicListed{}
		for _, t := range details.Sorted() {
			if t.Err != nil {
				return fail(fmt.Sprintf("list topics: topic %q", t.Topic), t.Err, "")
			}
			out = append(out, topicListed{Topic: t.Topic, ID: topicID(t.ID), Partitions: len(t.Partitions), ReplicationFactor: t.Partitions.NumReplicas(), Internal: t.IsInternal})
		}
		return e.emit(out, func(w io.Writer) {
			row(w, "TOPIC", "PARTITIONS", "REPLICAS", "ID")
			for _, t := range out {
				row(w, t.Topic, t.Partitions, t.ReplicationFactor, t.ID)
			}
		})
	}
}

// topicDescribed is the JSON of topic describe.
type topicDescribed struct {
	Topic      string            `json:"topic"`
	ID         string            `json:"id"`
	Internal   bool              `json:"internal"`
	Partitions []partitionDetail `json:"partitions"`
	Configs    []configDescribed `json:"configs"`
}

type partitionDetail struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	// ELR and LastKnownELR are KIP-966's eligible leader replicas, from
	// DescribeTopicPartitions (empty when the broker lacks it).
	ELR             []int32 `json:"elr"`
	LastKnownELR    []int32 `json:"last_known_elr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	LogStartOffset  int64   `json:"log_start_offset"`
	LogEndOffset    int64   `json:"log_end_offset"`
	Error           string  `json:"error,omitempty"`
}

type configDescribed struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive"`
}

func defineTopicDescribe(fs *flag.FlagSet) runFunc {
	return func(e *env, pos []string) error {
		name, err := oneName(pos, "topic name")
		if err != nil {
			return err
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		what := fmt.Sprintf("describe topic %q", name)
		t, err := e.topicDetail(ctx, what, name)
		if err != nil {
			return err
		}
		// The replication state from DescribeTopicPartitions (ISR and
		// KIP-966's ELR, as Kafka 4's kafka-topics shows them) when the
		// broker serves it; Metadata's (above) otherwise.
		dtp, err := e.describeTopicPartitions(ctx, name)
		if err != nil {
			return fail(what+": partitions", err, "")
		}
		// A partition without a leader cannot answer ListOffsets: kadm
		// returns the others with the error, and describe shows what it
		// has (as kafka-topics describes offline partitions).
		starts, startsErr := e.adm.ListStartOffsets(ctx, name)
		if startsErr != nil && starts == nil {
			return fail(what+": log start offsets", startsErr, "")
		}
		ends, endsErr := e.adm.ListEndOffsets(ctx, name)
		if endsErr != nil && ends == nil {
			return fail(what+": log end offsets", endsErr, "")
		}
		rcs, err := e.adm.DescribeTopicConfigs(ctx, name)
		if err != nil {
			return fail(what+": configs", err, "")
		}
		out := topicDescribed{Topic: name, ID: topicID(t.ID), Internal: t.IsInternal, Partitions: []partitionDetail{}, Configs: []configDescribed{}}
		for _, p := range t.Partitions.Sorted() {
			d := partitionDetail{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR),
				ELR: []int32{}, LastKnownELR: []int32{}, OfflineReplicas: nonNil(p.OfflineReplicas), LogStartOffset: -1, LogEndOffset: -1}
			if p.Err != nil {
				d.Error = describeErr(p.Err, "")
			}
			if dp, ok := dtp[p.Partition]; ok {
				d.Leader, d.LeaderEpoch = dp.LeaderID, dp.LeaderEpoch
				d.Replicas, d.ISR = nonNil(dp.Replicas), nonNil(dp.ISR)
				d.ELR, d.LastKnownELR, d.OfflineReplicas = nonNil(dp.EligibleLeaderReplicas), nonNil(dp.LastKnownELR), nonNil(dp.OfflineReplicas)
			}
			if _, ok := starts.Lookup(name, p.Partition); !ok && startsErr != nil && d.Error == "" {
				d.Error = describeErr(startsErr, "")
			}
			if o, ok := starts.Lookup(name, p.Partition); ok {
				if o.Err != nil {
					d.Error = describeErr(o.Err, "")
				} else {
					d.LogStartOffset = o.Offset
				}
			}
			if o, ok := ends.Lookup(name, p.Partition); ok {
				if o.Err != nil {
					d.Error = describeErr(o.Err, "")
				} else {
					d.LogEndOffset = o.Offset
				}
			}
			out.Partitions = append(out.Partitions, d)
		}
		for _, rc := range rcs {
			if rc.Err != nil {
				return fail(what+": configs", rc.Err, rc.ErrMessage)
			}
			for _, c := range rc.Configs {
				out.Configs = append(out.Configs, configDescribed{Name: c.Key, Value: c.Value, Source: c.Source.String(), Sensitive: c.Sensitive})
			}
		}
		sort.Slice(out.Configs, func(i, j int) bool { return out.Configs[i].Name < out.Configs[j].Name })
		return e.emit(out, func(w io.Writer) { writeTopicDescribed(w, out) })
	}
}

// writeTopicDescribed is topic describe's table. The ELR and OFFLINE
// columns appear only when some partition has any, so a healthy topic
// reads as before.
func writeTopicDescribed(w io.Writer, out topicDescribed) {
	row(w, "TOPIC", "ID", "PARTITIONS", "INTERNAL")
	row(w, out.Topic, out.ID, len(out.Partitions), out.Internal)
	row(w)
	var elr, offline bool
	for _, p := range out.Partitions {
		elr = elr || len(p.ELR) > 0 || len(p.LastKnownELR) > 0
		offline = offline || len(p.OfflineReplicas) > 0
	}
	head := []any{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR"}
	if elr {
		head = append(head, "ELR", "LAST-KNOWN-ELR")
	}
	if offline {
		head = append(head, "OFFLINE")
	}
	row(w, append(head, "LOG-START", "LOG-END", "ERROR")...)
	for _, p := range out.Partitions {
		cols := []any{p.Partition, p.Leader, p.LeaderEpoch, int32s(p.Replicas), int32s(p.ISR)}
		if elr {
			cols = append(cols, int32s(p.ELR), int32s(p.LastKnownELR))
		}
		if offline {
			cols = append(cols, int32s(p.OfflineReplicas))
		}
		row(w, append(cols, p.LogStartOffset, p.LogEndOffset, dash(p.Error))...)
	}
	row(w)
	row(w, "CONFIG", "VALUE", "SOURCE")
	for _, c := range out.Configs {
		v := "-"
		switch {
		case c.Sensitive:
			v = "(sensitive)"
		case c.Value != nil:
			v = *c.Value
		}
		row(w, c.Name, v, c.Source)
	}
}

// describeTopicPartitions reads topic's partitions with
// DescribeTopicPartitions (key 75), following its cursor. A broker that
// does not serve key 75 (before Kafka 3.7) gives an empty map and no
// error: the caller keeps Metadata's answer.
func (e *env) describeTopicPartitions(ctx context.Context, topic string) (map[int32]kmsg.DescribeTopicPartitionsResponseTopicPartition, error) {
	out := map[int32]kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	if !e.supports(ctx, kmsg.NewPtrDescribeTopicPartitionsRequest().Key()) {
		return out, nil
	}
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	for range 1 << 16 { // at least one partition a page: bounded by the partition count
		resp, err := req.RequestWith(ctx, e.cl)
		if err != nil {
			return nil, err
		}
		for _, t := range resp.Topics {
			if t.Topic == nil || *t.Topic != topic {
				continue
			}
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return nil, err
			}
			for _, p := range t.Partitions {
				out[p.Partition] = p
			}
		}
		c := resp.NextCursor
		if c == nil || c.Topic != topic {
			return out, nil
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: c.Topic, Partition: c.Partition}
	}
	return out, nil
}

// supports reports whether the cluster serves API key (the brokers'
// ApiVersions, as kgo has them); any doubt is false.
func (e *env) supports(ctx context.Context, key int16) bool {
	vs, err := e.adm.ApiVersions(ctx)
	if err != nil {
		return false
	}
	found := false
	for _, b := range vs.Sorted() {
		if b.Err != nil {
			continue
		}
		if _, _, ok := b.KeyVersions(key); !ok {
			return false
		}
		found = true
	}
	return found
}

func nonNil(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// configsAltered is the JSON of topic alter-config.
type configsAltered struct {
	Topic   string            `json:"topic"`
	Set     map[string]string `json:"set"`
	Deleted []string          `json:"deleted"`
}

func defineTopicAlterConfig(fs *flag.FlagSet) runFunc {
	var set kvFlags
	fs.Var(&set, "set", "set config key=value (repeatable)")
	var del listFlag
	fs.Var(&del, "delete", "remove the topic's own value of a config, falling back to the default (repeatable)")
	return func(e *env, pos []string) error {
		name, err := oneName(pos, "topic name")
		if err != nil {
			return err
		}
		if len(set.keys) == 0 && len(del) == 0 {
			return usagef("nothing to change: give --set key=value or --delete key")
		}
		for _, k := range del {
			if _, both := set.vals[k]; both {
				return usagef("config %q is both set and deleted", k)
			}
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		var alters []kadm.AlterConfig
		out := configsAltered{Topic: name, Set: map[string]string{}, Deleted: []string{}}
		for _, k := range set.keys {
			v := set.vals[k]
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
			out.Set[k] = v
		}
		for _, k := range del {
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			out.Deleted = append(out.Deleted, k)
		}
		what := fmt.Sprintf("alter configs of topic %q", name)
		resps, err := e.adm.AlterTopicConfigs(ctx, alters, name)
		if err != nil {
			return fail(what, err, "")
		}
		for _, r := range resps {
			if r.Err != nil {
				return fail(what, r.Err, r.ErrMessage)
			}
		}
		return e.emit(out, func(w io.Writer) {
			row(w, "TOPIC", "CONFIG", "CHANGE")
			for _, k := range sortedKeys(out.Set) {
				row(w, name, k, "set to "+out.Set[k])
			}
			for _, k := range out.Deleted {
				row(w, name, k, "deleted")
			}
		})
	}
}

// topicID prints a topic id as Kafka's tools do (Uuid.toString): URL-safe
// base64 without padding, 22 characters.
func topicID(id kadm.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// partitionsAdded is the JSON of topic add-partitions.
type partitionsAdded struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
}

func defineTopicAddPartitions(fs *flag.FlagSet) runFunc {
	total := fs.Int("total", 0, "the partition count the topic should have (more than now)")
	return func(e *env, pos []string) error {
		name, err := oneName(pos, "topic name")
		if err != nil {
			return err
		}
		if *total <= 0 || *total > 1<<31-1 {
			return usagef("invalid --total %d: want the new, larger partition count", *total)
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		what := fmt.Sprintf("add partitions to topic %q", name)
		resps, err := e.adm.UpdatePartitions(ctx, *total, name)
		if err != nil {
			return fail(what, err, "")
		}
		for _, r := range resps {
			if r.Err != nil {
				return fail(what, r.Err, r.ErrMessage)
			}
		}
		out := partitionsAdded{Topic: name, Partitions: *total}
		return e.emit(out, func(w io.Writer) {
			row(w, "TOPIC", "PARTITIONS")
			row(w, out.Topic, out.Partitions)
		})
	}
}

func defineTopicDelete(fs *flag.FlagSet) runFunc {
	return func(e *env, pos []string) error {
		if len(pos) == 0 {
			return usagef("name the topics to delete")
		}
		for _, p := range pos {
			if p == "" {
				return usagef("empty topic name")
			}
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		resps, err := e.adm.DeleteTopics(ctx, pos...)
		if err != nil {
			return fail("delete topics", err, "")
		}
		return e.reportDeletes("topic", pos, func(name string) (bool, error, string) {
			r, ok := resps[name]
			return ok, r.Err, r.ErrMessage
		})
	}
}

func statusOf(errText, ok string) string {
	if errText != "" {
		return "FAILED: " + errText
	}
	return ok
}
