package admincli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func groupActions() []*action {
	return []*action{
		{name: "list", summary: "list groups (classic, consumer, share) with their state; share groups with their in-flight records", define: defineGroupList},
		{name: "describe", args: "GROUP", summary: "state, members and their partitions, committed offset, end offset and lag per partition", define: defineGroupDescribe},
		{name: "reset-offsets", args: "GROUP", summary: "set an inactive group's committed offsets of --topic (--to-earliest|--to-latest|--to-offset N|--to-timestamp MS|--shift-by N); shows the plan, --execute commits it", define: defineGroupResetOffsets},
		{name: "delete", args: "GROUP...", summary: "delete inactive groups and their committed offsets", define: defineGroupDelete},
	}
}

// groupListed is one group of group list's JSON.
type groupListed struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
	Type         string `json:"type"` // classic, consumer (KIP-848) or share (KIP-932); empty from brokers before ListGroups v5
	// InFlight, of a share group only, is its records delivered and not
	// yet acknowledged or archived, summed over its share-partitions
	// (-1: unknown).
	InFlight *int64 `json:"in_flight,omitempty"`
}

func defineGroupList(fs *flag.FlagSet) runFunc {
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("group list takes no arguments, got %q", pos)
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		groups, err := e.adm.ListGroups(ctx)
		if err != nil {
			return fail("list groups", err, "")
		}
		out := []groupListed{}
		for _, g := range groups.Sorted() {
			gl := groupListed{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType, Coordinator: g.Coordinator, Type: g.GroupType}
			if g.GroupType == "share" {
				// One DescribeShareGroupOffsets per share group.
				n := shareInFlight(ctx, e, g.Group)
				gl.InFlight = &n
			}
			out = append(out, gl)
		}
		return e.emit(out, func(w io.Writer) {
			row(w, "GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR", "TYPE", "IN-FLIGHT")
			for _, g := range out {
				inFlight := "-"
				if g.InFlight != nil && *g.InFlight >= 0 {
					inFlight = strconv.FormatInt(*g.InFlight, 10)
				}
				row(w, g.Group, dash(g.State), dash(g.ProtocolType), g.Coordinator, dash(g.Type), inFlight)
			}
		})
	}
}

// groupDescribed is the JSON of group describe.
type groupDescribed struct {
	Group        string            `json:"group"`
	State        string            `json:"state"`
	ProtocolType string            `json:"protocol_type"`
	Protocol     string            `json:"protocol"`
	Coordinator  int32             `json:"coordinator"`
	Members      []memberDescribed `json:"members"`
	Offsets      []partitionLag    `json:"offsets"`
	TotalLag     int64             `json:"total_lag"`
}

type memberDescribed struct {
	MemberID   string          `json:"member_id"`
	InstanceID *string         `json:"instance_id"`
	ClientID   string          `json:"client_id"`
	Host       string          `json:"host"`
	Assigned   []topicPartions `json:"assigned"`
}

type topicPartions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

type partitionLag struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	Committed    int64  `json:"committed"` // -1: nothing committed
	LogEndOffset int64  `json:"log_end_offset"`
	Lag          int64  `json:"lag"` // -1: unknown (see error)
	MemberID     string `json:"member_id"`
	ClientID     string `json:"client_id"`
	Error        string `json:"error,omitempty"`
}

func defineGroupDescribe(fs *flag.FlagSet) runFunc {
	return func(e *env, pos []string) error {
		name, err := oneName(pos, "group name")
		if err != nil {
			return err
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		what := fmt.Sprintf("describe group %q", name)
		if done, err := describeShareGroup(ctx, e, name); done {
			return err // a KIP-932 share group (group_share.go)
		}
		if done, err := describeConsumerGroup(ctx, e, name); done {
			return err // a KIP-848 consumer group (group_consumer.go)
		}
		lags, err := e.adm.Lag(ctx, name)
		if err != nil {
			return fail(what, err, "")
		}
		l, ok := lags[name]
		if !ok {
			return fail(what, kerr.GroupIDNotFound, "")
		}
		if l.DescribeErr != nil {
			return fail(what, l.DescribeErr, "")
		}
		if l.FetchErr != nil {
			return fail(what+": committed offsets", l.FetchErr, "")
		}
		if l.State == "Dead" && l.Lag.IsEmpty() {
			return fail(what, kerr.GroupIDNotFound, "")
		}
		out := groupDescribed{Group: name, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol, Coordinator: l.Coordinator.NodeID, Members: []memberDescribed{}, Offsets: []partitionLag{}}
		for _, m := range l.Members {
			md := memberDescribed{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []topicPartions{}}
			if ca, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range ca.Topics {
					ps := append([]int32(nil), t.Partitions...)
					sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
					md.Assigned = append(md.Assigned, topicPartions{Topic: t.Topic, Partitions: ps})
				}
				sort.Slice(md.Assigned, func(i, j int) bool { return md.Assigned[i].Topic < md.Assigned[j].Topic })
			}
			out.Members = append(out.Members, md)
		}
		sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].MemberID < out.Members[j].MemberID })
		for _, ml := range l.Lag.Sorted() {
			pl := partitionLag{Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At, LogEndOffset: ml.End.Offset, Lag: ml.Lag}
			if ml.End.Err != nil {
				pl.LogEndOffset = -1
			}
			if ml.Member != nil {
				pl.MemberID, pl.ClientID = ml.Member.MemberID, ml.Member.ClientID
			}
			if ml.Err != nil {
				pl.Error = describeErr(ml.Err, "")
			}
			if pl.Lag > 0 {
				out.TotalLag += pl.Lag
			}
			out.Offsets = append(out.Offsets, pl)
		}
		return e.emit(out, func(w io.Writer) {
			row(w, "GROUP", "STATE", "PROTOCOL", "MEMBERS", "TOTAL-LAG")
			row(w, out.Group, dash(out.State), dash(out.Protocol), len(out.Members), out.TotalLag)
			if len(out.Members) > 0 {
				row(w)
				row(w, "MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNED")
				for _, m := range out.Members {
					var as []string
					for _, a := range m.Assigned {
						as = append(as, a.Topic+"["+int32s(a.Partitions)+"]")
					}
					row(w, m.MemberID, m.ClientID, m.Host, dash(strings.Join(as, " ")))
				}
			}
			row(w)
			row(w, "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER-ID", "ERROR")
			for _, p := range out.Offsets {
				row(w, p.Topic, p.Partition, offsetText(p.Committed), offsetText(p.LogEndOffset), offsetText(p.Lag), dash(p.MemberID), dash(p.Error))
			}
		})
	}
}

// offsetText shows -1 (none / unknown) as "-".
func offsetText(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}

// offsetsReset is the JSON of group reset-offsets.
type offsetsReset struct {
	Group   string        `json:"group"`
	DryRun  bool          `json:"dry_run"`
	Offsets []offsetReset `json:"offsets"`
}

type offsetReset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Previous  int64  `json:"previous"` // -1: nothing was committed
	New       int64  `json:"new"`
	Error     string `json:"error,omitempty"`
}

func defineGroupResetOffsets(fs *flag.FlagSet) runFunc {
	topic := fs.String("topic", "", "the topic whose committed offsets to reset (required)")
	toEarliest := fs.Bool("to-earliest", false, "reset to each partition's log start offset")
	toLatest := fs.Bool("to-latest", false, "reset to each partition's log end offset")
	toOffset := fs.Int64("to-offset", -1, "reset to this offset (clamped to the log's start and end)")
	toTimestamp := fs.Int64("to-timestamp", -1, "reset to the first offset whose timestamp (ms) is at least this (the end if none)")
	shiftBy := fs.Int64("shift-by", 0, "move each committed offset by N (negative: back), clamped to the log")
	dryRunFlag := fs.Bool("dry-run", false, "show the new offsets without committing them (the default, as in Kafka's tool)")
	execute := fs.Bool("execute", false, "commit the new offsets (without it only the plan is shown)")
	return func(e *env, pos []string) error {
		name, err := oneName(pos, "group name")
		if err != nil {
			return err
		}
		if *topic == "" {
			return usagef("--topic is required")
		}
		modes := 0
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, m := range []string{"to-earliest", "to-latest", "to-offset", "to-timestamp", "shift-by"} {
			if set[m] {
				modes++
			}
		}
		if modes != 1 {
			return usagef("give exactly one of --to-earliest, --to-latest, --to-offset, --to-timestamp, --shift-by")
		}
		if *execute && *dryRunFlag {
			return usagef("give one of --dry-run and --execute")
		}
		dryRun := !*execute
		if set["to-offset"] && *toOffset < 0 {
			return usagef("invalid --to-offset %d: want an offset >= 0", *toOffset)
		}
		if set["to-timestamp"] && *toTimestamp < 0 {
			return usagef("invalid --to-timestamp %d: want milliseconds since the epoch", *toTimestamp)
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		what := fmt.Sprintf("reset offsets of group %q", name)

		t, err := e.topicDetail(ctx, fmt.Sprintf("%s: topic %q", what, *topic), *topic)
		if err != nil {
			return err
		}
		starts, err := e.adm.ListStartOffsets(ctx, *topic)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return fail(what+": log start offsets", err, "")
		}
		ends, err := e.adm.ListEndOffsets(ctx, *topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fail(what+": log end offsets", err, "")
		}
		committed, err := e.adm.FetchOffsetsForTopics(ctx, name, *topic)
		if err != nil {
			return fail(what+": committed offsets", err, "")
		}
		var after kadm.ListedOffsets
		if set["to-timestamp"] {
			after, err = e.adm.ListOffsetsAfterMilli(ctx, *toTimestamp, *topic)
			if err == nil {
				err = after.Error()
			}
			if err != nil {
				return fail(what+": offsets for timestamp", err, "")
			}
		}

		out := offsetsReset{Group: name, DryRun: dryRun, Offsets: []offsetReset{}}
		commit := kadm.Offsets{}
		for _, p := range t.Partitions.Numbers() {
			s, _ := starts.Lookup(*topic, p)
			en, _ := ends.Lookup(*topic, p)
			r := offsetReset{Topic: *topic, Partition: p, Previous: -1}
			if c, ok := committed.Lookup(*topic, p); ok && c.Err == nil && c.At >= 0 {
				r.Previous = c.At
			}
			switch {
			case *toEarliest:
				r.New = s.Offset
			case *toLatest:
				r.New = en.Offset
			case set["to-offset"]:
				r.New = *toOffset
			case set["to-timestamp"]:
				r.New = en.Offset
				if a, ok := after.Lookup(*topic, p); ok && a.Offset >= 0 {
					r.New = a.Offset
				}
			default: // shift-by, from the committed offset as Kafka's tool does
				if r.Previous < 0 {
					return fail(what, fmt.Errorf("cannot shift partition %s-%d: the group has no committed offset for it", *topic, p), "")
				}
				r.New = r.Previous + *shiftBy
			}
			r.New = max(s.Offset, min(r.New, en.Offset))
			commit.Add(kadm.Offset{Topic: *topic, Partition: p, At: r.New, LeaderEpoch: -1})
			out.Offsets = append(out.Offsets, r)
		}
		failed := false
		if !dryRun {
			resps, err := e.adm.CommitOffsets(ctx, name, commit)
			if err != nil {
				return fail(what, err, hintInactive(ctx, e, name, err))
			}
			for i, r := range out.Offsets {
				if c, ok := resps.Lookup(r.Topic, r.Partition); ok && c.Err != nil {
					out.Offsets[i].Error = describeErr(c.Err, hintInactive(ctx, e, name, c.Err))
				} else if !ok {
					out.Offsets[i].Error = "no answer for this partition"
				}
				if out.Offsets[i].Error != "" {
					if !failed {
						fmt.Fprintf(e.stderr, "strata: %s: %s-%d: %s\n", what, r.Topic, r.Partition, out.Offsets[i].Error)
					}
					failed = true
				}
			}
		}
		if err := e.emit(out, func(w io.Writer) {
			row(w, "TOPIC", "PARTITION", "PREVIOUS", "NEW", "STATUS")
			st := "committed"
			if dryRun {
				st = "dry run"
			}
			for _, r := range out.Offsets {
				row(w, r.Topic, r.Partition, offsetText(r.Previous), r.New, statusOf(r.Error, st))
			}
		}); err != nil {
			return err
		}
		if failed {
			return reported{}
		}
		if dryRun && !*dryRunFlag {
			fmt.Fprintln(e.stderr, "strata: no offsets committed: add --execute to commit them (as kafka-consumer-groups.sh --reset-offsets)")
		}
		return nil
	}
}

// hintInactive explains Kafka's refusal of an admin commit to a group with
// live members (it answers ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID): only
// an inactive group's offsets can be reset, as kafka-consumer-groups says.
func hintInactive(ctx context.Context, e *env, group string, err error) string {
	if !errors.Is(err, kerr.IllegalGeneration) && !errors.Is(err, kerr.UnknownMemberID) && !errors.Is(err, kerr.RebalanceInProgress) {
		return ""
	}
	state := "active"
	if ds, derr := e.adm.DescribeGroups(ctx, group); derr == nil {
		if d, ok := ds[group]; ok && d.Err == nil {
			state = fmt.Sprintf("%s with %d members", d.State, len(d.Members))
		}
	}
	return fmt.Sprintf("the group is %s; Kafka resets offsets only of an inactive (Empty) group: stop its consumers first", state)
}

func defineGroupDelete(fs *flag.FlagSet) runFunc {
	return func(e *env, pos []string) error {
		if len(pos) == 0 {
			return usagef("name the groups to delete")
		}
		for _, p := range pos {
			if p == "" {
				return usagef("empty group name")
			}
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		resps, err := e.adm.DeleteGroups(ctx, pos...)
		if err != nil {
			return fail("delete groups", err, "")
		}
		return e.reportDeletes("group", pos, func(name string) (bool, error, string) {
			r, ok := resps[name]
			return ok, r.Err, r.ErrMessage
		})
	}
}
