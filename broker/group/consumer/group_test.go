package consumer

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupHarness drives one Group through the scripts in testdata/group.
// After every command it replays all the records written so far, through
// their bytes (EncodeRecord → DecodeRecord), and checks the rebuilt group
// equals the live one: every script is also a replay test.
type groupHarness struct {
	g      *Group
	img    TopicImage
	names  names
	log    []Record
	hashes map[int64]string
	ids    int
}

func newGroupHarness() *groupHarness {
	h := &groupHarness{img: TopicImage{}, names: names{}, hashes: map[int64]string{0: "0"}}
	cfg := DefaultConfig()
	cfg.NewMemberID = func() string { h.ids++; return fmt.Sprintf("gen%d", h.ids) }
	h.g = NewGroup("g", cfg)
	return h
}

func TestGroupDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata/group", func(t *testing.T, path string) {
		h := newGroupHarness()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out := h.run(t, td)
			h.checkReplay(t)
			return out
		})
	})
}

func (h *groupHarness) run(t *testing.T, td *datadriven.TestData) string {
	switch td.Cmd {
	case "topics":
		h.img = TopicImage{}
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			top := parseTopic(t, line)
			h.img[top.Name], h.names[top.ID] = top, top.Name
		}
		return ""
	case "config":
		for _, a := range td.CmdArgs {
			n := atoi(t, a.Vals[0])
			switch a.Key {
			case "session":
				h.g.cfg.SessionTimeoutMs = int32(n)
			case "max-size":
				h.g.cfg.MaxSize = n
			default:
				t.Fatalf("config %q", a.Key)
			}
		}
		return ""
	case "heartbeat", "hb":
		return h.heartbeat(t, td)
	case "expire":
		recs := h.g.Expire(int64(atoi(t, argStr(td, "at", "0"))), h.img)
		return h.records(recs)
	case "metadata-changed":
		return h.records(h.g.MetadataChanged(h.img))
	case "deadline":
		at, ok := h.g.NextDeadline()
		if !ok {
			return "none\n"
		}
		return fmt.Sprintf("%d\n", at)
	case "describe":
		return h.describe()
	case "consumer-group-describe":
		return h.kafkaDescribe()
	case "commit":
		var e *kerr.Error
		if td.HasArg("fetch") {
			var id *string
			if td.HasArg("member") {
				id = kmsg.StringPtr(argStr(td, "member", ""))
			}
			e = h.g.ValidateOffsetFetch(id, int32(atoi(t, argStr(td, "epoch", "-1"))))
		} else {
			e = h.g.ValidateOffsetCommit(argStr(td, "member", ""), int32(atoi(t, argStr(td, "epoch", "-1"))),
				td.HasArg("txn"), int16(atoi(t, argStr(td, "v", "9"))))
		}
		if e == nil {
			return "ok\n"
		}
		return e.Message + "\n"
	}
	t.Fatalf("unknown command %q", td.Cmd)
	return ""
}

func (h *groupHarness) heartbeat(t *testing.T, td *datadriven.TestData) string {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = "g"
	req.RebalanceTimeoutMillis = -1
	now := int64(0)
	rebalanceSet, ownedSet := false, false
	client := Client{ID: "client", Host: "/127.0.0.1"}
	for _, a := range td.CmdArgs {
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		switch a.Key {
		case "member":
			req.MemberID = strings.ReplaceAll(v, "~", " ") // ~ stands for a space
		case "epoch":
			req.MemberEpoch = int32(atoi(t, v))
		case "at":
			now = int64(atoi(t, v))
		case "v":
			req.Version = int16(atoi(t, v))
		case "group":
			req.Group = v
		case "names":
			req.SubscribedTopicNames = []string{}
			if v != "" && v != "-" {
				req.SubscribedTopicNames = strings.Split(v, ",")
			}
		case "regex":
			req.SubscribedTopicRegex = kmsg.StringPtr(v)
		case "instance":
			req.InstanceID = kmsg.StringPtr(v)
		case "rack":
			req.RackID = kmsg.StringPtr(v)
		case "rebalance":
			req.RebalanceTimeoutMillis, rebalanceSet = int32(atoi(t, v)), true
		case "assignor":
			req.ServerAssignor = kmsg.StringPtr(v)
		case "client":
			client.ID = v
		case "owned":
			ownedSet = true
			if v == "null" {
				continue
			}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			for id, ps := range parseAssignment(t, v) {
				rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
				rt.TopicID, rt.Partitions = id, ps
				req.Topics = append(req.Topics, rt)
			}
			slices.SortFunc(req.Topics, func(a, b kmsg.ConsumerGroupHeartbeatRequestTopic) int {
				return strings.Compare(h.names.of(a.TopicID), h.names.of(b.TopicID))
			})
		default:
			t.Fatalf("heartbeat: unknown argument %q", a.Key)
		}
	}
	if req.MemberEpoch == 0 && !rebalanceSet {
		req.RebalanceTimeoutMillis = 30000
	}
	if req.MemberEpoch == 0 && !ownedSet {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{} // a join owns nothing
	}
	// The request must survive the wire: encode and decode it with kmsg.
	wire := req.AppendTo(nil)
	dec := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	dec.Version = req.Version
	if err := dec.ReadFrom(wire); err != nil {
		t.Fatalf("request does not round-trip: %v", err)
	}
	res := h.g.Heartbeat(now, dec, client, h.img)
	var b strings.Builder
	b.WriteString(h.response(res.Response))
	b.WriteString(h.records(res.Records))
	return b.String()
}

func (h *groupHarness) response(r *kmsg.ConsumerGroupHeartbeatResponse) string {
	if r.ErrorCode != 0 {
		return fmt.Sprintf("error %s: %s\n", kerr.ErrorForCode(r.ErrorCode).(*kerr.Error).Message, *r.ErrorMessage)
	}
	member := "<nil>"
	if r.MemberID != nil {
		member = *r.MemberID
	}
	s := fmt.Sprintf("ok member=%s epoch=%d hb=%d", member, r.MemberEpoch, r.HeartbeatIntervalMillis)
	if r.Assignment == nil {
		s += " assignment=unchanged"
	} else {
		a := Assignment{}
		for _, t := range r.Assignment.Topics {
			for _, p := range t.Partitions {
				a.add(t.TopicID, p)
			}
		}
		s += " assignment=" + h.names.format(a)
	}
	return s + "\n"
}

func (h *groupHarness) hash(v int64) string {
	if s, ok := h.hashes[v]; ok {
		return s
	}
	s := "h" + strconv.Itoa(len(h.hashes))
	h.hashes[v] = s
	return s
}

// records prints recs, appends them to the harness log (through their
// bytes) and checks each round-trips.
func (h *groupHarness) records(recs []Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "  %s\n", h.formatRecord(r))
		k, v := EncodeRecord(r)
		d, ok, err := DecodeRecord(k, v)
		if err != nil || !ok {
			panic(fmt.Sprintf("record %s does not decode: %v", h.formatRecord(r), err))
		}
		if h.formatRecord(d) != h.formatRecord(r) {
			panic(fmt.Sprintf("record round trip: %s became %s", h.formatRecord(r), h.formatRecord(d)))
		}
		h.log = append(h.log, d)
	}
	return b.String()
}

func (h *groupHarness) formatRecord(r Record) string {
	switch r := r.(type) {
	case *GroupMetadataRecord:
		if r.Deleted {
			return "GroupMetadata deleted"
		}
		return fmt.Sprintf("GroupMetadata epoch=%d hash=%s", r.Epoch, h.hash(r.MetadataHash))
	case *MemberMetadataRecord:
		if r.Deleted {
			return "MemberMetadata " + r.MemberID + " deleted"
		}
		s := "MemberMetadata " + r.MemberID
		if r.InstanceID != "" {
			s += " instance=" + r.InstanceID
		}
		if r.RackID != "" {
			s += " rack=" + r.RackID
		}
		s += fmt.Sprintf(" names=%v", r.SubscribedTopicNames)
		if r.SubscribedTopicRegex != "" {
			s += " regex=" + r.SubscribedTopicRegex
		}
		s += fmt.Sprintf(" rebalance=%d", r.RebalanceTimeoutMs)
		if r.ServerAssignor != "" {
			s += " assignor=" + r.ServerAssignor
		}
		return s
	case *TargetMetadataRecord:
		return fmt.Sprintf("TargetMetadata epoch=%d", r.AssignmentEpoch)
	case *TargetMemberRecord:
		if r.Deleted {
			return "TargetMember " + r.MemberID + " deleted"
		}
		return "TargetMember " + r.MemberID + " " + h.names.format(r.Partitions)
	case *CurrentAssignmentRecord:
		if r.Deleted {
			return "CurrentAssignment " + r.MemberID + " deleted"
		}
		return fmt.Sprintf("CurrentAssignment %s epoch=%d prev=%d %s assigned=%s pending=%s", r.MemberID, r.MemberEpoch,
			r.PreviousMemberEpoch, r.State, h.names.format(r.Assigned), h.names.format(r.PendingRevocation))
	case *PartitionMetadataRecord:
		return fmt.Sprintf("PartitionMetadata topics=%d", len(r.Topics))
	}
	return fmt.Sprintf("%T", r)
}

func (h *groupHarness) describe() string {
	g := h.g
	var b strings.Builder
	fmt.Fprintf(&b, "group epoch=%d target=%d hash=%s state=%s\n", g.Epoch, g.TargetEpoch, h.hash(g.MetadataHash), g.State())
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		fmt.Fprintf(&b, "  %s epoch=%d prev=%d %s assigned=%s pending=%s target=%s\n", id, m.Epoch, m.PreviousEpoch,
			m.State, h.names.format(m.Assigned), h.names.format(m.PendingRevocation), h.names.format(g.Target[id]))
	}
	return b.String()
}

// kafkaDescribe prints the ConsumerGroupDescribe entry, after a wire round
// trip of the whole response.
func (h *groupHarness) kafkaDescribe() string {
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	resp.Version = 1
	resp.Groups = append(resp.Groups, h.g.Describe(h.img))
	dec := kmsg.NewPtrConsumerGroupDescribeResponse()
	dec.Version = 1
	if err := dec.ReadFrom(resp.AppendTo(nil)); err != nil {
		panic(err)
	}
	d := dec.Groups[0]
	format := func(a kmsg.Assignment) string {
		var parts []string
		for _, tp := range a.TopicPartitions {
			parts = append(parts, tp.Topic+":"+ranges(tp.Partitions))
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, " ")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "group=%s state=%s epoch=%d assignment-epoch=%d assignor=%s\n", d.Group, d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName)
	for _, m := range d.Members {
		fmt.Fprintf(&b, "  %s epoch=%d type=%d client=%s/%s topics=%v", m.MemberID, m.MemberEpoch, m.MemberType, m.ClientID, m.ClientHost, m.SubscribedTopics)
		if m.InstanceID != nil {
			fmt.Fprintf(&b, " instance=%s", *m.InstanceID)
		}
		if m.SubscribedTopicRegex != nil {
			fmt.Fprintf(&b, " regex=%s", *m.SubscribedTopicRegex)
		}
		fmt.Fprintf(&b, " assignment=%s target=%s\n", format(m.Assignment), format(m.TargetAssignment))
	}
	return b.String()
}

// checkReplay rebuilds the group from the log and compares it to the live
// one (everything persisted: epochs, target, members, partition owners).
func (h *groupHarness) checkReplay(t *testing.T) {
	t.Helper()
	groups := Replay(h.g.cfg, h.log)
	r := groups["g"]
	if r == nil {
		if len(h.g.Members) > 0 || h.g.Epoch > 0 {
			t.Fatalf("replay lost the group")
		}
		return
	}
	if err := sameGroup(h.g, r); err != nil {
		t.Fatalf("replay != live: %v\nlive:\n%s", err, h.describe())
	}
}

func sameGroup(a, b *Group) error {
	if a.Epoch != b.Epoch || a.TargetEpoch != b.TargetEpoch || a.MetadataHash != b.MetadataHash {
		return fmt.Errorf("epochs %d/%d/%x vs %d/%d/%x", a.Epoch, a.TargetEpoch, a.MetadataHash, b.Epoch, b.TargetEpoch, b.MetadataHash)
	}
	if len(a.Target) != len(b.Target) {
		return fmt.Errorf("target of %d members vs %d", len(a.Target), len(b.Target))
	}
	for id, x := range a.Target {
		if !x.Equal(b.Target[id]) {
			return fmt.Errorf("target of %s differs", id)
		}
	}
	if len(a.Members) != len(b.Members) {
		return fmt.Errorf("%d members vs %d", len(a.Members), len(b.Members))
	}
	for id, m := range a.Members {
		o := b.Members[id]
		if o == nil {
			return fmt.Errorf("member %s missing", id)
		}
		if !m.sameMetadata(o) || !m.sameAssignment(o) {
			return fmt.Errorf("member %s: %+v vs %+v", id, *m, *o)
		}
	}
	if !maps.Equal(a.subNames, b.subNames) || !maps.Equal(a.subRegex, b.subRegex) {
		return fmt.Errorf("subscription counts differ: %v %v vs %v %v", a.subNames, a.subRegex, b.subNames, b.subRegex)
	}
	if !reflect.DeepEqual(a.owners, b.owners) && !(len(a.owners) == 0 && len(b.owners) == 0) {
		return fmt.Errorf("partition owners differ: %v vs %v", a.owners, b.owners)
	}
	return nil
}
