package consumer

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMigrationPolicy(t *testing.T) {
	for _, tc := range []struct {
		name               string
		upgrade, downgrade bool
	}{
		{"bidirectional", true, true},
		{"UPGRADE", true, false},
		{" downgrade ", false, true},
		{"Disabled", false, false},
	} {
		p, err := ParseMigrationPolicy(tc.name)
		if err != nil {
			t.Fatalf("%q: %v", tc.name, err)
		}
		if p.UpgradeEnabled() != tc.upgrade || p.DowngradeEnabled() != tc.downgrade {
			t.Errorf("%q (%s): upgrade %v downgrade %v, want %v %v", tc.name, p, p.UpgradeEnabled(), p.DowngradeEnabled(), tc.upgrade, tc.downgrade)
		}
		if q, _ := ParseMigrationPolicy(p.String()); q != p {
			t.Errorf("%q: String %q does not parse back", tc.name, p)
		}
	}
	if _, err := ParseMigrationPolicy("sideways"); err == nil {
		t.Error("sideways parsed")
	}
}

func TestCanUpgrade(t *testing.T) {
	for _, tc := range []struct {
		policy        MigrationPolicy
		protocolType  string
		members, max  int
		want          bool
		reasonContain string
	}{
		{MigrationBidirectional, "consumer", 3, 0, true, ""},
		{MigrationUpgrade, "consumer", 3, 3, true, ""},
		{MigrationDowngrade, "consumer", 3, 0, false, "disabled"},
		{MigrationDisabled, "consumer", 1, 0, false, "disabled"},
		{MigrationBidirectional, "connect", 1, 0, false, `"connect"`},
		{MigrationBidirectional, "consumer", 4, 3, false, "group.consumer.max.size (3)"},
	} {
		ok, reason := CanUpgrade(tc.policy, tc.protocolType, tc.members, tc.max)
		if ok != tc.want || !strings.Contains(reason, tc.reasonContain) || (ok && reason != "") {
			t.Errorf("%s %q %d/%d: %v %q, want %v containing %q", tc.policy, tc.protocolType, tc.members, tc.max, ok, reason, tc.want, tc.reasonContain)
		}
	}
}

func classicSubscription(rack string, topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 3
	m.Topics = topics
	if rack != "" {
		m.Rack = &rack
	}
	return m.AppendTo(nil)
}

func classicAssignment(parts map[string][]int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = name, parts[name]
		a.Topics = append(a.Topics, t)
	}
	return a.AppendTo(nil)
}

// TestFromClassic converts a synced classic group: epochs are the
// generation, members keep ids, subscriptions, racks and assignments
// (targets too) and their classic metadata, Stable; the records replay
// (through their bytes) to the same group; a consumer-protocol member then
// joins the converted group as any other and gets a share of the target.
func TestFromClassic(t *testing.T) {
	img := TopicImage{}
	for name, n := range map[string]int32{"a": 4, "b": 2} {
		img[name] = Topic{ID: topicID(name), Name: name, Partitions: n}
	}
	range1 := ClassicProtocol{Name: "range", Metadata: classicSubscription("r1", "b", "a")}
	members := []ClassicMember{{
		ID: "m2", ClientID: "c2", ClientHost: "/127.0.0.1", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000,
		Protocols:  []ClassicProtocol{{Name: "cooperative-sticky", Metadata: classicSubscription("", "a", "b")}, {Name: "range", Metadata: classicSubscription("", "a", "b")}},
		Assignment: classicAssignment(map[string][]int32{"a": {3, 2}, "b": {1}, "gone": {0}}),
	}, {
		ID: "m1", InstanceID: "i1", ClientID: "c1", ClientHost: "/127.0.0.1", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 60000,
		Protocols:  []ClassicProtocol{range1},
		Assignment: classicAssignment(map[string][]int32{"a": {0, 1}, "b": {0}}),
	}}
	g, recs, err := FromClassic("g", DefaultConfig(), 7, "range", members, img)
	if err != nil {
		t.Fatal(err)
	}
	if g.Epoch != 7 || g.TargetEpoch != 7 || g.State() != StateStable || g.MetadataHash == 0 {
		t.Fatalf("epoch %d target %d state %s hash %d", g.Epoch, g.TargetEpoch, g.State(), g.MetadataHash)
	}
	a, b := topicID("a"), topicID("b")
	want := map[string]Assignment{"m1": {a: {0, 1}, b: {0}}, "m2": {a: {2, 3}, b: {1}}}
	for id, as := range want {
		m := g.Members[id]
		if m == nil || !reflect.DeepEqual(m.Assigned, as) || !reflect.DeepEqual(g.Target[id], as) || m.Epoch != 7 || m.State != Stable {
			t.Fatalf("member %s: %+v, target %v; want %v at 7, Stable", id, m, g.Target[id], as)
		}
		if m.Classic == nil || !slices.Equal(m.SubscribedTopicNames, []string{"a", "b"}) {
			t.Fatalf("member %s: classic %+v, topics %v", id, m.Classic, m.SubscribedTopicNames)
		}
	}
	if m1 := g.Members["m1"]; m1.RackID != "r1" || m1.InstanceID != "i1" || m1.Classic.SessionTimeoutMs != 45000 || !reflect.DeepEqual(m1.Classic.Protocols, []ClassicProtocol{range1}) {
		t.Fatalf("m1: %+v %+v", m1, m1.Classic)
	}
	var types []int16
	var decoded []Record
	for _, r := range recs {
		types = append(types, r.Type())
		k, v := EncodeRecord(r)
		d, ok, err := DecodeRecord(k, v)
		if err != nil || !ok {
			t.Fatalf("decode %T: %v", r, err)
		}
		decoded = append(decoded, d)
	}
	if !slices.Equal(types, []int16{5, 5, 3, 7, 7, 6, 8, 8}) {
		t.Fatalf("record types %v, want Kafka's creation order", types)
	}
	if r := Replay(DefaultConfig(), decoded)["g"]; !reflect.DeepEqual(r, g) {
		t.Fatalf("replay differs:\n got %+v\nwant %+v", r, g)
	}

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "new", JoinEpoch, 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"a", "b"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	res := g.Heartbeat(1, hb, Client{ID: "c3"}, img)
	if res.Response.ErrorCode != 0 || res.Response.MemberEpoch != 8 || g.Epoch != 8 {
		t.Fatalf("848 join: code %d epoch %d, group epoch %d", res.Response.ErrorCode, res.Response.MemberEpoch, g.Epoch)
	}
	if len(g.Target["new"]) == 0 {
		t.Fatalf("the joining member has no target: %v", g.Target)
	}
}

func TestFromClassicRefuses(t *testing.T) {
	img := TopicImage{"a": {ID: topicID("a"), Name: "a", Partitions: 2}}
	sub := []ClassicProtocol{{Name: "range", Metadata: classicSubscription("", "a")}}
	for _, tc := range []struct {
		name    string
		members []ClassicMember
		want    string
	}{
		{"protocol", []ClassicMember{{ID: "m1", Protocols: []ClassicProtocol{{Name: "roundrobin", Metadata: classicSubscription("", "a")}}}}, "does not support"},
		{"metadata", []ClassicMember{{ID: "m1", Protocols: []ClassicProtocol{{Name: "range", Metadata: []byte{0}}}}}, "subscription"},
		{"assignment", []ClassicMember{{ID: "m1", Protocols: sub, Assignment: []byte{0, 3, 9}}}, "assignment"},
		{"twice", []ClassicMember{
			{ID: "m1", Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {0}})},
			{ID: "m2", Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {0, 1}})},
		}, "assigned to both"},
	} {
		if _, _, err := FromClassic("g", DefaultConfig(), 3, "range", tc.members, img); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestCanDowngrade(t *testing.T) {
	g := NewGroup("g", DefaultConfig())
	classic := &ClassicMetadata{SessionTimeoutMs: 45000}
	g.Members = map[string]*Member{"k": {ID: "k"}, "c1": {ID: "c1", Classic: classic}, "c2": {ID: "c2", Classic: classic}}
	for _, tc := range []struct {
		policy  MigrationPolicy
		leaving string
		max     int
		want    bool
		reason  string
	}{
		{MigrationBidirectional, "k", 0, true, ""},
		{MigrationDowngrade, "k", 2, true, ""},
		{MigrationBidirectional, "k", 1, false, "group.max.size (1)"},
		{MigrationUpgrade, "k", 0, false, "disabled"},
		{MigrationBidirectional, "c1", 0, false, "consumer protocol"},
	} {
		ok, reason := CanDowngrade(tc.policy, g, tc.leaving, tc.max)
		if ok != tc.want || !strings.Contains(reason, tc.reason) {
			t.Errorf("%s leaving %s max %d: %v %q, want %v %q", tc.policy, tc.leaving, tc.max, ok, reason, tc.want, tc.reason)
		}
	}
	only := NewGroup("g", DefaultConfig())
	only.Members = map[string]*Member{"k": {ID: "k"}}
	if ok, reason := CanDowngrade(MigrationBidirectional, only, "k", 0); ok || !strings.Contains(reason, "empty") {
		t.Errorf("last member leaving: %v %q", ok, reason)
	}
}

// TestClassicHeartbeat: classic members of a converted group heartbeat
// with their epoch as the generation; Stable at the group epoch they are
// fine, once a consumer-protocol member joined (the epoch moved) they are
// told to rejoin, and one that does not rejoin within its rebalance
// timeout is fenced although its heartbeats keep its session alive.
func TestClassicHeartbeat(t *testing.T) {
	img := TopicImage{"a": {ID: topicID("a"), Name: "a", Partitions: 4}}
	sub := []ClassicProtocol{{Name: "range", Metadata: classicSubscription("", "a")}}
	g, _, err := FromClassic("g", DefaultConfig(), 7, "range", []ClassicMember{
		{ID: "m1", InstanceID: "i1", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 60000, Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {0, 1}})},
		{ID: "m2", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000, Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {2, 3}})},
	}, img)
	if err != nil {
		t.Fatal(err)
	}
	g.Loaded(0)
	if at, ok := g.NextDeadline(); !ok || at != 10000 {
		t.Fatalf("deadline %d %v, want m2's own 10 s session", at, ok)
	}
	check := func(now int64, member, instance string, gen int32, want *kerr.Error) {
		t.Helper()
		if got, msg := g.ClassicHeartbeat(now, member, instance, gen); got != want {
			t.Fatalf("heartbeat %s/%q gen %d: %v (%s), want %v", member, instance, gen, got, msg, want)
		}
	}
	check(5000, "m2", "", 7, nil)
	if recs := g.Expire(10000, img); len(recs) != 0 {
		t.Fatalf("m2 fenced although its heartbeat renewed its session")
	}
	check(5000, "m1", "i1", 7, nil)
	check(5000, "m1", "i1", 6, kerr.IllegalGeneration)
	check(5000, "x", "i1", 7, kerr.FencedInstanceID)
	check(5000, "x", "", 7, kerr.UnknownMemberID)

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "new", JoinEpoch, 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"a"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := g.Heartbeat(6000, hb, Client{ID: "c"}, img); r.Response.ErrorCode != 0 || g.Epoch != 8 {
		t.Fatalf("848 join: %d, epoch %d", r.Response.ErrorCode, g.Epoch)
	}
	check(6000, "new", "", 8, kerr.UnknownMemberID) // not a classic member
	check(7000, "m1", "i1", 7, kerr.RebalanceInProgress)
	check(7000, "m2", "", 7, kerr.RebalanceInProgress)
	// m1 keeps heartbeating (its session runs to 95 s) but never rejoins:
	// fenced at 7 s + its 60 s rebalance timeout.
	check(50000, "m1", "i1", 7, kerr.RebalanceInProgress)
	if _, ok := g.Members["m1"]; !ok {
		t.Fatal("m1 gone early")
	}
	g.Expire(67000-1, img)
	if _, ok := g.Members["m1"]; !ok {
		t.Fatal("m1 fenced before its join deadline")
	}
	g.Expire(67000, img)
	if _, ok := g.Members["m1"]; ok {
		t.Fatal("m1 not fenced at its join deadline")
	}
}

// TestClassicLeave: a LeaveGroup batch on a converted group removes its
// classic members (by member id, or by instance id with an empty member
// id), refuses a consumer-protocol member, an unknown one and a fenced
// static identity, bumps the epoch once, and its records replay to the
// same members.
func TestClassicLeave(t *testing.T) {
	img := TopicImage{"a": {ID: topicID("a"), Name: "a", Partitions: 4}}
	sub := []ClassicProtocol{{Name: "range", Metadata: classicSubscription("", "a")}}
	g, log, err := FromClassic("g", DefaultConfig(), 7, "range", []ClassicMember{
		{ID: "m1", InstanceID: "i1", SessionTimeoutMs: 45000, Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {0, 1}})},
		{ID: "m2", SessionTimeoutMs: 45000, Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {2, 3}})},
	}, img)
	if err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "new", JoinEpoch, 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"a"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r := g.Heartbeat(1, hb, Client{ID: "c"}, img)
	log = append(log, r.Records...)
	if g.Epoch != 8 {
		t.Fatalf("epoch %d after the 848 join", g.Epoch)
	}
	leave := func(member string, instance *string) kmsg.LeaveGroupRequestMember {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID, m.InstanceID = member, instance
		return m
	}
	i1 := "i1"
	resp, recs := g.ClassicLeave([]kmsg.LeaveGroupRequestMember{
		leave("m2", nil), leave("bad", &i1), leave("", &i1), leave("new", nil), leave("zz", nil),
	}, img)
	log = append(log, recs...)
	var codes []int16
	for _, m := range resp {
		codes = append(codes, m.ErrorCode)
	}
	u := kerr.UnknownMemberID.Code
	if !slices.Equal(codes, []int16{0, kerr.FencedInstanceID.Code, 0, u, u}) || resp[2].MemberID != "m1" {
		t.Fatalf("answers %v (third member id %q)", codes, resp[2].MemberID)
	}
	if g.Epoch != 9 || len(g.Members) != 1 || g.Members["new"] == nil || len(g.Target) != 1 {
		t.Fatalf("epoch %d, members %v, target %v", g.Epoch, slices.Sorted(maps.Keys(g.Members)), g.Target)
	}
	if n := len(recs); n == 0 || recs[n-1].Type() != TypeGroupMetadata || slices.IndexFunc(recs[:n-1], func(r Record) bool { return r.Type() == TypeGroupMetadata }) >= 0 {
		t.Fatalf("want one epoch record, last: %v", recs)
	}
	re := Replay(DefaultConfig(), log)["g"]
	if re.Epoch != g.Epoch || !reflect.DeepEqual(re.Members, g.Members) || !reflect.DeepEqual(re.Target, g.Target) {
		t.Fatalf("replay: epoch %d members %+v target %v", re.Epoch, re.Members, re.Target)
	}
	if resp, recs := g.ClassicLeave([]kmsg.LeaveGroupRequestMember{leave("zz", nil)}, img); len(recs) != 0 || resp[0].ErrorCode != u || g.Epoch != 9 {
		t.Fatalf("a refused leave wrote %d records, epoch %d", len(recs), g.Epoch)
	}
}

// TestClassicSync: a classic member of a converted group syncs to its
// assigned partitions (ConsumerProtocol bytes in its subscription's
// version); a wrong protocol, a wrong generation, and a moved group epoch
// are refused as Kafka refuses them.
func TestClassicSync(t *testing.T) {
	img := TopicImage{"a": {ID: topicID("a"), Name: "a", Partitions: 4}}
	sub := []ClassicProtocol{{Name: "range", Metadata: classicSubscription("", "a")}}
	g, _, err := FromClassic("g", DefaultConfig(), 7, "range", []ClassicMember{
		{ID: "m1", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 30000, Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {0, 1}})},
		{ID: "m2", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 30000, Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {2, 3}})},
	}, img)
	if err != nil {
		t.Fatal(err)
	}
	sync := func(member string, gen int32, ptype, proto string) *kmsg.SyncGroupResponse {
		req := kmsg.NewPtrSyncGroupRequest()
		req.SetVersion(5)
		req.Group, req.MemberID, req.Generation = "g", member, gen
		req.ProtocolType, req.Protocol = &ptype, &proto
		return g.ClassicSync(1, req, img)
	}
	r := sync("m1", 7, "consumer", "range")
	if r.ErrorCode != 0 || r.Protocol == nil || *r.Protocol != "range" {
		t.Fatalf("sync: %+v", r)
	}
	var as kmsg.ConsumerMemberAssignment
	if err := as.ReadFrom(r.MemberAssignment); err != nil || as.Version != 3 || len(as.Topics) != 1 || as.Topics[0].Topic != "a" || !slices.Equal(as.Topics[0].Partitions, []int32{0, 1}) {
		t.Fatalf("assignment %+v (%v)", as, err)
	}
	for _, tc := range []struct {
		member      string
		gen         int32
		ptype, name string
		want        *kerr.Error
	}{
		{"m1", 7, "connect", "range", kerr.InconsistentGroupProtocol},
		{"m1", 7, "consumer", "roundrobin", kerr.InconsistentGroupProtocol},
		{"m1", 6, "consumer", "range", kerr.IllegalGeneration},
		{"zz", 7, "consumer", "range", kerr.UnknownMemberID},
	} {
		if r := sync(tc.member, tc.gen, tc.ptype, tc.name); r.ErrorCode != tc.want.Code {
			t.Errorf("%+v: code %d", tc, r.ErrorCode)
		}
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "new", JoinEpoch, 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"a"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	g.Heartbeat(2, hb, Client{ID: "c"}, img)
	if r := sync("m2", 7, "consumer", "range"); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync after the epoch moved: %d", r.ErrorCode)
	}
}

// classicSim is a cooperative classic consumer in a converted group: on
// REBALANCE_IN_PROGRESS it rejoins reporting what it owns, then syncs and
// owns exactly what SyncGroup gives.
type classicSim struct {
	id    string
	gen   int32
	owned map[string][]int32
}

func (c *classicSim) join(t *testing.T, g *Group, now int64, img TopicImage) []Record {
	t.Helper()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version, meta.Topics = 3, []string{"a"}
	for name, ps := range c.owned {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = name, ps
		meta.OwnedPartitions = append(meta.OwnedPartitions, op)
	}
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(5)
	req.Group, req.MemberID, req.ProtocolType = "g", c.id, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 45000, 30000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "cooperative-sticky", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	resp, recs := g.ClassicJoin(now, req, Client{ID: c.id}, img)
	if resp.ErrorCode != 0 {
		t.Fatalf("join %s: %d", c.id, resp.ErrorCode)
	}
	c.id, c.gen = resp.MemberID, resp.Generation
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.SetVersion(5)
	sreq.Group, sreq.MemberID, sreq.Generation = "g", c.id, c.gen
	sresp := g.ClassicSync(now, sreq, img)
	if sresp.ErrorCode != 0 {
		t.Fatalf("sync %s gen %d: %d", c.id, c.gen, sresp.ErrorCode)
	}
	var as kmsg.ConsumerMemberAssignment
	if err := as.ReadFrom(sresp.MemberAssignment); err != nil {
		t.Fatal(err)
	}
	c.owned = map[string][]int32{}
	for _, at := range as.Topics {
		c.owned[at.Topic] = at.Partitions
	}
	return recs
}

// TestClassicJoinMixedGroup: a converted group of two classic members and
// one consumer-protocol member converges, with classic members rejoining
// when told to, to every partition owned exactly once, no partition owned
// by two at any step, everyone at the group epoch; a new classic member
// gets MEMBER_ID_REQUIRED then joins; the records replay to the same
// group.
func TestClassicJoinMixedGroup(t *testing.T) {
	img := TopicImage{"a": {ID: topicID("a"), Name: "a", Partitions: 6}}
	sub := []ClassicProtocol{{Name: "cooperative-sticky", Metadata: classicSubscription("", "a")}}
	g, log, err := FromClassic("g", DefaultConfig(), 7, "cooperative-sticky", []ClassicMember{
		{ID: "m1", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 30000, Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {0, 1, 2}})},
		{ID: "m2", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 30000, Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {3, 4, 5}})},
	}, img)
	if err != nil {
		t.Fatal(err)
	}
	classics := []*classicSim{{id: "m1", gen: 7, owned: map[string][]int32{"a": {0, 1, 2}}}, {id: "m2", gen: 7, owned: map[string][]int32{"a": {3, 4, 5}}}}
	k := &simClient{id: "k", owned: Assignment{}, names: []string{"a"}}
	aid := topicID("a")
	noOverlap := func(step string) int {
		t.Helper()
		seen := map[int32]string{}
		claim := func(who string, ps []int32) {
			for _, p := range ps {
				if o, dup := seen[p]; dup {
					t.Fatalf("%s: a-%d owned by %s and %s", step, p, o, who)
				}
				seen[p] = who
			}
		}
		for _, c := range classics {
			claim(c.id, c.owned["a"])
		}
		claim(k.id, k.owned[aid])
		return len(seen)
	}
	now := int64(10)
	for round := 0; round < 20; round++ {
		now++
		r := g.Heartbeat(now, k.request("g"), Client{ID: "k"}, img)
		log = append(log, r.Records...)
		k.apply(r.Response)
		noOverlap(fmt.Sprintf("round %d k", round))
		for _, c := range classics {
			if e, _ := g.ClassicHeartbeat(now, c.id, "", c.gen); e == kerr.RebalanceInProgress {
				log = append(log, c.join(t, g, now, img)...)
			} else if e != nil {
				t.Fatalf("round %d %s heartbeat: %v", round, c.id, e)
			}
			noOverlap(fmt.Sprintf("round %d %s", round, c.id))
		}
	}
	if n := noOverlap("end"); n != 6 || g.State() != StateStable || k.epoch != g.Epoch {
		t.Fatalf("end: %d partitions owned, state %s, k at %d of %d", n, g.State(), k.epoch, g.Epoch)
	}
	for _, c := range classics {
		if c.gen != g.Epoch || len(c.owned["a"]) != 2 {
			t.Fatalf("%s at generation %d of %d owning %v", c.id, c.gen, g.Epoch, c.owned)
		}
	}

	// A new classic member: v4+ without a member id gets one first.
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(5)
	req.Group, req.ProtocolType, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = "g", "consumer", 45000, 30000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "cooperative-sticky", classicSubscription("", "a")
	req.Protocols = append(req.Protocols, p)
	if resp, recs := g.ClassicJoin(now, req, Client{ID: "m3"}, img); resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" || len(recs) != 0 {
		t.Fatalf("first join of m3: %d %q", resp.ErrorCode, resp.MemberID)
	}
	bad := *req
	bad.ProtocolType = "connect"
	if resp, _ := g.ClassicJoin(now, &bad, Client{ID: "m3"}, img); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("connect join: %d", resp.ErrorCode)
	}
	other := *req
	other.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: classicSubscription("", "a")}}
	if resp, _ := g.ClassicJoin(now, &other, Client{ID: "m3"}, img); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("join with a protocol no classic member has: %d", resp.ErrorCode)
	}
	m3 := &classicSim{id: "m3"}
	epoch := g.Epoch
	log = append(log, m3.join(t, g, now, img)...)
	if g.Epoch != epoch+1 || g.Members["m3"] == nil || g.Members["m3"].Classic == nil {
		t.Fatalf("m3 joined: epoch %d (was %d), member %+v", g.Epoch, epoch, g.Members["m3"])
	}
	re := Replay(DefaultConfig(), log)["g"]
	if re.Epoch != g.Epoch || !reflect.DeepEqual(re.Members, g.Members) || !reflect.DeepEqual(re.Target, g.Target) {
		t.Fatalf("replay differs: epoch %d/%d\n got %+v\nwant %+v", re.Epoch, g.Epoch, re.Members, g.Members)
	}
}

// TestToClassic: a converted group whose consumer-protocol member leaves
// goes back to a classic group at its epoch: the classic members with
// their protocols and timeouts, each one's target as its ConsumerProtocol
// assignment (in its subscription's version), the protocol all support
// and most prefer; the tombstones replay to no group. A member without
// classic metadata staying, or no shared protocol, is refused.
func TestToClassic(t *testing.T) {
	img := TopicImage{"a": {ID: topicID("a"), Name: "a", Partitions: 4}}
	sticky := ClassicProtocol{Name: "cooperative-sticky", Metadata: classicSubscription("", "a")}
	rng := ClassicProtocol{Name: "range", Metadata: classicSubscription("", "a")}
	g, recs, err := FromClassic("g", DefaultConfig(), 7, "range", []ClassicMember{
		{ID: "m1", InstanceID: "i1", ClientID: "c1", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 60000, Protocols: []ClassicProtocol{sticky, rng}, Assignment: classicAssignment(map[string][]int32{"a": {0, 1}})},
		{ID: "m2", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000, Protocols: []ClassicProtocol{rng, sticky}, Assignment: classicAssignment(map[string][]int32{"a": {2, 3}})},
		{ID: "m3", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000, Protocols: []ClassicProtocol{sticky, rng}},
	}, img)
	if err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "k", JoinEpoch, 30000
	hb.SubscribedTopicNames, hb.Topics = []string{"a"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	res := g.Heartbeat(1, hb, Client{ID: "c"}, img)
	if res.Response.ErrorCode != 0 {
		t.Fatalf("848 join: %d", res.Response.ErrorCode)
	}
	recs = append(recs, res.Records...)
	if _, _, err := g.ToClassic(nil, img); err == nil || !strings.Contains(err.Error(), "does not speak") {
		t.Fatalf("with the consumer member staying: %v", err)
	}
	cg, tomb, err := g.ToClassic([]string{"k"}, img)
	if err != nil {
		t.Fatal(err)
	}
	if cg.Generation != 8 || cg.Protocol != "cooperative-sticky" || cg.Leader != "m1" || len(cg.Members) != 3 {
		t.Fatalf("classic group %+v", cg)
	}
	for i, m := range cg.Members {
		var as kmsg.ConsumerMemberAssignment
		if err := as.ReadFrom(m.Assignment); err != nil {
			t.Fatalf("%s: %v", m.ID, err)
		}
		var got []int32
		for _, at := range as.Topics {
			if at.Topic != "a" {
				t.Fatalf("%s: topic %s", m.ID, at.Topic)
			}
			got = append(got, at.Partitions...)
		}
		want := g.Target[m.ID][topicID("a")]
		if !slices.Equal(got, want) || as.Version != 3 {
			t.Fatalf("%s: assignment %v v%d, want target %v v3", m.ID, got, as.Version, want)
		}
		if i == 0 && (m.InstanceID != "i1" || m.ClientID != "c1" || m.SessionTimeoutMs != 45000 || m.RebalanceTimeoutMs != 60000 || len(m.Protocols) != 2) {
			t.Fatalf("m1 converted as %+v", m)
		}
	}
	var types []int16
	for _, r := range tomb {
		types = append(types, r.Type())
	}
	if !slices.Equal(types, []int16{8, 8, 8, 8, 7, 7, 7, 7, 6, 5, 5, 5, 5, 3}) {
		t.Fatalf("tombstone types %v", types)
	}
	var decoded []Record
	for _, r := range append(recs, tomb...) {
		k, v := EncodeRecord(r)
		d, ok, err := DecodeRecord(k, v)
		if err != nil || !ok {
			t.Fatalf("decode %T: %v", r, err)
		}
		decoded = append(decoded, d)
	}
	if left := Replay(DefaultConfig(), decoded); len(left) != 0 {
		t.Fatalf("after the tombstones the log still has %v", slices.Collect(maps.Keys(left)))
	}

	odd := NewGroup("g", DefaultConfig())
	odd.Members = map[string]*Member{
		"c1": {ID: "c1", Classic: &ClassicMetadata{Protocols: []ClassicProtocol{rng}}},
		"c2": {ID: "c2", Classic: &ClassicMetadata{Protocols: []ClassicProtocol{sticky}}},
	}
	if _, _, err := odd.ToClassic(nil, img); err == nil || !strings.Contains(err.Error(), "share no protocol") {
		t.Fatalf("no shared protocol: %v", err)
	}
}

// TestClassicMemberOffsetCommit: a classic member of a consumer group
// commits with an old OffsetCommit version and its generation; a wrong
// one is ILLEGAL_GENERATION (what its client knows), not
// STALE_MEMBER_EPOCH.
func TestClassicMemberOffsetCommit(t *testing.T) {
	img := TopicImage{"a": {ID: topicID("a"), Name: "a", Partitions: 4}}
	sub := []ClassicProtocol{{Name: "range", Metadata: classicSubscription("", "a")}}
	g, _, err := FromClassic("g", DefaultConfig(), 7, "range", []ClassicMember{{ID: "m1", Protocols: sub}}, img)
	if err != nil {
		t.Fatal(err)
	}
	g.Members["k"] = &Member{ID: "k", Epoch: 7}
	for _, tc := range []struct {
		member string
		epoch  int32
		v      int16
		want   *kerr.Error
	}{
		{"m1", 7, 8, nil},
		{"m1", 6, 8, kerr.IllegalGeneration},
		{"k", 7, 8, kerr.UnsupportedVersion},
		{"k", 6, 9, kerr.StaleMemberEpoch},
	} {
		if got := g.ValidateOffsetCommit(tc.member, tc.epoch, false, tc.v); got != tc.want {
			t.Errorf("%s@%d v%d: %v, want %v", tc.member, tc.epoch, tc.v, got, tc.want)
		}
	}
	if got := g.ValidateOffsetFetch(kmsg.StringPtr("m1"), 5); got != kerr.IllegalGeneration {
		t.Errorf("fetch: %v", got)
	}
}

// TestClassicSyncTimeout: a classic member whose JoinGroup was answered is
// fenced when no SyncGroup follows within its rebalance timeout (Kafka's
// sync timeout), though its session is alive; one that synced is not.
func TestClassicSyncTimeout(t *testing.T) {
	img := TopicImage{"a": {ID: topicID("a"), Name: "a", Partitions: 4}}
	sub := []ClassicProtocol{{Name: "cooperative-sticky", Metadata: classicSubscription("", "a")}}
	g, _, err := FromClassic("g", DefaultConfig(), 7, "cooperative-sticky", []ClassicMember{
		{ID: "m1", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 30000, Protocols: sub, Assignment: classicAssignment(map[string][]int32{"a": {0, 1, 2, 3}})},
	}, img)
	if err != nil {
		t.Fatal(err)
	}
	g.Loaded(0)
	synced := &classicSim{id: "m1", gen: 7, owned: map[string][]int32{"a": {0, 1, 2, 3}}}
	synced.join(t, g, 1000, img) // joins and syncs at 1 s
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version, meta.Topics = 3, []string{"a"}
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(5)
	req.Group, req.MemberID, req.ProtocolType = "g", "silent", "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 45000, 20000
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: meta.AppendTo(nil)}}
	if resp, _ := g.ClassicJoin(2000, req, Client{ID: "c"}, img); resp.ErrorCode != 0 {
		t.Fatalf("join: %d", resp.ErrorCode)
	}
	if at, ok := g.NextDeadline(); !ok || at != 22000 {
		t.Fatalf("next deadline %d %v, want the 20 s sync timeout at 22000", at, ok)
	}
	if code, _ := g.ClassicHeartbeat(10000, "silent", "", g.Members["silent"].Epoch); code != nil && code != kerr.RebalanceInProgress {
		t.Fatalf("heartbeat: %v", code)
	}
	g.Expire(21999, img)
	if g.Members["silent"] == nil {
		t.Fatal("fenced before its sync timeout")
	}
	g.Expire(22000, img)
	if g.Members["silent"] != nil {
		t.Fatal("not fenced at its sync timeout")
	}
	if g.Members["m1"] == nil {
		t.Fatal("the member that synced was fenced")
	}
}
