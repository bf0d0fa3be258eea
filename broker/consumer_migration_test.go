package broker

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// classicSim is a classic consumer (JoinGroup/SyncGroup/Heartbeat) of
// topic t driven by raw requests on its own connection: it owns the
// partitions its last SyncGroup gave it and says so in its subscription
// (ConsumerProtocol v1 owned partitions, as cooperative clients do).
type classicSim struct {
	t         testing.TB
	c         *rawConn
	group, id string
	gen       int32
	owned     []int32
	protocols []string // JoinGroup protocol names; nil: range
	ptype     string   // protocol type; "": consumer
	leader    bool     // its last JoinGroup answer named it leader
}

func newClassicSim(t testing.TB, n *Node, group string) *classicSim {
	return &classicSim{t: t, c: dialRaw(t, n), group: group}
}

func (m *classicSim) meta() []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 1
	md.Topics = []string{"t"}
	if len(m.owned) > 0 {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = "t", slices.Clone(m.owned)
		md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{op}
	}
	return md.AppendTo(nil)
}

// joinOnce sends one JoinGroup v5 with the member's id.
func (m *classicSim) joinOnce() *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(5)
	// A long rebalance timeout: a loaded machine may take seconds between
	// a rebalance's start and the test's rejoins.
	req.Group, req.MemberID, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = m.group, m.id, 6000, 30000
	req.ProtocolType = m.ptype
	if req.ProtocolType == "" {
		req.ProtocolType = "consumer"
	}
	names := m.protocols
	if names == nil {
		names = []string{"range"}
	}
	for _, name := range names {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, m.meta()
		req.Protocols = append(req.Protocols, p)
	}
	resp := m.c.roundTrip(req).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode == 0 || resp.ErrorCode == kerr.MemberIDRequired.Code {
		m.id = resp.MemberID
	}
	if resp.ErrorCode == 0 {
		m.gen = resp.Generation
		m.leader = resp.LeaderID == m.id
	}
	return resp
}

// join joins, taking the member id the broker hands out first.
func (m *classicSim) join() *kmsg.JoinGroupResponse {
	r := m.joinOnce()
	if r.ErrorCode == kerr.MemberIDRequired.Code {
		r = m.joinOnce()
	}
	return r
}

// sync sends SyncGroup v5 (assignments: the leader's, by member id) and
// takes the answer's partitions of t as owned.
func (m *classicSim) sync(assignments map[string][]int32) *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.SetVersion(5)
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if m.protocols != nil {
		req.Protocol = kmsg.StringPtr(m.protocols[0])
	}
	for _, id := range slices.Sorted(maps.Keys(assignments)) {
		a := kmsg.NewConsumerMemberAssignment()
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = "t", assignments[id]
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{at}
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID, sa.MemberAssignment = id, a.AppendTo(nil)
		req.GroupAssignment = append(req.GroupAssignment, sa)
	}
	resp := m.c.roundTrip(req).(*kmsg.SyncGroupResponse)
	if resp.ErrorCode == 0 && len(resp.MemberAssignment) == 0 {
		m.owned = nil
	} else if resp.ErrorCode == 0 {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(resp.MemberAssignment); err != nil {
			m.t.Errorf("%s: assignment: %v", m.id, err)
		}
		m.owned = nil
		for _, at := range a.Topics {
			if at.Topic == "t" {
				m.owned = slices.Sorted(slices.Values(at.Partitions))
			}
		}
	}
	return resp
}

func (m *classicSim) heartbeat() int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(4)
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	return m.c.roundTrip(req).(*kmsg.HeartbeatResponse).ErrorCode
}

func (m *classicSim) leave() int16 {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.SetVersion(5)
	req.Group = m.group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m.id
	req.Members = []kmsg.LeaveGroupRequestMember{lm}
	r := m.c.roundTrip(req).(*kmsg.LeaveGroupResponse)
	if r.ErrorCode != 0 {
		return r.ErrorCode
	}
	return r.Members[0].ErrorCode
}

// commit commits offset 1 of t-0 with OffsetCommit v8 at the member's
// generation.
func (m *classicSim) commit() int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 1
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return m.c.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// settle runs one classic round: a heartbeat, and on
// REBALANCE_IN_PROGRESS a rejoin and a sync (the coordinator assigns).
func (m *classicSim) settle() {
	code := m.heartbeat()
	switch code {
	case 0:
		return
	case kerr.RebalanceInProgress.Code:
	default:
		m.t.Fatalf("%s heartbeat: %v", m.id, kerr.ErrorForCode(code))
	}
	if r := m.join(); r.ErrorCode != 0 {
		m.t.Fatalf("%s rejoin: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
	}
	if r := m.sync(nil); r.ErrorCode != 0 && r.ErrorCode != kerr.RebalanceInProgress.Code {
		m.t.Fatalf("%s sync: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
	}
}

// formClassic makes a Stable classic group of size members of t (4
// partitions), the leader spreading the partitions round-robin.
func formClassic(t testing.TB, n *Node, group string, size int) []*classicSim {
	t.Helper()
	ms := make([]*classicSim, size)
	for i := range ms {
		ms[i] = newClassicSim(t, n, group)
		if r := ms[i].joinOnce(); r.ErrorCode != kerr.MemberIDRequired.Code {
			t.Fatalf("first join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	rebalanceClassic(t, ms, 4)
	if st, _ := n.groups.members.GroupState(group); st != "Stable" {
		t.Fatalf("classic group %s: %s", group, st)
	}
	return ms
}

// rebalanceClassic has every member (re)join at once, the leader spread
// the parts partitions of t round-robin over the sorted member ids, and
// every member sync.
func rebalanceClassic(t testing.TB, ms []*classicSim, parts int32) {
	t.Helper()
	resps := make([]*kmsg.JoinGroupResponse, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); resps[i] = m.joinOnce() }()
	}
	wg.Wait()
	assign := map[string][]int32{}
	var ids []string
	for i, r := range resps {
		if r == nil || r.ErrorCode != 0 || r.Generation != resps[0].Generation {
			for j, r := range resps {
				if r != nil {
					t.Logf("join %d (%s): error %d generation %d leader %s members %d", j, ms[j].id, r.ErrorCode, r.Generation, r.LeaderID, len(r.Members))
				}
			}
			t.Fatalf("join %d: %+v", i, r)
		}
		ids = append(ids, r.MemberID)
	}
	slices.Sort(ids)
	for p := range parts {
		id := ids[int(p)%len(ids)]
		assign[id] = append(assign[id], p)
	}
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a map[string][]int32
			if resps[0].LeaderID == m.id {
				a = assign
			}
			if r := m.sync(a); r.ErrorCode != 0 {
				t.Errorf("sync %s: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
			}
		}()
	}
	wg.Wait()
}

// sim848 is a KIP-848 member of t driven by raw heartbeats: it acks
// (owns) what its last assignment gave it.
type sim848 struct {
	t     testing.TB
	c     *rawConn
	group string
	id    string
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func (k *sim848) heartbeat() *kmsg.ConsumerGroupHeartbeatResponse {
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = k.group, k.id, k.epoch, 5000
	if k.epoch == 0 {
		hb.SubscribedTopicNames = []string{"t"}
	}
	hb.Topics = k.owned
	if hb.Topics == nil {
		hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	r := k.c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode == 0 {
		k.epoch = r.MemberEpoch
		if r.Assignment != nil {
			k.owned = nil
			for _, at := range r.Assignment.Topics {
				ht := kmsg.NewConsumerGroupHeartbeatRequestTopic()
				ht.TopicID, ht.Partitions = at.TopicID, at.Partitions
				k.owned = append(k.owned, ht)
			}
		}
	}
	return r
}

func (k *sim848) leave() *kmsg.ConsumerGroupHeartbeatResponse {
	k.epoch = -1
	return k.heartbeat()
}

// describeRaw is one ConsumerGroupDescribe of group.
func describeRaw(t *testing.T, c *rawConn, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	return c.roundTrip(req).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
}

// settleMixed runs rounds of every member until the consumer group is
// Stable with members members and every partition of t assigned exactly
// once (as the members report them owned).
func settleMixed(t *testing.T, c *rawConn, group string, classics []*classicSim, ks []*sim848, members int) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	var d kmsg.ConsumerGroupDescribeResponseGroup
	testutil.Eventually(t, testWait/2, func() error {
		for _, m := range classics {
			m.settle()
		}
		for _, k := range ks {
			if r := k.heartbeat(); r.ErrorCode != 0 {
				t.Fatalf("848 %s heartbeat: %v", k.id, kerr.ErrorForCode(r.ErrorCode))
			}
		}
		d = describeRaw(t, c, group)
		owned := map[int32]int{}
		for _, m := range classics {
			for _, p := range m.owned {
				owned[p]++
			}
		}
		for _, k := range ks {
			for _, ot := range k.owned {
				for _, p := range ot.Partitions {
					owned[p]++
				}
			}
		}
		if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != members || len(owned) != 4 || slices.Max(slices.Collect(maps.Values(owned))) != 1 {
			return fmt.Errorf("error %d state %s members %d owned %v", d.ErrorCode, d.State, len(d.Members), owned)
		}
		return nil
	}, "group %s to settle", group)
	return d
}

// TestConsumerGroupOnlineUpgrade: a KIP-848 member joining a Stable
// classic group of two converts it online: one consumer group at the
// classic generation, the classic group gone; the classic members are
// told to rejoin (REBALANCE_IN_PROGRESS), rejoin and sync through the
// consumer group, commit with OffsetCommit v8 at their new generation
// (an old one: ILLEGAL_GENERATION), and the three settle with every
// partition owned once. Classic requests the consumer group refuses:
// another protocol type, a protocol the classic members lack, a SyncGroup
// naming another protocol (INCONSISTENT_GROUP_PROTOCOL).
func TestConsumerGroupOnlineUpgrade(t *testing.T) {
	n := startNode(t, t.TempDir(), consumerGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 4, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	classics := formClassic(t, n, "g", 2)
	gen := classics[0].gen
	if code := classics[0].commit(); code != 0 {
		t.Fatalf("classic commit before the upgrade: %v", kerr.ErrorForCode(code))
	}

	k := &sim848{t: t, c: dialRaw(t, n), group: "g", id: "k1"}
	if r := k.heartbeat(); r.ErrorCode != 0 || r.MemberEpoch != gen+1 {
		t.Fatalf("848 join of the classic group: %v epoch %d, want epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, gen+1)
	}
	if _, ok := n.groups.members.GroupState("g"); ok {
		t.Fatal("the classic group is still there after the upgrade")
	}
	d := describeRaw(t, c, "g")
	if d.ErrorCode != 0 || d.Epoch != gen+1 || len(d.Members) != 3 {
		t.Fatalf("described: error %d epoch %d members %d", d.ErrorCode, d.Epoch, len(d.Members))
	}
	old := *classics[0]
	if code := classics[0].heartbeat(); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("classic heartbeat after the upgrade: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
	}

	// Refused classic requests, before the members rejoin.
	other := newClassicSim(t, n, "g")
	other.ptype = "connect"
	if r := other.join(); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("JoinGroup of protocol type connect: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	other.ptype, other.protocols = "", []string{"roundrobin"}
	if r := other.join(); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("JoinGroup with a protocol the classic members lack: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	wrong := *classics[1]
	wrong.protocols = []string{"roundrobin"}
	if r := wrong.sync(nil); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("SyncGroup naming another protocol: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	d = settleMixed(t, c, "g", classics, []*sim848{k}, 3)
	for _, m := range classics {
		if m.gen <= gen {
			t.Errorf("classic member %s at generation %d after rejoining, want > %d", m.id, m.gen, gen)
		}
	}
	if code := classics[0].commit(); code != 0 {
		t.Errorf("classic commit v8 in the consumer group: %v", kerr.ErrorForCode(code))
	}
	if code := old.commit(); code != kerr.IllegalGeneration.Code {
		t.Errorf("classic commit at its old generation: %v, want ILLEGAL_GENERATION", kerr.ErrorForCode(code))
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(5)
	for _, g := range c.roundTrip(lg).(*kmsg.ListGroupsResponse).Groups {
		if g.Group == "g" && g.GroupType != "consumer" {
			t.Errorf("ListGroups: g is %s", g.GroupType)
		}
	}
}

// TestConsumerGroupUpgradeRefused: a KIP-848 join of a classic group with
// members is GROUP_ID_NOT_FOUND ("not a consumer group") and leaves the
// classic group as it was when the policy forbids upgrades (disabled,
// downgrade), when its members exceed group.consumer.max.size, when its
// protocol type is not consumer, when it is not Stable, and when a
// member's subscription does not decode.
func TestConsumerGroupUpgradeRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
	}{
		{"disabled", map[string]string{"group.consumer.migration.policy": "disabled"}},
		{"downgrade", map[string]string{"group.consumer.migration.policy": "downgrade"}},
		{"max.size", map[string]string{"group.consumer.max.size": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settings := withSettings(consumerGroupSettings)
			maps.Copy(settings, tc.settings)
			n := startNode(t, t.TempDir(), settings)
			createTopic(t, newAdmin(t, n), "t", 4, nil)
			c := dialRaw(t, n)
			findCoordinator(t, c, "g")
			waitLoaded(t, n, "g")
			classics := formClassic(t, n, "g", 2)
			refused(t, n, c, "g")
			if code := classics[0].heartbeat(); code != 0 {
				t.Errorf("classic heartbeat after the refusal: %v", kerr.ErrorForCode(code))
			}
		})
	}
	n := startNode(t, t.TempDir(), consumerGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 4, nil)
	c := dialRaw(t, n)
	for _, g := range []string{"connect", "joining", "garbled"} {
		findCoordinator(t, c, g)
		waitLoaded(t, n, g)
	}
	t.Run("protocol type", func(t *testing.T) {
		m := newClassicSim(t, n, "connect")
		m.ptype = "connect"
		if r := m.join(); r.ErrorCode != 0 {
			t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		m.sync(map[string][]int32{m.id: nil})
		refused(t, n, c, "connect")
	})
	t.Run("not stable", func(t *testing.T) {
		ms := formClassic(t, n, "joining", 1)
		late := newClassicSim(t, n, "joining")
		late.joinOnce() // MEMBER_ID_REQUIRED: pending
		done := make(chan struct{})
		go func() { defer close(done); late.joinOnce() }()
		testutil.Eventually(t, testWait, func() error {
			if st, _ := n.groups.members.GroupState("joining"); st != "PreparingRebalance" {
				return fmt.Errorf("state %s", st)
			}
			return nil
		}, "rebalance")
		refused(t, n, c, "joining")
		ms[0].settle() // the rebalance completes; the late member is answered
		<-done
	})
	t.Run("subscription", func(t *testing.T) {
		req := kmsg.NewPtrJoinGroupRequest()
		req.SetVersion(3)
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "garbled", 6000, 5000, "consumer"
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1, 0}}}
		jc := dialRaw(t, n)
		r := jc.roundTrip(req).(*kmsg.JoinGroupResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.SetVersion(3)
		sreq.Group, sreq.MemberID, sreq.Generation = "garbled", r.MemberID, r.Generation
		if sr := jc.roundTrip(sreq).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
			t.Fatalf("sync: %v", kerr.ErrorForCode(sr.ErrorCode))
		}
		refused(t, n, c, "garbled")
	})
}

// refused checks a KIP-848 join of the classic group is refused and the
// group is still classic.
func refused(t *testing.T, n *Node, c *rawConn, group string) {
	t.Helper()
	st, _ := n.groups.members.GroupState(group)
	k := &sim848{t: t, c: c, group: group, id: "k1"}
	r := k.heartbeat()
	if r.ErrorCode != kerr.GroupIDNotFound.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Group "+group+" is not a consumer group." {
		t.Fatalf("848 join: %v %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if now, ok := n.groups.members.GroupState(group); !ok || now != st || n.groupIsConsumer(group) {
		t.Fatalf("after the refusal: classic %q %v (was %q), consumer %v", now, ok, st, n.groupIsConsumer(group))
	}
}

// upgraded makes a classic group of two on n, converts it with the KIP-848
// member k1 and lets the three settle.
func upgraded(t *testing.T, n *Node, c *rawConn, group string) ([]*classicSim, *sim848) {
	t.Helper()
	findCoordinator(t, c, group)
	waitLoaded(t, n, group)
	classics := formClassic(t, n, group, 2)
	k := &sim848{t: t, c: dialRaw(t, n), group: group, id: "k1"}
	if r := k.heartbeat(); r.ErrorCode != 0 {
		t.Fatalf("848 join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	settleMixed(t, c, group, classics, []*sim848{k}, 3)
	return classics, k
}

// TestConsumerGroupOnlineDowngrade: when the last KIP-848 member of a
// consumer group with classic members leaves, the group becomes a classic
// group again at the consumer group's epoch, rebalancing: its members'
// heartbeats say REBALANCE_IN_PROGRESS, they rejoin to a new generation
// and sync their leader's assignment. A session timeout of the last
// KIP-848 member does the same. The policy (upgrade only) or
// group.max.size may keep it a consumer group.
func TestConsumerGroupOnlineDowngrade(t *testing.T) {
	t.Run("leave", func(t *testing.T) {
		n := startNode(t, t.TempDir(), consumerGroupSettings)
		createTopic(t, newAdmin(t, n), "t", 4, nil)
		c := dialRaw(t, n)
		classics, k := upgraded(t, n, c, "g")
		epoch := describeRaw(t, c, "g").Epoch
		if r := k.leave(); r.ErrorCode != 0 || r.MemberEpoch != -1 {
			t.Fatalf("leave: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
		}
		downgradedTo(t, n, "g", classics, epoch)
	})
	t.Run("session timeout", func(t *testing.T) {
		n := startNode(t, t.TempDir(), consumerGroupSettings)
		createTopic(t, newAdmin(t, n), "t", 4, nil)
		c := dialRaw(t, n)
		classics, _ := upgraded(t, n, c, "g")
		epoch := describeRaw(t, c, "g").Epoch
		// k1 falls silent; the classic members keep heartbeating (their
		// 6 s sessions outlive k1's 3 s one).
		testutil.Eventually(t, testWait/2, func() error {
			if _, ok := n.groups.members.GroupState("g"); ok {
				return nil
			}
			for _, m := range classics {
				switch code := m.heartbeat(); {
				case code == kerr.RebalanceInProgress.Code && !n.groupIsConsumer("g"):
					// The downgrade ran between the check above and this
					// heartbeat: the classic group is rebalancing.
				case code != 0:
					t.Fatalf("classic heartbeat while k1 times out: %v", kerr.ErrorForCode(code))
				}
			}
			return fmt.Errorf("still a consumer group")
		}, "the downgrade on k1's session timeout")
		downgradedTo(t, n, "g", classics, epoch)
	})
	for _, tc := range []struct {
		name     string
		settings map[string]string
	}{
		{"policy upgrade", map[string]string{"group.consumer.migration.policy": "upgrade"}},
		{"group.max.size", map[string]string{"group.max.size": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settings := withSettings(consumerGroupSettings)
			maps.Copy(settings, tc.settings)
			n := startNode(t, t.TempDir(), settings)
			createTopic(t, newAdmin(t, n), "t", 4, nil)
			c := dialRaw(t, n)
			findCoordinator(t, c, "g")
			waitLoaded(t, n, "g")
			// One classic member (group.max.size 1), the KIP-848 member
			// converts the group, a second classic member joins it.
			classics := formClassic(t, n, "g", 1)
			k := &sim848{t: t, c: dialRaw(t, n), group: "g", id: "k1"}
			if r := k.heartbeat(); r.ErrorCode != 0 {
				t.Fatalf("848 join: %v", kerr.ErrorForCode(r.ErrorCode))
			}
			second := newClassicSim(t, n, "g")
			if r := second.join(); r.ErrorCode != 0 {
				t.Fatalf("classic join of the consumer group: %v", kerr.ErrorForCode(r.ErrorCode))
			}
			classics = append(classics, second)
			settleMixed(t, c, "g", classics, []*sim848{k}, 3)
			if r := k.leave(); r.ErrorCode != 0 {
				t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
			}
			if _, ok := n.groups.members.GroupState("g"); ok || !n.groupIsConsumer("g") {
				t.Fatal("downgraded although not allowed")
			}
			settleMixed(t, c, "g", classics, nil, 2)
		})
	}
}

// downgradedTo checks group is a classic group rebalancing from
// generation epoch, and rebalances its members.
func downgradedTo(t *testing.T, n *Node, group string, classics []*classicSim, epoch int32) {
	t.Helper()
	if n.groupIsConsumer(group) {
		t.Fatal("still a consumer group")
	}
	if st, ok := n.groups.members.GroupState(group); !ok || st != "PreparingRebalance" {
		t.Fatalf("classic group after the downgrade: %q %v, want PreparingRebalance", st, ok)
	}
	for _, m := range classics {
		if code := m.heartbeat(); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("classic heartbeat after the downgrade: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(code))
		}
	}
	rebalanceClassic(t, classics, 4)
	for _, m := range classics {
		if m.gen != epoch+1 || len(m.owned) != 2 {
			t.Fatalf("member %s: generation %d owned %v, want generation %d and 2 partitions", m.id, m.gen, m.owned, epoch+1)
		}
		if code := m.heartbeat(); code != 0 {
			t.Fatalf("classic heartbeat after the rebalance: %v", kerr.ErrorForCode(code))
		}
	}
	if st, _ := n.groups.members.GroupState(group); st != "Stable" {
		t.Fatalf("classic group %s", st)
	}
}

// TestConsumerGroupMigratedResumesAfterRestart: an upgraded group comes
// back after a coordinator restart at its epoch with its members (the
// classic ones answering at their generation, their protocols kept for a
// rejoin) and no rebalance; downgraded, it comes back as the classic
// group at its generation.
func TestConsumerGroupMigratedResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, consumerGroupSettings)
	createTopic(t, newAdmin(t, n), "t", 4, nil)
	c := dialRaw(t, n)
	classics, k := upgraded(t, n, c, "g")
	before := describeRaw(t, c, "g")
	n.Close()

	n = startNode(t, dir, consumerGroupSettings)
	c = dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	after := describeRaw(t, c, "g")
	if after.ErrorCode != 0 || after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || after.State != "Stable" || len(after.Members) != 3 {
		t.Fatalf("after the restart: error %d epoch %d/%d state %s members %d; before epoch %d/%d",
			after.ErrorCode, after.Epoch, after.AssignmentEpoch, after.State, len(after.Members), before.Epoch, before.AssignmentEpoch)
	}
	if st, ok := n.groups.members.GroupState("g"); ok {
		t.Fatalf("the upgraded classic group came back after the restart (%s)", st)
	}
	for _, m := range classics {
		m.c = dialRaw(t, n)
		if code := m.heartbeat(); code != 0 {
			t.Fatalf("classic %s heartbeat at generation %d after the restart: %v", m.id, m.gen, kerr.ErrorForCode(code))
		}
	}
	k.c = dialRaw(t, n)
	if r := k.heartbeat(); r.ErrorCode != 0 || r.MemberEpoch != before.Epoch {
		t.Fatalf("848 heartbeat after the restart: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	if r := classics[0].join(); r.ErrorCode != 0 || r.Generation != before.Epoch {
		t.Fatalf("classic rejoin after the restart: %v generation %d", kerr.ErrorForCode(r.ErrorCode), r.Generation)
	}
	if r := classics[0].sync(nil); r.ErrorCode != 0 || len(classics[0].owned) == 0 {
		t.Fatalf("classic sync after the restart: %v owned %v", kerr.ErrorForCode(r.ErrorCode), classics[0].owned)
	}
	if d := describeRaw(t, c, "g"); d.Epoch != before.Epoch {
		t.Fatalf("the rejoin moved the epoch to %d", d.Epoch)
	}

	// Downgraded, and restarted before the classic rebalance stored a
	// generation: the downgrade's own record brings the group back.
	if r := k.leave(); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if st, _ := n.groups.members.GroupState("g"); st != "PreparingRebalance" || n.groupIsConsumer("g") {
		t.Fatalf("after the leave: classic %q, consumer %v", st, n.groupIsConsumer("g"))
	}
	n.Close()

	n = startNode(t, dir, consumerGroupSettings)
	c = dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	if n.groupIsConsumer("g") {
		t.Fatal("the downgraded group is a consumer group after the restart")
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g"}
	d := c.roundTrip(dg).(*kmsg.DescribeGroupsResponse).Groups[0]
	if d.ErrorCode != 0 || d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "range" || len(d.Members) != 2 {
		t.Fatalf("classic group after the restart: %+v", d)
	}
	for _, m := range classics {
		m.c = dialRaw(t, n)
		if code := m.heartbeat(); code != 0 || m.gen != before.Epoch {
			t.Fatalf("classic %s heartbeat at generation %d after the restart: %v", m.id, m.gen, kerr.ErrorForCode(code))
		}
	}
}
