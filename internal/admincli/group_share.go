package admincli

// `strata group describe` of a KIP-932 share group (ShareGroupDescribe):
// the group epoch and assignment epoch, the assignor ("simple"), and per
// member its epoch, subscription and assigned partitions (a partition may
// be assigned to several members). Share groups commit no offsets: their
// progress is the share-partition state, shown per partition with its
// start offset, lag and in-flight count (DescribeShareGroupOffsets, the
// share coordinator's; left out when the cluster does not serve it).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	// InFlight is the records delivered and not yet acknowledged or
	// archived, as of the share-partition's last durable write (-1:
	// unknown).
	InFlight int64  `json:"in_flight"`
	Error    string `json:"error,omitempty"`
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
			row(w, "TOPIC", "PARTITION", "START-OFFSET", "LAG", "IN-FLIGHT", "ERROR")
			for _, o := range out.Offsets {
				row(w, o.Topic, o.Partition, o.StartOffset, o.Lag, o.InFlight, dash(o.Error))
			}
		}
	})
}

// inFlightTag is broker.InFlightTag (the CLI does not import the broker).
const inFlightTag = 0x5374

func topicNames(ts []string) string { return strings.Join(ts, ",") }

// shareOffsets is the group's share-partitions with state, sorted; none
// when the cluster does not answer DescribeShareGroupOffsets. It sends the
// request itself (kadm's answer drops tagged fields) to read Strata's
// in-flight count, a tagged field (broker.InFlightTag) of each partition;
// -1 when the broker does not send one.
func shareOffsets(ctx context.Context, e *env, name string) []shareOffsetDescribed {
	out, _ := describeShareOffsets(ctx, e, name)
	return out
}

// describeShareOffsets is shareOffsets with the request's or the group's
// error (out is then empty).
func describeShareOffsets(ctx context.Context, e *env, name string) ([]shareOffsetDescribed, error) {
	out := []shareOffsetDescribed{}
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = name // Topics nil: every share-partition of the group
	req.Groups = append(req.Groups, rg)
	kr, err := req.RequestWith(ctx, e.cl)
	if err != nil {
		return out, err
	}
	for _, g := range kr.Groups {
		if g.GroupID != name {
			continue
		}
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return []shareOffsetDescribed{}, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				perr := kerr.ErrorForCode(p.ErrorCode)
				if p.StartOffset < 0 && perr == nil {
					continue // no state
				}
				so := shareOffsetDescribed{Topic: t.Topic, Partition: p.Partition, StartOffset: p.StartOffset, Lag: p.Lag, InFlight: -1}
				p.UnknownTags.Each(func(tag uint32, v []byte) {
					if tag == inFlightTag && len(v) == 4 {
						so.InFlight = int64(int32(binary.BigEndian.Uint32(v)))
					}
				})
				if perr != nil {
					so.Error = perr.Error()
				}
				out = append(out, so)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// shareInFlight is a share group's in-flight records summed over its
// share-partitions (DescribeShareGroupOffsets' broker.InFlightTag), -1
// when unknown: the request failed, or a share-partition's count is
// missing (an error, a broker that does not send the tag).
func shareInFlight(ctx context.Context, e *env, name string) int64 {
	offs, err := describeShareOffsets(ctx, e, name)
	if err != nil {
		return -1
	}
	var sum int64
	for _, o := range offs {
		if o.InFlight < 0 || o.Error != "" {
			return -1
		}
		sum += o.InFlight
	}
	return sum
}
