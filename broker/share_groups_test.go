package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
)

// shareGroupSettings turns share groups on with short timeouts.
var shareGroupSettings = withSettings(map[string]string{
	"group.coordinator.rebalance.protocols": "classic,consumer,share",
	"group.share.session.timeout.ms":        "3000",
	"group.share.min.session.timeout.ms":    "100",
	"group.share.min.heartbeat.interval.ms": "50",
	"group.share.heartbeat.interval.ms":     "100",
})

// shareHB sends one ShareGroupHeartbeat (names nil: not sent).
func shareHB(t *testing.T, c *rawConn, groupID, member string, epoch int32, names ...string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.GroupID, hb.MemberID, hb.MemberEpoch = groupID, member, epoch
	if names != nil {
		hb.SubscribedTopicNames = names
	}
	return c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse)
}

// shareDescribe describes one share group.
func shareDescribe(t *testing.T, c *rawConn, groupID string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.SetVersion(1)
	req.GroupIDs = []string{groupID}
	return c.roundTrip(req).(*kmsg.ShareGroupDescribeResponse).Groups[0]
}

// assigned flattens a heartbeat assignment to partition numbers (one
// topic).
func assigned(a *kmsg.ShareGroupHeartbeatResponseAssignment) []int32 {
	if a == nil {
		return nil
	}
	var ps []int32
	for _, tp := range a.TopicPartitions {
		ps = append(ps, tp.Partitions...)
	}
	slices.Sort(ps)
	return ps
}

func hbErr(r *kmsg.ShareGroupHeartbeatResponse) error { return kerr.ErrorForCode(r.ErrorCode) }

// TestShareGroupMembershipRaw: join (epoch 0) gets the whole topic, a
// second member takes half at once and the first learns of its smaller
// share at its next heartbeat (no revocation step); a third member on a
// 2-partition topic shares a partition; Kafka's errors; ShareGroupDescribe;
// a leave bumps the epoch.
func TestShareGroupMembershipRaw(t *testing.T) {
	n := startNode(t, t.TempDir(), shareGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "q")
	waitLoaded(t, n, "q")

	r1 := shareHB(t, c, "q", "m1", 0, "t")
	if r1.ErrorCode != 0 || r1.MemberEpoch != 1 || !slices.Equal(assigned(r1.Assignment), []int32{0, 1}) || r1.HeartbeatIntervalMillis != 100 {
		t.Fatalf("join m1: %v epoch %d assignment %v interval %d", hbErr(r1), r1.MemberEpoch, assigned(r1.Assignment), r1.HeartbeatIntervalMillis)
	}
	r2 := shareHB(t, c, "q", "m2", 0, "t")
	if r2.ErrorCode != 0 || r2.MemberEpoch != 2 || len(assigned(r2.Assignment)) != 1 {
		t.Fatalf("join m2: %v epoch %d assignment %v", hbErr(r2), r2.MemberEpoch, assigned(r2.Assignment))
	}
	r1 = shareHB(t, c, "q", "m1", 1)
	if r1.ErrorCode != 0 || r1.MemberEpoch != 2 || len(assigned(r1.Assignment)) != 1 || assigned(r1.Assignment)[0] == assigned(r2.Assignment)[0] {
		t.Fatalf("m1 after m2 joined: %v epoch %d assignment %v (m2 %v)", hbErr(r1), r1.MemberEpoch, assigned(r1.Assignment), assigned(r2.Assignment))
	}
	if r := shareHB(t, c, "q", "m1", 2); r.ErrorCode != 0 || r.Assignment != nil {
		t.Fatalf("unchanged heartbeat: %v assignment %v", hbErr(r), r.Assignment)
	}
	r3 := shareHB(t, c, "q", "m3", 0, "t")
	if r3.ErrorCode != 0 || r3.MemberEpoch != 3 || len(assigned(r3.Assignment)) != 1 {
		t.Fatalf("join m3: %v epoch %d assignment %v", hbErr(r3), r3.MemberEpoch, assigned(r3.Assignment))
	}

	for _, tc := range []struct {
		name   string
		group  string
		member string
		epoch  int32
		names  []string
		want   *kerr.Error
	}{
		{"empty member id", "q", "", 0, []string{"t"}, kerr.InvalidRequest},
		{"join without topics", "q", "m9", 0, nil, kerr.InvalidRequest},
		{"epoch below -1", "q", "m1", -2, nil, kerr.InvalidRequest},
		{"unknown member", "q", "m9", 1, nil, kerr.UnknownMemberID},
		{"fenced epoch", "q", "m1", 7, nil, kerr.FencedMemberEpoch},
		{"unknown group", "nope", "m1", 1, nil, kerr.GroupIDNotFound},
	} {
		if r := shareHB(t, c, tc.group, tc.member, tc.epoch, tc.names...); r.ErrorCode != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.name, hbErr(r), tc.want)
		}
	}

	d := shareDescribe(t, c, "q")
	if d.ErrorCode != 0 || d.GroupState != "Stable" || d.GroupEpoch != 3 || d.AssignmentEpoch != 3 || d.Assignor != "simple" || len(d.Members) != 3 {
		t.Fatalf("describe: %+v", d)
	}
	holders := map[int32]int{}
	for _, m := range d.Members {
		if m.ClientHost != "/127.0.0.1" || !slices.Equal(m.SubscribedTopicNames, []string{"t"}) {
			t.Errorf("member %s: host %q topics %v", m.MemberID, m.ClientHost, m.SubscribedTopicNames)
		}
		for _, tp := range m.Assignment.TopicPartitions {
			if tp.Topic != "t" {
				t.Errorf("member %s assigned topic %q", m.MemberID, tp.Topic)
			}
			for _, p := range tp.Partitions {
				holders[p]++
			}
		}
	}
	// m1 has not heartbeated since m3 joined: its partition stays its own
	// until it does, so the sharing shows once every member caught up.
	if holders[0] < 1 || holders[1] < 1 {
		t.Errorf("partition holders %v", holders)
	}
	if d := shareDescribe(t, c, "nope"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe unknown group: %d", d.ErrorCode)
	}

	if r := shareHB(t, c, "q", "m3", -1); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave m3: %v epoch %d", hbErr(r), r.MemberEpoch)
	}
	if d := shareDescribe(t, c, "q"); d.GroupEpoch != 4 || len(d.Members) != 2 {
		t.Fatalf("after m3 left: epoch %d, %d members", d.GroupEpoch, len(d.Members))
	}
	if r := shareHB(t, c, "q", "m3", -1); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave again: %v", hbErr(r))
	}
}

// TestShareGroupOffUntilEnabled: without share in
// group.coordinator.rebalance.protocols (it is in the default) keys 76 and
// 77 are not advertised and answer UNSUPPORTED_VERSION.
func TestShareGroupOffUntilEnabled(t *testing.T) {
	n := startNode(t, t.TempDir(), withSettings(map[string]string{"group.coordinator.rebalance.protocols": "classic,consumer"}))
	cl := newClient(t, n)
	vresp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range vresp.ApiKeys {
		if k.ApiKey == shareGroupHeartbeatKey || k.ApiKey == shareGroupDescribeKey {
			t.Fatalf("key %d advertised with share groups off", k.ApiKey)
		}
	}
	c := dialRaw(t, n)
	if r := shareHB(t, c, "q", "m1", 0, "t"); r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("heartbeat with share groups off: %v", hbErr(r))
	}
	on := startNode(t, t.TempDir(), shareGroupSettings)
	vresp, err = kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), newClient(t, on))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, k := range vresp.ApiKeys {
		if (k.ApiKey == shareGroupHeartbeatKey || k.ApiKey == shareGroupDescribeKey) && k.MinVersion == 1 && k.MaxVersion == 1 {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("keys 76/77 v1 not advertised with share on: %+v", vresp.ApiKeys)
	}
}

// TestShareGroupIDNamespace: one group id namespace, as Kafka: a share
// heartbeat for a consumer group or a classic group is GROUP_ID_NOT_FOUND
// ("not a share group"), a consumer heartbeat for a share group
// GROUP_ID_NOT_FOUND, a JoinGroup INCONSISTENT_GROUP_PROTOCOL, an
// OffsetCommit, TxnOffsetCommit or OffsetFetch GROUP_ID_NOT_FOUND;
// ListGroups lists share groups with type and state filters and
// DescribeGroups v6 says a share group is no classic group.
func TestShareGroupIDNamespace(t *testing.T) {
	n := startNode(t, t.TempDir(), withSettings(map[string]string{
		"group.coordinator.rebalance.protocols":    "classic,consumer,share",
		"group.consumer.min.session.timeout.ms":    "100",
		"group.consumer.min.heartbeat.interval.ms": "50",
	}))
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	c := dialRaw(t, n)
	for _, g := range []string{"q", "cg", "q2"} {
		findCoordinator(t, c, g)
		waitLoaded(t, n, g)
	}
	if r := shareHB(t, c, "q", "m1", 0, "t"); r.ErrorCode != 0 {
		t.Fatalf("join q: %v", hbErr(r))
	}
	if r := shareHB(t, c, "q2", "m1", 0, "t"); r.ErrorCode != 0 {
		t.Fatalf("join q2: %v", hbErr(r))
	}
	if r := shareHB(t, c, "q2", "m1", 1); r.ErrorCode != 0 {
		t.Fatalf("heartbeat q2: %v", hbErr(r))
	}
	if r := shareHB(t, c, "q2", "m1", -1); r.ErrorCode != 0 {
		t.Fatalf("leave q2: %v", hbErr(r))
	}
	if r := join848(t, c, "cg", "c1"); r.ErrorCode != 0 {
		t.Fatalf("join cg: %d", r.ErrorCode)
	}
	if r := shareHB(t, c, "cg", "m1", 0, "t"); r.ErrorCode != kerr.GroupIDNotFound.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Group cg is not a share group." {
		t.Errorf("share join of a consumer group: %v %v", hbErr(r), r.ErrorMessage)
	}
	if r := join848(t, c, "q", "c1"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("consumer join of a share group: %d", r.ErrorCode)
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.SetVersion(5)
	jg.Group, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = "q", 10000, 10000, "consumer"
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	if r := c.roundTrip(jg).(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("classic join of a share group: %d", r.ErrorCode)
	}

	// A share group commits and fetches no offsets (Kafka: "Group %s is
	// not a consumer group.").
	if code := commitRaw(t, c, 7, "q", "t", 0, 5, nil); code != kerr.GroupIDNotFound.Code {
		t.Errorf("OffsetCommit to a share group: %d", code)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(5)
	of.Group = "q"
	if r := c.roundTrip(of).(*kmsg.OffsetFetchResponse); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("OffsetFetch of a share group: %d", r.ErrorCode)
	}
	verifyAnswer(n, 0, nil) // the transaction coordinator's verdict: in the transaction
	if code := txnOffsetCommitRaw(t, c, txnCommit{version: 3, txnID: "tx", group: "q", pid: 42, generation: -1, topic: "t", offset: 7}); code != kerr.GroupIDNotFound.Code {
		t.Errorf("TxnOffsetCommit to a share group: %d", code)
	}
	of8 := kmsg.NewPtrOffsetFetchRequest()
	of8.SetVersion(8)
	of8.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "q"}}
	if r := c.roundTrip(of8).(*kmsg.OffsetFetchResponse); len(r.Groups) != 1 || r.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("OffsetFetch v8 of a share group: %+v", r.Groups)
	}

	list := func(types, states []string) []string {
		req := kmsg.NewPtrListGroupsRequest()
		req.SetVersion(5)
		req.TypesFilter, req.StatesFilter = types, states
		var got []string
		for _, g := range c.roundTrip(req).(*kmsg.ListGroupsResponse).Groups {
			got = append(got, g.Group+"/"+g.GroupType+"/"+g.GroupState)
		}
		return got
	}
	if got := list([]string{"share"}, nil); !slices.Equal(got, []string{"q/share/Stable", "q2/share/Empty"}) {
		t.Errorf("ListGroups types share: %v", got)
	}
	if got := list([]string{"Share"}, []string{"empty"}); !slices.Equal(got, []string{"q2/share/Empty"}) {
		t.Errorf("ListGroups share empty: %v", got)
	}
	if got := list([]string{"consumer"}, nil); !slices.Equal(got, []string{"cg/consumer/Stable"}) {
		t.Errorf("ListGroups types consumer: %v", got)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(6)
	dg.Groups = []string{"q"}
	if d := c.roundTrip(dg).(*kmsg.DescribeGroupsResponse).Groups[0]; d.ErrorCode != kerr.GroupIDNotFound.Code ||
		d.ErrorMessage == nil || *d.ErrorMessage != "Group q is not a classic group." {
		t.Errorf("DescribeGroups v6 of a share group: %d %v", d.ErrorCode, d.ErrorMessage)
	}
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{"q"}
	if d := c.roundTrip(cgd).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; d.ErrorCode != kerr.GroupIDNotFound.Code || d.ErrorMessage == nil || *d.ErrorMessage != "Group q is not a consumer group." {
		t.Errorf("ConsumerGroupDescribe of a share group: %d %v", d.ErrorCode, d.ErrorMessage)
	}
	if d := shareDescribe(t, c, "cg"); d.ErrorCode != kerr.GroupIDNotFound.Code || d.ErrorMessage == nil || *d.ErrorMessage != "Group cg is not a share group." {
		t.Errorf("ShareGroupDescribe of a consumer group: %d %v", d.ErrorCode, d.ErrorMessage)
	}
}

// recordingPersister is a MemPersister that records its Delete calls.
type recordingPersister struct {
	*share.MemPersister
	mu      sync.Mutex
	deleted []share.Key
	fail    error
}

func (p *recordingPersister) Delete(ctx context.Context, k share.Key) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	p.deleted = append(p.deleted, k)
	return p.MemPersister.Delete(ctx, k)
}

func deleteGroupsRaw(t *testing.T, c *rawConn, ids ...string) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.SetVersion(2)
	req.Groups = ids
	out := map[string]int16{}
	for _, g := range c.roundTrip(req).(*kmsg.DeleteGroupsResponse).Groups {
		out[g.Group] = g.ErrorCode
	}
	return out
}

// TestShareGroupDeleteAndRestart: a share group resumes after a restart at
// its epochs with its members (replayed from records 10-15, no epoch
// bump at the members' next heartbeats); DeleteGroups refuses it while it
// has members, then deletes the share state of every partition it was
// assigned (Persister.Delete, before its records: a failure leaves the
// group) and the group, for good.
func TestShareGroupDeleteAndRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, shareGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 3, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "q")
	waitLoaded(t, n, "q")
	if r := shareHB(t, c, "q", "m1", 0, "t"); r.ErrorCode != 0 {
		t.Fatalf("join m1: %v", hbErr(r))
	}
	if r := shareHB(t, c, "q", "m2", 0, "t"); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("join m2: %v %d", hbErr(r), r.MemberEpoch)
	}
	before := shareDescribe(t, c, "q")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = startNode(t, dir, shareGroupSettings)
	c = dialRaw(t, n)
	findCoordinator(t, c, "q")
	waitLoaded(t, n, "q")
	after := shareDescribe(t, c, "q")
	if after.ErrorCode != 0 || after.GroupEpoch != before.GroupEpoch || after.AssignmentEpoch != before.AssignmentEpoch || len(after.Members) != 2 {
		t.Fatalf("after restart: %+v\nbefore: %+v", after, before)
	}
	for i := range before.Members {
		b, a := before.Members[i], after.Members[i]
		if a.MemberID != b.MemberID || a.MemberEpoch != b.MemberEpoch || fmt.Sprint(a.Assignment.TopicPartitions) != fmt.Sprint(b.Assignment.TopicPartitions) {
			t.Errorf("member after restart %+v, before %+v", a, b)
		}
	}
	if r := shareHB(t, c, "q", "m2", 2); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("m2 after restart: %v epoch %d", hbErr(r), r.MemberEpoch)
	}

	rec := &recordingPersister{MemPersister: share.NewMemPersister()}
	n.groups.sgs.persister = func() share.Persister { return rec }
	if got := deleteGroupsRaw(t, c, "q"); got["q"] != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete a group with members: %v", got)
	}
	for _, m := range []string{"m1", "m2"} {
		if r := shareHB(t, c, "q", m, -1); r.ErrorCode != 0 {
			t.Fatalf("leave %s: %v", m, hbErr(r))
		}
	}
	rec.fail = kerr.CoordinatorNotAvailable
	if got := deleteGroupsRaw(t, c, "q"); got["q"] != kerr.CoordinatorNotAvailable.Code || !n.groupIsShare("q") {
		t.Fatalf("delete with the share state not deletable: %v, still there %v", got, n.groupIsShare("q"))
	}
	rec.fail = nil
	if got := deleteGroupsRaw(t, c, "q"); got["q"] != 0 {
		t.Fatalf("delete the empty group: %v", got)
	}
	var parts []int32
	for _, k := range rec.deleted {
		if k.Group != "q" {
			t.Errorf("deleted the state of %+v", k)
		}
		parts = append(parts, k.Partition)
	}
	slices.Sort(parts)
	if !slices.Equal(parts, []int32{0, 1, 2}) {
		t.Errorf("share state deleted for partitions %v, want 0-2", parts)
	}
	if d := shareDescribe(t, c, "q"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe after delete: %d", d.ErrorCode)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, shareGroupSettings)
	c = dialRaw(t, n)
	findCoordinator(t, c, "q")
	waitLoaded(t, n, "q")
	if n.groupIsShare("q") {
		t.Fatal("a deleted share group came back after a restart")
	}
}

// TestShareGroupSessionTimeoutFences: a silent member is fenced after the
// group's share.session.timeout.ms (set on the GROUP resource, validated
// against this broker's group.share.* bounds), its partitions going to
// the member still heartbeating, whose heartbeat interval is the group's.
func TestShareGroupSessionTimeoutFences(t *testing.T) {
	n := startNode(t, t.TempDir(), shareGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	c := dialRaw(t, n)
	for _, bad := range [][]string{
		{"share.session.timeout.ms", "50"},           // below the broker's min (100)
		{"share.heartbeat.interval.ms", "20000"},     // above the max (15000)
		{"share.auto.offset.reset", "none"},          // not a share reset
		{"share.isolation.level", "read_uncommited"}, // misspelt
		{"share.record.lock.duration.ms", "100"},     // below 15000
		{"share.delivery.count.limit", "1"},          // below 2
	} {
		if code := alterGroupConfigs(t, c, "q", bad...); code != kerr.InvalidConfig.Code {
			t.Errorf("set %v: code %d, want INVALID_CONFIG", bad, code)
		}
	}
	if code := alterGroupConfigs(t, c, "q", "share.session.timeout.ms", "600", "share.heartbeat.interval.ms", "150",
		"share.auto.offset.reset", "earliest", "share.delivery.count.limit", "10", "share.isolation.level", "read_committed",
		"share.record.lock.duration.ms", "20000"); code != 0 {
		t.Fatalf("set share configs: %v", kerr.ErrorForCode(code))
	}
	if got, want := n.shareGroupConfig("q"), (ShareGroupConfig{AutoOffsetReset: "earliest", RecordLockDurationMs: 20000, DeliveryCountLimit: 10, IsolationLevel: 1}); got != want {
		t.Errorf("shareGroupConfig(q) = %+v, want %+v", got, want)
	}
	if got, want := n.shareGroupConfig("other"), (ShareGroupConfig{AutoOffsetReset: "latest", RecordLockDurationMs: 30000, DeliveryCountLimit: 5}); got != want {
		t.Errorf("shareGroupConfig(other) = %+v, want the defaults %+v", got, want)
	}
	cfgs := describeGroupConfigs(t, c, "q")
	for name, want := range map[string]string{"share.session.timeout.ms": "600", "share.auto.offset.reset": "earliest"} {
		if cfg := cfgs[name]; cfg.Value == nil || *cfg.Value != want || cfg.Source != kmsg.ConfigSourceGroupConfig {
			t.Errorf("q %s: %+v", name, cfg)
		}
	}
	if cfg := describeGroupConfigs(t, c, "other")["share.auto.offset.reset"]; cfg.Value == nil || *cfg.Value != "latest" || cfg.Source != kmsg.ConfigSourceDefaultConfig || cfg.ConfigType != kmsg.ConfigTypeString {
		t.Errorf("other share.auto.offset.reset: %+v", cfg)
	}

	findCoordinator(t, c, "q")
	waitLoaded(t, n, "q")
	if r := shareHB(t, c, "q", "quiet", 0, "t"); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 150 {
		t.Fatalf("join quiet: %v interval %d", hbErr(r), r.HeartbeatIntervalMillis)
	}
	r := shareHB(t, c, "q", "busy", 0, "t")
	if r.ErrorCode != 0 {
		t.Fatalf("join busy: %v", hbErr(r))
	}
	epoch := r.MemberEpoch
	testutil.Eventually(t, testWait, func() error {
		r := shareHB(t, c, "q", "busy", epoch)
		if r.ErrorCode != 0 {
			return hbErr(r)
		}
		epoch = r.MemberEpoch
		d := shareDescribe(t, c, "q")
		if len(d.Members) != 1 || d.Members[0].MemberID != "busy" {
			return fmt.Errorf("%d members", len(d.Members))
		}
		if tps := d.Members[0].Assignment.TopicPartitions; len(tps) != 1 || len(tps[0].Partitions) != 2 {
			return fmt.Errorf("busy holds %+v", tps)
		}
		return nil
	}, "the quiet member to be fenced and busy to hold both partitions")
}

// TestShareGroupFollowsTopicChanges: partitions added to a subscribed
// topic bump the group epoch without any heartbeat (the metadata pass),
// and the member picks up the new partitions at its next heartbeat.
func TestShareGroupFollowsTopicChanges(t *testing.T) {
	n := startNode(t, t.TempDir(), shareGroupSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "q")
	waitLoaded(t, n, "q")
	if r := shareHB(t, c, "q", "m1", 0, "t"); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join: %v %d", hbErr(r), r.MemberEpoch)
	}
	if _, err := adm.CreatePartitions(testCtx(t), 2, "t"); err != nil { // 1 + 2
		t.Fatal(err)
	}
	testutil.Eventually(t, testWait, func() error {
		if d := shareDescribe(t, c, "q"); d.GroupEpoch != 2 {
			return fmt.Errorf("group epoch %d", d.GroupEpoch)
		}
		return nil
	}, "the group epoch to follow the new partitions")
	if r := shareHB(t, c, "q", "m1", 1); r.ErrorCode != 0 || r.MemberEpoch != 2 || !slices.Equal(assigned(r.Assignment), []int32{0, 1, 2}) {
		t.Fatalf("after growth: %v epoch %d assignment %v", hbErr(r), r.MemberEpoch, assigned(r.Assignment))
	}
}

// TestShareGroupFranzGoMembership: franz-go's share consumer
// (kgo.ShareGroup) joins through ShareGroupHeartbeat with its own member
// id and gets the topic assigned; a second one shares the one-partition
// topic; closing a client leaves the group (epoch -1), so it ends Empty.
func TestShareGroupFranzGoMembership(t *testing.T) {
	n := startNode(t, t.TempDir(), shareGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "q")
	waitLoaded(t, n, "q")
	start := func() *kgo.Client {
		cl := newClient(t, n, kgo.ShareGroup("q"), kgo.ConsumeTopics("t"))
		go func() {
			for {
				if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
					return
				}
			}
		}()
		return cl
	}
	cl1, cl2 := start(), start()
	testutil.Eventually(t, testWait, func() error {
		d := shareDescribe(t, c, "q")
		if d.ErrorCode != 0 || len(d.Members) != 2 {
			return fmt.Errorf("describe: %v, %d members", kerr.ErrorForCode(d.ErrorCode), len(d.Members))
		}
		for _, m := range d.Members {
			if len(m.Assignment.TopicPartitions) != 1 || !slices.Equal(m.Assignment.TopicPartitions[0].Partitions, []int32{0}) || m.MemberEpoch != d.AssignmentEpoch {
				return fmt.Errorf("member %s epoch %d (assignment epoch %d) holds %+v", m.MemberID, m.MemberEpoch, d.AssignmentEpoch, m.Assignment.TopicPartitions)
			}
		}
		return nil
	}, "both share consumers to hold t-0")
	cl1.Close()
	cl2.Close()
	testutil.Eventually(t, testWait, func() error {
		if d := shareDescribe(t, c, "q"); d.GroupState != "Empty" {
			return fmt.Errorf("state %s, %d members", d.GroupState, len(d.Members))
		}
		return nil
	}, "the closed consumers to leave")
}

// TestShareGroupAuthorization: ShareGroupHeartbeat needs READ on the group
// (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on each subscribed topic
// (TOPIC_AUTHORIZATION_FAILED); ShareGroupDescribe needs DESCRIBE on the
// group (READ implies it); a refused request makes no group.
func TestShareGroupAuthorization(t *testing.T) {
	n := startNode(t, t.TempDir(), authzOn(shareGroupSettings))
	if res, err := n.svc.CreateTopics(testCtx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "t", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil || res[0].Err != nil {
		t.Fatalf("create: %v %v", err, res)
	}
	c := dialRaw(t, n)
	findCoordinator(t, c, "q")
	waitLoaded(t, n, "q")
	if r := shareHB(t, c, "q", "m1", 0, "t"); r.ErrorCode != kerr.GroupAuthorizationFailed.Code || n.groupIsShare("q") {
		t.Fatalf("join without READ on the group: %v, group made %v", hbErr(r), n.groupIsShare("q"))
	}
	grantDirect(t, n, "GROUP:LITERAL:q ALLOW User:ANONYMOUS@* READ")
	if r := shareHB(t, c, "q", "m1", 0, "t"); r.ErrorCode != kerr.TopicAuthorizationFailed.Code || n.groupIsShare("q") {
		t.Fatalf("join without DESCRIBE on the topic: %v, group made %v", hbErr(r), n.groupIsShare("q"))
	}
	grantDirect(t, n, "TOPIC:LITERAL:t ALLOW User:ANONYMOUS@* DESCRIBE")
	if r := shareHB(t, c, "q", "m1", 0, "t"); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join with both: %v epoch %d", hbErr(r), r.MemberEpoch)
	}
	if d := shareDescribe(t, c, "other"); d.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("describe without DESCRIBE on the group: %d", d.ErrorCode)
	}
	if d := shareDescribe(t, c, "q"); d.ErrorCode != 0 || len(d.Members) != 1 { // READ implies DESCRIBE
		t.Fatalf("describe with READ on the group: %d, %d members", d.ErrorCode, len(d.Members))
	}
}
