package admincli

// `strata group describe` of a KIP-932 share group (ShareGroupDescribe):
// the group epoch and assignment epoch, the assignor ("simple"), and per
// member its epoch, subscription and assigned partitions (a partition may
// be assigned to several members). Share groups commit no offsets: their
// progress is the share-partition state, shown per partition with its
// start offset and lag (DescribeShareGroupOffsets, the share
// coordinator's; left out when the cluster does not serve it).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// shareGroupDescribed is the JSON of group describe for a share group.
type shareGroupDescribed struct {
	Group           string                 `json:"group"`
	Type            string                 `json:"type"` // "share"
	State           string                 `json:"state"`
	Epoch           int32                  `json:"group_epoch"`
	AssignmentEpoch int32                  `json:"assignment_epoch"`
	Assignor        string                 `json:"assignor"`
	Coordinator     int32                  `json:"coordinator"`
	Members         []shareMemberDescribed `json:"members"`
	Offsets         []shareOffsetDescribed `json:"offsets"`
}

// shareOffsetDescribed is one share-partition's progress.
type shareOffsetDescribed struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"` // the share-partition start offset
	Lag         int64  `json:"lag"`          // -1: unknown
	Error       string `json:"error,omitempty"`
}

type shareMemberDescribed struct {
	MemberID   string          `json:"member_id"`
	ClientID   string          `json:"client_id"`
	Host       string          `json:"host"`
	Rack       *string         `json:"rack"`
	Epoch      int32           `json:"member_epoch"`
	Subscribed []string        `json:"subscribed_topics"`
	Assigned   []topicPartions `json:"assigned"`
}

// describeShareGroup describes name if it is a share group; done false
// (nothing printed) when it is not one or the cluster has no
// ShareGroupDescribe.
func describeShareGroup(ctx context.Context, e *env, name string) (done bool, err error) {
	ds, derr := e.adm.DescribeShareGroups(ctx, name)
	if derr != nil {
		return false, nil // no key 77 (share groups off), or a transport error the next path reports
	}
	d, ok := ds[name]
	if !ok || d.Err != nil {
		if ok && !errors.Is(d.Err, kerr.GroupIDNotFound) && !errors.Is(d.Err, kerr.UnsupportedVersion) {
			return true, fail(fmt.Sprintf("describe group %q", name), d.Err, "")
		}
		return false, nil
	}
	out := shareGroupDescribed{Group: name, Type: "share", State: d.GroupState, Epoch: d.GroupEpoch, AssignmentEpoch: d.AssignmentEpoch,
		Assignor: d.Assignor, Coordinator: d.Coordinator.NodeID, Members: []shareMemberDescribed{}}
	for _, m := range d.Members {
		out.Members = append(out.Members, shareMemberDescribed{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Rack: m.RackID,
			Epoch: m.MemberEpoch, Subscribed: append([]string{}, m.SubscribedTopicNames...), Assigned: topicsSet(m.Assignment)})
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].MemberID < out.Members[j].MemberID })
	out.Offsets = shareOffsets(ctx, e, name)
	return true, e.emit(out, func(w io.Writer) {
		row(w, "GROUP", "TYPE", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "ASSIGNOR", "MEMBERS")
		row(w, out.Group, out.Type, dash(out.State), out.Epoch, out.AssignmentEpoch, dash(out.Assignor), len(out.Members))
		if len(out.Members) > 0 {
			row(w)
			row(w, "MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "SUBSCRIBED", "ASSIGNED")
			for _, m := range out.Members {
				row(w, m.MemberID, m.ClientID, m.Host, m.Epoch, dash(topicNames(m.Subscribed)), dash(partsText(m.Assigned)))
			}
		}
		if len(out.Offsets) > 0 {
			row(w)
			row(w, "TOPIC", "PARTITION", "START-OFFSET", "LAG", "ERROR")
			for _, o := range out.Offsets {
				row(w, o.Topic, o.Partition, o.StartOffset, o.Lag, dash(o.Error))
			}
		}
	})
}

func topicNames(ts []string) string { return strings.Join(ts, ",") }

// shareOffsets is the group's share-partitions with state, sorted; none
// when the cluster does not answer DescribeShareGroupOffsets.
func shareOffsets(ctx context.Context, e *env, name string) []shareOffsetDescribed {
	out := []shareOffsetDescribed{}
	ds, err := e.adm.DescribeShareGroupOffsets(ctx, name)
	if err != nil {
		return out
	}
	d, ok := ds[name]
	if !ok || d.Err != nil {
		return out
	}
	for t, ps := range d.Offsets {
		for p, o := range ps {
			if o.StartOffset < 0 && o.Err == nil {
				continue // no state
			}
			so := shareOffsetDescribed{Topic: t, Partition: p, StartOffset: o.StartOffset, Lag: o.Lag}
			if o.Err != nil {
				so.Error = o.Err.Error()
			}
			out = append(out, so)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
