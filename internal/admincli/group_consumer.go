package admincli

// `strata group describe` of a KIP-848 consumer group (ConsumerGroupDescribe):
// the group epoch and assignment epoch, the assignor, and per member its
// epoch, whether it has reached its target (STABLE, or RECONCILING while
// its current assignment or epoch differs from the target), its current
// and target partitions; then the committed offsets and lag as for a
// classic group.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// consumerGroupDescribed is the JSON of group describe for a consumer
// group: groupDescribed's fields plus the epochs and the assignor.
type consumerGroupDescribed struct {
	Group           string                    `json:"group"`
	Type            string                    `json:"type"` // "consumer"
	State           string                    `json:"state"`
	Epoch           int32                     `json:"group_epoch"`
	AssignmentEpoch int32                     `json:"assignment_epoch"`
	Assignor        string                    `json:"assignor"`
	Coordinator     int32                     `json:"coordinator"`
	Members         []consumerMemberDescribed `json:"members"`
	Offsets         []partitionLag            `json:"offsets"`
	TotalLag        int64                     `json:"total_lag"`
}

type consumerMemberDescribed struct {
	MemberID   string          `json:"member_id"`
	InstanceID *string         `json:"instance_id"`
	ClientID   string          `json:"client_id"`
	Host       string          `json:"host"`
	Epoch      int32           `json:"member_epoch"`
	State      string          `json:"state"` // STABLE, RECONCILING
	Subscribed []string        `json:"subscribed_topics"`
	Regex      *string         `json:"subscribed_topic_regex"`
	Assigned   []topicPartions `json:"assigned"`
	Target     []topicPartions `json:"target"`
}

func topicsSet(s kadm.TopicsSet) []topicPartions {
	out := []topicPartions{}
	for _, t := range s.Sorted() {
		ps := append([]int32(nil), t.Partitions...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, topicPartions{Topic: t.Topic, Partitions: ps})
	}
	return out
}

func samePartitions(a, b []topicPartions) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Topic != b[i].Topic || int32s(a[i].Partitions) != int32s(b[i].Partitions) {
			return false
		}
	}
	return true
}

// describeConsumerGroup describes name if it is a consumer group; done
// false (and nothing printed) when it is not one, or the cluster has no
// ConsumerGroupDescribe: the classic describe then runs.
func describeConsumerGroup(ctx context.Context, e *env, name string) (done bool, err error) {
	what := fmt.Sprintf("describe group %q", name)
	ds, derr := e.adm.DescribeConsumerGroups(ctx, name)
	if derr != nil {
		return false, nil // an old cluster (no key 69) or a transport error the classic path reports
	}
	d, ok := ds[name]
	if !ok || d.Err != nil {
		if ok && !errors.Is(d.Err, kerr.GroupIDNotFound) && !errors.Is(d.Err, kerr.UnsupportedVersion) {
			return true, fail(what, d.Err, "")
		}
		return false, nil
	}
	out := consumerGroupDescribed{Group: name, Type: "consumer", State: d.State, Epoch: d.Epoch, AssignmentEpoch: d.AssignmentEpoch,
		Assignor: d.AssignorName, Coordinator: d.Coordinator.NodeID, Members: []consumerMemberDescribed{}, Offsets: []partitionLag{}}
	owner := map[string]map[int32]consumerMemberDescribed{}
	for _, m := range d.Members {
		md := consumerMemberDescribed{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost,
			Epoch: m.MemberEpoch, Subscribed: append([]string{}, m.SubscribedTopics...), Regex: m.SubscribedTopicRegex,
			Assigned: topicsSet(m.Assignment), Target: topicsSet(m.TargetAssignment)}
		md.State = "STABLE"
		if m.MemberEpoch != d.AssignmentEpoch || !samePartitions(md.Assigned, md.Target) {
			md.State = "RECONCILING"
		}
		for _, a := range md.Assigned {
			if owner[a.Topic] == nil {
				owner[a.Topic] = map[int32]consumerMemberDescribed{}
			}
			for _, p := range a.Partitions {
				owner[a.Topic][p] = md
			}
		}
		out.Members = append(out.Members, md)
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].MemberID < out.Members[j].MemberID })

	commits, err := e.adm.FetchOffsets(ctx, name)
	if err != nil {
		return true, fail(what+": committed offsets", err, "")
	}
	topics := map[string]bool{}
	commits.Each(func(o kadm.OffsetResponse) { topics[o.Topic] = true })
	for t := range owner {
		topics[t] = true
	}
	var names []string
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	ends := kadm.ListedOffsets{}
	if len(names) > 0 {
		if ends, err = e.adm.ListEndOffsets(ctx, names...); err != nil {
			return true, fail(what+": end offsets", err, "")
		}
	}
	// Every partition committed or assigned; without a commit the lag
	// counts from offset 0, as for a classic group.
	type tp struct {
		t string
		p int32
	}
	rows := map[tp]partitionLag{}
	commits.Each(func(o kadm.OffsetResponse) {
		pl := partitionLag{Topic: o.Topic, Partition: o.Partition, Committed: o.At}
		if o.Err != nil {
			pl.Error = describeErr(o.Err, "")
		}
		rows[tp{o.Topic, o.Partition}] = pl
	})
	for t, ps := range owner {
		for p := range ps {
			if _, ok := rows[tp{t, p}]; !ok {
				rows[tp{t, p}] = partitionLag{Topic: t, Partition: p, Committed: -1}
			}
		}
	}
	for k, pl := range rows {
		pl.LogEndOffset, pl.Lag = -1, -1
		if end, ok := ends.Lookup(k.t, k.p); ok && end.Err == nil && pl.Error == "" {
			pl.LogEndOffset = end.Offset
			pl.Lag = max(end.Offset-max(pl.Committed, 0), 0)
		} else if ok && end.Err != nil && pl.Error == "" {
			pl.Error = describeErr(end.Err, "")
		}
		if m, ok := owner[k.t][k.p]; ok {
			pl.MemberID, pl.ClientID = m.MemberID, m.ClientID
		}
		if pl.Lag > 0 {
			out.TotalLag += pl.Lag
		}
		out.Offsets = append(out.Offsets, pl)
	}
	sort.Slice(out.Offsets, func(i, j int) bool {
		a, b := out.Offsets[i], out.Offsets[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return true, e.emit(out, func(w io.Writer) {
		row(w, "GROUP", "TYPE", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "ASSIGNOR", "MEMBERS", "TOTAL-LAG")
		row(w, out.Group, out.Type, dash(out.State), out.Epoch, out.AssignmentEpoch, dash(out.Assignor), len(out.Members), out.TotalLag)
		if len(out.Members) > 0 {
			row(w)
			row(w, "MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "STATE", "ASSIGNED", "TARGET")
			for _, m := range out.Members {
				row(w, m.MemberID, m.ClientID, m.Host, m.Epoch, m.State, dash(partsText(m.Assigned)), dash(partsText(m.Target)))
			}
		}
		row(w)
		row(w, "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER-ID", "ERROR")
		for _, p := range out.Offsets {
			row(w, p.Topic, p.Partition, offsetText(p.Committed), offsetText(p.LogEndOffset), offsetText(p.Lag), dash(p.MemberID), dash(p.Error))
		}
	})
}

func partsText(ts []topicPartions) string {
	var as []string
	for _, a := range ts {
		as = append(as, a.Topic+"["+int32s(a.Partitions)+"]")
	}
	return strings.Join(as, " ")
}
