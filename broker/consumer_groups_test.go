package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
)

// consumerGroupSettings are the group test settings with short KIP-848
// timers.
var consumerGroupSettings = withSettings(map[string]string{
	"group.consumer.session.timeout.ms":        "3000",
	"group.consumer.min.session.timeout.ms":    "100",
	"group.consumer.min.heartbeat.interval.ms": "50",
	"group.consumer.heartbeat.interval.ms":     "100",
})

// consumer848 is a franz-go consumer of group on topics using the KIP-848
// protocol (kgo.ServerSideBalancer).
func consumer848(t *testing.T, n *Node, groupID string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, n, append([]kgo.Opt{kgo.ConsumerGroup(groupID), kgo.ConsumeTopics("t"),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)...)
}

// describe848 is one ConsumerGroupDescribe of groupID through cl.
func describe848(t *testing.T, cl *kgo.Client, groupID string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{groupID}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 {
		t.Fatalf("describe: %d groups", len(resp.Groups))
	}
	return resp.Groups[0]
}

// stableWith waits until groupID is Stable with the given number of
// partitions per member (sorted), and returns the description.
func stableWith(t *testing.T, cl *kgo.Client, groupID string, shares ...int) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	var d kmsg.ConsumerGroupDescribeResponseGroup
	testutil.Eventually(t, testWait, func() error {
		d = describe848(t, cl, groupID)
		if d.ErrorCode != 0 {
			return kerr.ErrorForCode(d.ErrorCode)
		}
		var got []int
		for _, m := range d.Members {
			n := 0
			for _, tp := range m.Assignment.TopicPartitions {
				n += len(tp.Partitions)
			}
			got = append(got, n)
		}
		slices.Sort(got)
		if d.State != "Stable" || !slices.Equal(got, shares) {
			return fmt.Errorf("state %s, shares %v, want Stable %v", d.State, got, shares)
		}
		return nil
	}, "group %s stable", groupID)
	return d
}

func produce848(t *testing.T, n *Node, from, to int) {
	t.Helper()
	prod := newClient(t, n, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := from; i < to; i++ {
		if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i % 4)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// poller polls a client in the background, recording each record's value
// and partition.
type poller struct {
	mu    sync.Mutex
	seen  map[string]int // value -> times
	parts map[int32]bool
	stop  context.CancelFunc
	done  chan struct{}
}

func startPoller(cl *kgo.Client) *poller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &poller{seen: map[string]int{}, parts: map[int32]bool{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			p.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				p.seen[string(r.Value)]++
				p.parts[r.Partition] = true
			})
			p.mu.Unlock()
			_ = cl.CommitUncommittedOffsets(ctx)
		}
	}()
	return p
}

func (p *poller) halt() {
	p.stop()
	<-p.done
}

func (p *poller) snapshot() (map[string]int, map[int32]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ps := map[string]int{}, map[int32]bool{}
	for k, v := range p.seen {
		s[k] = v
	}
	for k := range p.parts {
		ps[k] = true
	}
	return s, ps
}

// TestConsumerGroup848FranzGo drives franz-go's KIP-848 consumer against
// one node: a member joins and consumes everything, a second joins and
// the partitions split without a record read twice, a member leaves and
// the other takes everything back, and a coordinator restart reloads the
// group (epochs, members, assignments) so that its member heartbeats on
// at the same epoch, without a rebalance.
func TestConsumerGroup848FranzGo(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, consumerGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 4, nil)
	produce848(t, n, 0, 40)

	cl1 := consumer848(t, n, "g")
	p1 := startPoller(cl1)
	admin := newClient(t, n)
	testutil.Eventually(t, testWait, func() error {
		if s, _ := p1.snapshot(); len(s) != 40 {
			return fmt.Errorf("%d of 40 records", len(s))
		}
		return nil
	}, "the first member to read everything")
	d := stableWith(t, admin, "g", 4)
	if d.Epoch < 1 || d.AssignmentEpoch != d.Epoch || d.Members[0].MemberEpoch != d.Epoch {
		t.Fatalf("epochs after one join: group %d, assignment %d, member %d", d.Epoch, d.AssignmentEpoch, d.Members[0].MemberEpoch)
	}

	// A second member: two partitions each, then 40 more records read
	// once, each partition by one member.
	cl2 := consumer848(t, n, "g")
	p2 := startPoller(cl2)
	stableWith(t, admin, "g", 2, 2)
	produce848(t, n, 40, 80)
	testutil.Eventually(t, testWait, func() error {
		s1, _ := p1.snapshot()
		s2, _ := p2.snapshot()
		total := map[string]int{}
		for _, s := range []map[string]int{s1, s2} {
			for v, c := range s {
				total[v] += c
			}
		}
		if len(total) != 80 {
			return fmt.Errorf("%d of 80 records", len(total))
		}
		for v, c := range total {
			if c != 1 {
				return fmt.Errorf("record %s read %d times", v, c)
			}
		}
		return nil
	}, "both members to read the second 40 records once")
	_, parts1 := p1.snapshot()
	_, parts2 := p2.snapshot()
	if len(parts2) != 2 {
		t.Fatalf("second member read partitions %v, want two (first %v; %+v)", parts2, parts1, describe848(t, admin, "g"))
	}

	// The second member leaves: the first takes its partitions back.
	p2.halt()
	cl2.Close()
	stableWith(t, admin, "g", 4)
	produce848(t, n, 80, 100)
	testutil.Eventually(t, testWait, func() error {
		s1, _ := p1.snapshot()
		for i := 80; i < 100; i++ {
			if s1[strconv.Itoa(i)] != 1 {
				return fmt.Errorf("record %d read %d times by the remaining member", i, s1[strconv.Itoa(i)])
			}
		}
		return nil
	}, "the remaining member to read the last 20 records")
	_ = parts1

	// A coordinator restart: the group comes back from __consumer_offsets
	// as it was.
	p1.halt()
	before := stableWith(t, admin, "g", 4)
	member := before.Members[0]
	n.Close()
	n2 := startNode(t, dir, consumerGroupSettings)
	admin2 := newClient(t, n2)
	waitLoaded(t, n2, "g")
	after := describe848(t, admin2, "g")
	if after.ErrorCode != 0 || after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch ||
		len(after.Members) != 1 || after.Members[0].MemberID != member.MemberID || after.Members[0].MemberEpoch != member.MemberEpoch {
		t.Fatalf("after restart: %+v\nbefore: %+v", after, before)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", member.MemberID, member.MemberEpoch, -1
	resp, err := hb.RequestWith(testCtx(t), admin2)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || resp.MemberEpoch != member.MemberEpoch {
		t.Fatalf("heartbeat after restart: error %d, epoch %d (want %d)", resp.ErrorCode, resp.MemberEpoch, member.MemberEpoch)
	}
	if again := describe848(t, admin2, "g"); again.Epoch != before.Epoch {
		t.Fatalf("group epoch %d after the restart's first heartbeat, want %d (a rebalance)", again.Epoch, before.Epoch)
	}
	// Its committed offsets are there, and the member's epoch is checked.
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group, fg.MemberID, fg.MemberEpoch = "g", kmsg.StringPtr(member.MemberID), member.MemberEpoch+5
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{fg}
	fresp, err := fetch.RequestWith(testCtx(t), admin2)
	if err != nil {
		t.Fatal(err)
	}
	if len(fresp.Groups) != 1 || fresp.Groups[0].ErrorCode != kerr.StaleMemberEpoch.Code {
		t.Fatalf("offset fetch at a wrong member epoch: %+v", fresp.Groups)
	}
}

// TestConsumerGroupProtocolOnlyWhenConfigured: without consumer in
// group.coordinator.rebalance.protocols, keys 68 and 69 are not
// advertised (franz-go then runs the classic protocol) and a heartbeat
// sent anyway is refused.
func TestConsumerGroupProtocolOnlyWhenConfigured(t *testing.T) {
	n := startNode(t, t.TempDir(), withSettings(map[string]string{"group.coordinator.rebalance.protocols": "classic"}))
	cl := newClient(t, n)
	vresp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range vresp.ApiKeys {
		if k.ApiKey == 68 || k.ApiKey == 69 {
			t.Fatalf("key %d advertised with the consumer protocol off", k.ApiKey)
		}
	}
	c := dialRaw(t, n)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = "g", "m", 1000, []string{"t"}
	if resp := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("heartbeat with the consumer protocol off: error %d", resp.ErrorCode)
	}
	if _, err := ParseConfig(MergeProperties(map[string]string{"group.coordinator.rebalance.protocols": "classic,streams"}, nil, nil)); err == nil {
		t.Fatal("an unknown protocol was accepted")
	}
}

// join848 joins member to groupID (subscribed to t) with a raw
// heartbeat and returns the response.
func join848(t *testing.T, c *rawConn, groupID, member string) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = groupID, member, 0, 5000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
}

// TestConsumerGroupAdminAndOffsets: the member epoch guards OffsetCommit
// (v9+: STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID; v8 UNSUPPORTED_VERSION) and
// OffsetFetch; ListGroups v5 types and states filters; DescribeGroups v6
// says a consumer group is no classic one; the one namespace of group
// ids (a heartbeat other than a join for a classic group with members:
// GROUP_ID_NOT_FOUND; a JoinGroup of another protocol type for a consumer
// group with members: INCONSISTENT_GROUP_PROTOCOL); DeleteGroups refuses a non-empty consumer
// group and deletes an empty one with its offsets, for good (a restart
// does not bring it back).
func TestConsumerGroupAdminAndOffsets(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, consumerGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	c := dialRaw(t, n)
	if fc := findCoordinator(t, c, "g"); fc.ErrorCode != 0 {
		t.Fatalf("find coordinator: %d", fc.ErrorCode)
	}
	waitLoaded(t, n, "g")
	jr := join848(t, c, "g", "m1")
	if jr.ErrorCode != 0 || jr.MemberEpoch < 1 {
		t.Fatalf("join: error %d epoch %d", jr.ErrorCode, jr.MemberEpoch)
	}
	epoch := jr.MemberEpoch

	commit := func(version int16, member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(version)
		req.Group, req.MemberID, req.Generation = "g", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 7
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		resp := c.roundTrip(req).(*kmsg.OffsetCommitResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	for _, tc := range []struct {
		version int16
		member  string
		epoch   int32
		want    *kerr.Error
	}{
		{9, "m1", epoch + 1, kerr.StaleMemberEpoch},
		{9, "nobody", epoch, kerr.UnknownMemberID},
		{8, "m1", epoch, kerr.UnsupportedVersion},
		{9, "", -1, kerr.UnknownMemberID}, // an admin commit while the group has members
		{9, "m1", epoch, nil},
	} {
		if got := commit(tc.version, tc.member, tc.epoch); got != errCodeOf(tc.want) {
			t.Errorf("commit v%d member %q epoch %d: error %d, want %v", tc.version, tc.member, tc.epoch, got, tc.want)
		}
	}
	fetch := func(member *string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(9)
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.MemberID, g.MemberEpoch = "g", member, epoch
		req.Groups = []kmsg.OffsetFetchRequestGroup{g}
		return c.roundTrip(req).(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode
	}
	if got := fetch(kmsg.StringPtr("m1"), epoch); got != 0 {
		t.Errorf("fetch at the member's epoch: %d", got)
	}
	if got := fetch(kmsg.StringPtr("nobody"), epoch); got != kerr.UnknownMemberID.Code {
		t.Errorf("fetch of an unknown member: %d", got)
	}
	if got := fetch(nil, -1); got != 0 {
		t.Errorf("admin fetch: %d", got)
	}

	// A classic group with a member, for the namespace checks.
	classic := joinConsumer(t, n, "classic", "t")
	if classic.ErrorCode != 0 {
		t.Fatalf("classic join: %d", classic.ErrorCode)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch = "classic", "m9", 1
	if r := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("heartbeat for a classic group: error %d, want GROUP_ID_NOT_FOUND", r.ErrorCode)
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.SetVersion(5)
	jg.Group, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = "g", 3000, 3000, "connect"
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	if r := c.roundTrip(jg).(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("JoinGroup of protocol type connect for a consumer group: error %d, want INCONSISTENT_GROUP_PROTOCOL", r.ErrorCode)
	}

	list := func(types, states []string) map[string]string {
		req := kmsg.NewPtrListGroupsRequest()
		req.SetVersion(5)
		req.TypesFilter, req.StatesFilter = types, states
		out := map[string]string{}
		for _, g := range c.roundTrip(req).(*kmsg.ListGroupsResponse).Groups {
			out[g.Group] = g.GroupType + "/" + g.ProtocolType + "/" + g.GroupState
		}
		return out
	}
	if got := list(nil, nil); got["g"] != "consumer/consumer/Stable" || got["classic"] == "" {
		t.Errorf("ListGroups: %v", got)
	}
	if got := list([]string{"Consumer"}, nil); len(got) != 1 || got["g"] == "" {
		t.Errorf("ListGroups types consumer: %v", got)
	}
	if got := list([]string{"classic"}, nil); got["g"] != "" || got["classic"] == "" {
		t.Errorf("ListGroups types classic: %v", got)
	}
	if got := list(nil, []string{"empty"}); got["g"] != "" {
		t.Errorf("ListGroups states empty: %v", got)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(6)
	dg.Groups = []string{"g"}
	if d := c.roundTrip(dg).(*kmsg.DescribeGroupsResponse).Groups[0]; d.ErrorCode != kerr.GroupIDNotFound.Code ||
		d.ErrorMessage == nil || *d.ErrorMessage != "Group g is not a classic group." {
		t.Errorf("DescribeGroups v6 of a consumer group: %d %v", d.ErrorCode, d.ErrorMessage)
	}

	del := func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"g"}
		return c.roundTrip(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	}
	if got := del(); got != kerr.NonEmptyGroup.Code {
		t.Errorf("delete of a group with a member: %d", got)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic, odt.Partitions = "t", []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	od.Topics = []kmsg.OffsetDeleteRequestTopic{odt}
	if r := c.roundTrip(od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code {
		t.Errorf("OffsetDelete of a subscribed topic: %d / %d", r.ErrorCode, r.Topics[0].Partitions[0].ErrorCode)
	}
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.SetVersion(1)
	leave.Group, leave.MemberID, leave.MemberEpoch = "g", "m1", -1
	if r := c.roundTrip(leave).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	if got := list(nil, []string{"Empty"}); got["g"] != "consumer/consumer/Empty" {
		t.Errorf("ListGroups after the leave: %v", got)
	}
	if got := del(); got != 0 {
		t.Fatalf("delete of the empty group: %d", got)
	}
	if _, ok := n.groups.store.Fetch("g", group.TopicPartition{Topic: "t", Partition: 0}); ok {
		t.Error("the deleted group's offset is still there")
	}
	n.Close()
	n2 := startNode(t, dir, consumerGroupSettings)
	waitLoaded(t, n2, "g")
	if n2.groupIsConsumer("g") {
		t.Error("the deleted consumer group came back after a restart")
	}
}

func errCodeOf(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

// TestConsumerGroupEpochBumpsOnTopicChange: growing a subscribed topic
// bumps the group epoch from the metadata image alone (no heartbeat
// needed), and the member's next heartbeat gets the new partitions.
func TestConsumerGroupEpochBumpsOnTopicChange(t *testing.T) {
	n := startNode(t, t.TempDir(), consumerGroupSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 2, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	jr := join848(t, c, "g", "m1")
	if jr.ErrorCode != 0 || jr.Assignment == nil || len(jr.Assignment.Topics) != 1 || len(jr.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("join: %+v", jr)
	}
	before := describe848(t, newClient(t, n), "g").Epoch
	if _, err := adm.CreatePartitions(testCtx(t), 4, "t"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, n)
	testutil.Eventually(t, testWait, func() error {
		if d := describe848(t, cl, "g"); d.Epoch <= before {
			return fmt.Errorf("group epoch %d, was %d", d.Epoch, before)
		}
		return nil
	}, "the group epoch to move with the partition count")
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "m1", jr.MemberEpoch, -1
	r := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 || r.Assignment == nil || len(r.Assignment.Topics) != 1 || len(r.Assignment.Topics[0].Partitions) != 6 { // 2 + the 4 added
		t.Fatalf("heartbeat after the growth: %+v %+v", r, r.Assignment)
	}
}

// TestConsumerGroupFailedAppendChangesNothing: a heartbeat whose records
// cannot be appended is answered with the append's error
// (NOT_ENOUGH_REPLICAS → COORDINATOR_NOT_AVAILABLE) and leaves the group
// as the log has it: the member that could not join is not in it, and it
// joins at the next epoch once appends work again.
func TestConsumerGroupFailedAppendChangesNothing(t *testing.T) {
	n := startNode(t, t.TempDir(), consumerGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	if r := join848(t, c, "g", "m1"); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join m1: %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
	fail := func(int32) error { return kerr.NotEnoughReplicas }
	n.groups.appendHook.Store(&fail)
	if r := join848(t, c, "g", "m2"); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join m2 with appends failing: error %d", r.ErrorCode)
	}
	d := describe848(t, newClient(t, n), "g")
	if len(d.Members) != 1 || d.Members[0].MemberID != "m1" || d.Epoch != 1 {
		t.Fatalf("after a failed join: epoch %d, members %+v", d.Epoch, d.Members)
	}
	// The first join of a new group failing leaves no group behind (the
	// log never had one), and neither does an invalid one.
	if r := join848(t, c, "fresh", "m1"); r.ErrorCode != kerr.CoordinatorNotAvailable.Code || n.groupIsConsumer("fresh") {
		t.Fatalf("first join of a new group with appends failing: error %d, group kept %v", r.ErrorCode, n.groupIsConsumer("fresh"))
	}
	bad := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	bad.SetVersion(1)
	bad.Group, bad.MemberID, bad.MemberEpoch = "fresh2", "m1", 0 // a join without its fields
	if r := c.roundTrip(bad).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.InvalidRequest.Code || n.groupIsConsumer("fresh2") {
		t.Fatalf("invalid join of a new group: error %d, group kept %v", r.ErrorCode, n.groupIsConsumer("fresh2"))
	}
	n.groups.appendHook.Store(nil)
	if r := join848(t, c, "g", "m2"); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("join m2 once appends work: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
}

// TestConsumerGroupSessionTimeoutFences: a member that stops
// heartbeating is fenced by the group's timer once
// group.consumer.session.timeout.ms passes (no request needed), and its
// partitions go to the member still heartbeating.
func TestConsumerGroupSessionTimeoutFences(t *testing.T) {
	n := startNode(t, t.TempDir(), withSettings(map[string]string{
		"group.consumer.session.timeout.ms":        "600",
		"group.consumer.min.session.timeout.ms":    "100",
		"group.consumer.min.heartbeat.interval.ms": "50",
		"group.consumer.heartbeat.interval.ms":     "100",
	}))
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	if r := join848(t, c, "g", "quiet"); r.ErrorCode != 0 {
		t.Fatalf("join quiet: %d", r.ErrorCode)
	}
	r := join848(t, c, "g", "busy")
	if r.ErrorCode != 0 {
		t.Fatalf("join busy: %d", r.ErrorCode)
	}
	cl := newClient(t, n)
	epoch := r.MemberEpoch
	testutil.Eventually(t, testWait, func() error {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.SetVersion(1)
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "busy", epoch, -1
		hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			return kerr.ErrorForCode(r.ErrorCode)
		}
		epoch = r.MemberEpoch
		d := describe848(t, cl, "g")
		if len(d.Members) != 1 || d.Members[0].MemberID != "busy" || d.State != "Stable" {
			return fmt.Errorf("state %s, %d members", d.State, len(d.Members))
		}
		if n := len(d.Members[0].Assignment.TopicPartitions); n != 1 || len(d.Members[0].Assignment.TopicPartitions[0].Partitions) != 2 {
			return fmt.Errorf("busy holds %+v", d.Members[0].Assignment)
		}
		return nil
	}, "the quiet member to be fenced and busy to hold both partitions")
}

// TestConsumerGroupOffsetsExpiry: in a KIP-848 group with a member, the
// offset of a topic no member subscribes to expires (KIP-496) and that of
// a subscribed topic stays; once the member left, the rest expires too
// and the empty group goes with it.
func TestConsumerGroupOffsetsExpiry(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), consumerGroupSettings)
	cfg.OffsetsRetention = 200 * time.Millisecond
	cfg.OffsetsRetentionCheckInterval = 30 * time.Millisecond
	n, err := Open(Options{Config: cfg, Logger: testLogger(), StartTimeout: testWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	createTopic(t, adm, "u", 1, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "s")
	waitLoaded(t, n, "s")
	jr := join848(t, c, "s", "m1")
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %d", jr.ErrorCode)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(9)
	commit.Group, commit.Generation, commit.MemberID = "s", jr.MemberEpoch, "m1"
	for _, tn := range []string{"t", "u"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tn
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
		commit.Topics = append(commit.Topics, rt)
	}
	for _, rt := range c.roundTrip(commit).(*kmsg.OffsetCommitResponse).Topics {
		if rt.Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %s: %d", rt.Topic, rt.Partitions[0].ErrorCode)
		}
	}
	testutil.Eventually(t, testWait, func() bool {
		_, ok := n.groups.store.Fetch("s", group.TopicPartition{Topic: "u", Partition: 0})
		return !ok
	}, "the offset of an unsubscribed topic to expire")
	more := uint64(3*cfg.OffsetsRetention/cfg.OffsetsRetentionCheckInterval) + 1
	passes := n.groups.expiryPasses.Load() + more
	testutil.Eventually(t, testWait, func() bool { return n.groups.expiryPasses.Load() >= passes }, "%d more offset expiry passes", more-1)
	if _, ok := n.groups.store.Fetch("s", group.TopicPartition{Topic: "t", Partition: 0}); !ok {
		t.Fatal("offset of a subscribed topic expired in a group with a member")
	}
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.SetVersion(1)
	leave.Group, leave.MemberID, leave.MemberEpoch = "s", "m1", -1
	if r := c.roundTrip(leave).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	testutil.Eventually(t, testWait, func() bool {
		_, ok := n.groups.store.Fetch("s", group.TopicPartition{Topic: "t", Partition: 0})
		return !ok && !n.groupIsConsumer("s")
	}, "the empty group's offsets to expire, and the group with them")
}

// TestConsumerGroupHeartbeatNeedsTopicDescribe: with READ on the group
// but no DESCRIBE on a subscribed topic, a heartbeat is refused with
// TOPIC_AUTHORIZATION_FAILED (Kafka 4's check) and joins nothing; with
// it, the member joins.
func TestConsumerGroupHeartbeatNeedsTopicDescribe(t *testing.T) {
	n := startNode(t, t.TempDir(), authzOn(consumerGroupSettings))
	if res, err := n.svc.CreateTopics(testCtx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "t", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil || res[0].Err != nil {
		t.Fatalf("create: %v %v", err, res)
	}
	grantDirect(t, n, "GROUP:LITERAL:g ALLOW User:ANONYMOUS@* READ")
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	if r := join848(t, c, "g", "m1"); r.ErrorCode != kerr.TopicAuthorizationFailed.Code || n.groupIsConsumer("g") {
		t.Fatalf("join without DESCRIBE on the topic: error %d, group made %v", r.ErrorCode, n.groupIsConsumer("g"))
	}
	grantDirect(t, n, "TOPIC:LITERAL:t ALLOW User:ANONYMOUS@* DESCRIBE")
	if r := join848(t, c, "g", "m1"); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join with DESCRIBE on the topic: error %d epoch %d", r.ErrorCode, r.MemberEpoch)
	}
}

// TestConsumerGroupRequestsDuringLoad: while the group's partition loads,
// ConsumerGroupHeartbeat and ConsumerGroupDescribe answer
// COORDINATOR_LOAD_IN_PROGRESS (the client retries), as the classic path.
func TestConsumerGroupRequestsDuringLoad(t *testing.T) {
	n := startNode(t, t.TempDir(), consumerGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	release := make(chan struct{})
	hook := func(int32) {
		select {
		case <-release:
		case <-time.After(testWait):
		}
	}
	n.groups.loadHook.Store(&hook)
	c := dialRaw(t, n)
	if r := findCoordinator(t, c, "g"); r.ErrorCode != 0 {
		t.Fatalf("find coordinator: %d", r.ErrorCode)
	}
	if r := join848(t, c, "g", "m1"); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("heartbeat while loading: %d", r.ErrorCode)
	}
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"g"}
	if r := c.roundTrip(d).(*kmsg.ConsumerGroupDescribeResponse); r.Groups[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("describe while loading: %d", r.Groups[0].ErrorCode)
	}
	close(release)
	waitLoaded(t, n, "g")
	if r := join848(t, c, "g", "m1"); r.ErrorCode != 0 {
		t.Fatalf("heartbeat after the load: %d", r.ErrorCode)
	}
}

// TestConsumerGroupTimeoutBounds: group.consumer.session.timeout.ms and
// group.consumer.heartbeat.interval.ms must lie within their min/max
// settings (Kafka's defaults 45-60 s and 5-15 s), and the interval below
// the timeout.
func TestConsumerGroupTimeoutBounds(t *testing.T) {
	for _, tc := range []struct {
		props map[string]string
		want  string // "" valid
	}{
		{map[string]string{}, ""},
		{map[string]string{"group.consumer.session.timeout.ms": "30000"}, "below group.consumer.min.session.timeout.ms"},
		{map[string]string{"group.consumer.session.timeout.ms": "70000"}, "above group.consumer.max.session.timeout.ms"},
		{map[string]string{"group.consumer.heartbeat.interval.ms": "20000"}, "above group.consumer.max.heartbeat.interval.ms"},
		{map[string]string{"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "1000", "group.consumer.heartbeat.interval.ms": "5000"}, "below group.consumer.session.timeout.ms"},
		{map[string]string{"group.consumer.assignors": "sticky"}, "assignors are uniform and range"},
		{map[string]string{"group.consumer.assignors": "range,uniform"}, ""},
	} {
		_, err := ParseConfig(MergeProperties(tc.props, nil, nil))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.props, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want %q", tc.props, err, tc.want)
		}
	}
}
