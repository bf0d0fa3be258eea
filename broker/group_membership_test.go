package broker

// End-to-end consumer-group membership tests: franz-go consumers (and a
// librdkafka one) in groups coordinated by a real node, over loopback.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// groupMember is one kgo consumer-group member whose owned partitions are
// tracked through the assignment callbacks.
type groupMember struct {
	cl      *kgo.Client
	mu      sync.Mutex
	owned   map[int32]bool
	revoked int // partitions revoked or lost, over the member's life
	kill    func()
}

func (m *groupMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.owned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// killableDialer dials loopback connections it can all close at once, and
// refuses new ones afterwards: a client that crashed without a word.
type killableDialer struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (d *killableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("test: client killed")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// joinGroup starts a kgo member of group on topic and polls it in the
// background until the test ends.
func joinGroup(t *testing.T, n *Node, group, topic string, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{owned: map[int32]bool{}}
	drop := func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range lost[topic] {
			delete(m.owned, p)
			m.revoked++
		}
	}
	d := &killableDialer{}
	m.kill = d.kill
	opts = append([]kgo.Opt{
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.Dialer(d.dial),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, added map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range added[topic] {
				m.owned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(drop), kgo.OnPartitionsLost(drop),
	}, opts...)
	m.cl = newClient(t, n, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			m.cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// waitAssigned waits until the members own want[i] partitions each, with
// no partition owned twice and all of them owned, and returns how long it
// took.
func waitAssigned(t *testing.T, partitions int, members []*groupMember, want ...int) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(testWait)
	for {
		seen := map[int32]int{}
		ok := true
		var got []int
		for i, m := range members {
			ps := m.partitions()
			got = append(got, len(ps))
			if len(ps) != want[i] {
				ok = false
			}
			for _, p := range ps {
				seen[p]++
			}
		}
		if ok && len(seen) == partitions {
			for _, c := range seen {
				if c != 1 {
					ok = false
				}
			}
			if ok {
				return time.Since(start)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("assignment sizes %v, want %v (owners per partition %v)", got, want, seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConsumerGroupRangeSplitsTwelvePartitionsAndMovesThemOnLeave(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 12, nil)
	var ms []*groupMember
	for range 3 {
		ms = append(ms, joinGroup(t, n, "g", "t", kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(30*time.Second)))
	}
	waitAssigned(t, 12, ms, 4, 4, 4)
	// Range gives each member a contiguous block.
	for _, m := range ms {
		ps := m.partitions()
		if ps[3]-ps[0] != 3 {
			t.Fatalf("range assignment not contiguous: %v", ps)
		}
	}
	// DescribeGroups (kadm decodes the consumer protocol) agrees.
	described, err := adm.DescribeGroups(testCtx(t), "g")
	if err != nil || described.Error() != nil {
		t.Fatalf("describe: %v %v", err, described.Error())
	}
	dg := described["g"]
	if dg.State != "Stable" || dg.Protocol != "range" || dg.ProtocolType != "consumer" || len(dg.Members) != 3 {
		t.Fatalf("described %+v", dg)
	}
	for _, m := range dg.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 4 {
			t.Fatalf("member %s assigned %+v", m.MemberID, m.Assigned)
		}
	}
	// A member leaves (Close sends LeaveGroup): its partitions move at the
	// next rebalance, long before the 30 s session timeout.
	ms[2].cl.Close()
	if took := waitAssigned(t, 12, ms[:2], 6, 6); took > 10*time.Second {
		t.Fatalf("partitions moved after %v: not by the leave", took)
	}
}

func TestConsumerGroupMemberThatStopsHeartbeatingLosesItsPartitionsAfterTheSessionTimeout(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 12, nil)
	const sessionTimeout = 1500 * time.Millisecond
	a := joinGroup(t, n, "g", "t", kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(sessionTimeout))
	b := joinGroup(t, n, "g", "t", kgo.Balancers(kgo.RangeBalancer()), kgo.SessionTimeout(sessionTimeout))
	waitAssigned(t, 12, []*groupMember{a, b}, 6, 6)
	// b crashes: its connections die and it never sends LeaveGroup.
	b.kill()
	b.mu.Lock()
	b.owned = map[int32]bool{}
	b.mu.Unlock()
	took := waitAssigned(t, 12, []*groupMember{a}, 12)
	if took < sessionTimeout-200*time.Millisecond {
		t.Fatalf("b's partitions moved after %v, before its %v session timeout", took, sessionTimeout)
	}
}

func TestConsumerGroupCooperativeStickyMovesOnlyWhatMustMove(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 12, nil)
	opt := kgo.Balancers(kgo.CooperativeStickyBalancer())
	a := joinGroup(t, n, "g", "t", opt)
	b := joinGroup(t, n, "g", "t", opt)
	waitAssigned(t, 12, []*groupMember{a, b}, 6, 6)
	beforeA, beforeB := a.partitions(), b.partitions()
	a.mu.Lock()
	a.revoked = 0
	a.mu.Unlock()
	b.mu.Lock()
	b.revoked = 0
	b.mu.Unlock()
	c := joinGroup(t, n, "g", "t", opt)
	waitAssigned(t, 12, []*groupMember{a, b, c}, 4, 4, 4)
	subset := func(small, big []int32) bool {
		in := map[int32]bool{}
		for _, p := range big {
			in[p] = true
		}
		for _, p := range small {
			if !in[p] {
				return false
			}
		}
		return true
	}
	if !subset(a.partitions(), beforeA) || !subset(b.partitions(), beforeB) {
		t.Fatalf("a %v→%v, b %v→%v: a member gained partitions it did not own", beforeA, a.partitions(), beforeB, b.partitions())
	}
	a.mu.Lock()
	b.mu.Lock()
	revoked := a.revoked + b.revoked
	b.mu.Unlock()
	a.mu.Unlock()
	if revoked != 4 {
		t.Fatalf("%d partitions revoked, want exactly the 4 that moved to the new member", revoked)
	}
}

func TestConsumerGroupStaticMemberRestartsWithoutRebalance(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 12, nil)
	opts := func(id string) []kgo.Opt {
		return []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.InstanceID(id), kgo.SessionTimeout(10 * time.Second)}
	}
	a := joinGroup(t, n, "g", "t", opts("a")...)
	b := joinGroup(t, n, "g", "t", opts("b")...)
	waitAssigned(t, 12, []*groupMember{a, b}, 6, 6)
	oldID, gen := a.cl.GroupMetadata()
	_, genB := b.cl.GroupMetadata()
	owned := a.partitions()
	// Revocations before this point belong to forming the group (a member
	// that joined alone first gives its partitions back when the second
	// arrives); only the restart must revoke nothing.
	b.mu.Lock()
	revokedBefore := b.revoked
	b.mu.Unlock()
	// a restarts within its session: Close does not leave (static), and
	// the new incarnation gets the same partitions in the same generation.
	a.cl.Close()
	a2 := joinGroup(t, n, "g", "t", opts("a")...)
	waitAssigned(t, 12, []*groupMember{a2, b}, 6, 6)
	newID, gen2 := a2.cl.GroupMetadata()
	if newID == oldID || gen2 != gen {
		t.Fatalf("restarted static member: id %s→%s, generation %d→%d (want a new id, same generation)", oldID, newID, gen, gen2)
	}
	if got := a2.partitions(); len(got) != len(owned) || got[0] != owned[0] || got[5] != owned[5] {
		t.Fatalf("restarted static member owns %v, had %v", got, owned)
	}
	if _, g := b.cl.GroupMetadata(); g != genB {
		t.Fatalf("the other member saw generation %d→%d", genB, g)
	}
	b.mu.Lock()
	revoked := b.revoked - revokedBefore
	b.mu.Unlock()
	if revoked != 0 {
		t.Fatalf("the other member had %d partitions revoked across the restart: there was a rebalance", revoked)
	}
}

func TestConsumerGroupListDescribeDeleteThroughKadm(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 2, nil)
	m := joinGroup(t, n, "live", "t", kgo.Balancers(kgo.RangeBalancer()))
	waitAssigned(t, 2, []*groupMember{m}, 2)
	listed, err := adm.ListGroups(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := listed["live"]; !ok || g.State != "Stable" || g.ProtocolType != "consumer" {
		t.Fatalf("listed %+v", listed)
	}
	del, err := adm.DeleteGroups(testCtx(t), "live")
	if err != nil || del["live"].Err == nil {
		t.Fatalf("deleting a live group: %v %+v, want NON_EMPTY_GROUP", err, del)
	}
	m.cl.Close()
	if err := testutil.Within(testWait, func() error {
		described, err := adm.DescribeGroups(testCtx(t), "live")
		if err == nil && described["live"].State == "Empty" {
			return nil
		}
		return fmt.Errorf("group not Empty after its only member left: %+v %v", described, err)
	}); err != nil {
		t.Fatal(err)
	}
	del, err = adm.DeleteGroups(testCtx(t), "live")
	if err != nil || del["live"].Err != nil {
		t.Fatalf("delete: %v %+v", err, del)
	}
	listed, err = adm.ListGroups(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["live"]; ok {
		t.Fatalf("deleted group still listed: %+v", listed)
	}
}

// TestLibrdkafkaMemberSharesAGroupWithFranzGo runs librdkafka's own group
// protocol code and range assignor against kgo's in one group: whichever
// is elected leader assigns for both.
func TestLibrdkafkaMemberSharesAGroupWithFranzGo(t *testing.T) {
	py := needClient(t, systemPython, "-c", "import confluent_kafka")
	script, err := filepath.Abs(filepath.Join("testdata", "compat", "group_member.py"))
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, t.TempDir(), groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 12, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, script, n.Addr(), "shared", "t", "range")
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The librdkafka member's reported assignment, as a groupMember.
	py0 := &groupMember{owned: map[int32]bool{}}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l struct {
				Assigned []int32 `json:"assigned"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			py0.mu.Lock()
			py0.owned = map[int32]bool{}
			for _, p := range l.Assigned {
				py0.owned[p] = true
			}
			py0.mu.Unlock()
		}
	}()
	defer func() {
		stdin.Close()
		<-lines
		if err := cmd.Wait(); err != nil {
			t.Errorf("group_member.py: %v\nstderr:\n%s", err, stderr.String())
		}
	}()
	// librdkafka joins first, alone: all 12 partitions.
	waitAssigned(t, 12, []*groupMember{py0}, 12)
	k := joinGroup(t, n, "shared", "t", kgo.Balancers(kgo.RangeBalancer()))
	waitAssigned(t, 12, []*groupMember{py0, k}, 6, 6)
	// kgo leaves: librdkafka takes everything back.
	k.cl.Close()
	waitAssigned(t, 12, []*groupMember{py0}, 12)
}

// TestGroupMembershipAPIsEveryVersion drives one single-member group per
// JoinGroup version through the raw protocol: join (two-step from v4),
// sync, heartbeat, describe, leave, list, delete, each at the matching
// version of its own API, decoding every answer at the version asked.
func TestGroupMembershipAPIsEveryVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	c := dialRaw(t, n)
	for v := int16(0); v <= kmsg.NewPtrJoinGroupRequest().MaxVersion(); v++ {
		groupID := "every-" + strconv.Itoa(int(v))
		if r := findCoordinator(t, c, groupID); r.ErrorCode != 0 {
			t.Fatalf("find coordinator: %d", r.ErrorCode)
		}
		waitLoaded(t, n, groupID)
		join := kmsg.NewPtrJoinGroupRequest()
		join.SetVersion(v)
		join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = groupID, 10000, 10000, "consumer"
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("sub")}}
		jr := c.roundTrip(join).(*kmsg.JoinGroupResponse)
		if v >= 4 {
			if jr.ErrorCode != kerr.MemberIDRequired.Code || jr.MemberID == "" {
				t.Fatalf("v%d: first join %+v", v, jr)
			}
			join.MemberID = jr.MemberID
			jr = c.roundTrip(join).(*kmsg.JoinGroupResponse)
		}
		if jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != jr.MemberID || jr.Protocol == nil || *jr.Protocol != "range" ||
			len(jr.Members) != 1 || string(jr.Members[0].ProtocolMetadata) != "sub" || (v >= 7 && (jr.ProtocolType == nil || *jr.ProtocolType != "consumer")) {
			t.Fatalf("v%d: join %+v", v, jr)
		}
		member := jr.MemberID

		sync := kmsg.NewPtrSyncGroupRequest()
		sync.SetVersion(min(v, sync.MaxVersion()))
		sync.Group, sync.MemberID, sync.Generation = groupID, member, 1
		sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("mine")}}
		if sr := c.roundTrip(sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 || string(sr.MemberAssignment) != "mine" {
			t.Fatalf("v%d: sync %+v", v, sr)
		}

		hb := kmsg.NewPtrHeartbeatRequest()
		hb.SetVersion(min(v, hb.MaxVersion()))
		hb.Group, hb.MemberID, hb.Generation = groupID, member, 1
		if hr := c.roundTrip(hb).(*kmsg.HeartbeatResponse); hr.ErrorCode != 0 {
			t.Fatalf("v%d: heartbeat %d", v, hr.ErrorCode)
		}

		desc := kmsg.NewPtrDescribeGroupsRequest()
		desc.SetVersion(min(v, desc.MaxVersion()))
		desc.Groups = []string{groupID}
		dr := c.roundTrip(desc).(*kmsg.DescribeGroupsResponse)
		if len(dr.Groups) != 1 || dr.Groups[0].State != "Stable" || len(dr.Groups[0].Members) != 1 ||
			string(dr.Groups[0].Members[0].MemberAssignment) != "mine" || dr.Groups[0].Members[0].ClientHost != "/127.0.0.1" {
			t.Fatalf("v%d: describe %+v", v, dr.Groups)
		}

		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.SetVersion(min(v, leave.MaxVersion()))
		leave.Group = groupID
		if leave.Version < 3 {
			leave.MemberID = member
		} else {
			leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
		}
		lr := c.roundTrip(leave).(*kmsg.LeaveGroupResponse)
		if lr.ErrorCode != 0 || (leave.Version >= 3 && (len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0)) {
			t.Fatalf("v%d: leave %+v", v, lr)
		}

		list := kmsg.NewPtrListGroupsRequest()
		list.SetVersion(min(v, list.MaxVersion()))
		found := false
		for _, g := range c.roundTrip(list).(*kmsg.ListGroupsResponse).Groups {
			if g.Group == groupID {
				found = g.ProtocolType == "consumer" && (list.Version < 4 || g.GroupState == "Empty")
			}
		}
		if !found {
			t.Fatalf("v%d: %s not listed as an Empty consumer group", v, groupID)
		}

		del := kmsg.NewPtrDeleteGroupsRequest()
		del.SetVersion(min(v, del.MaxVersion()))
		del.Groups = []string{groupID}
		if dr := c.roundTrip(del).(*kmsg.DeleteGroupsResponse); len(dr.Groups) != 1 || dr.Groups[0].ErrorCode != 0 {
			t.Fatalf("v%d: delete %+v", v, dr.Groups)
		}
	}
}

// TestConsumerGroupStaticMembersSurviveBrokerRestart: the group metadata
// stored at the end of the rebalance (members, assignments, generation)
// is loaded back after a broker restart, so static members that come back
// within their session get their partitions again without a rebalance.
func TestConsumerGroupStaticMembersSurviveBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Options{Config: testConfig(t, dir, groupTestSettings), Logger: testLogger(), StartTimeout: testWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() }) // closed below; again here if the test fails first
	createTopic(t, newAdmin(t, n), "t", 12, nil)
	opts := func(id string) []kgo.Opt {
		return []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.InstanceID(id), kgo.SessionTimeout(15 * time.Second)}
	}
	a := joinGroup(t, n, "g", "t", opts("a")...)
	b := joinGroup(t, n, "g", "t", opts("b")...)
	waitAssigned(t, 12, []*groupMember{a, b}, 6, 6)
	_, gen := a.cl.GroupMetadata()
	ownedA, ownedB := a.partitions(), b.partitions()
	a.cl.Close()
	b.cl.Close()
	n.Close()

	n2 := startNode(t, dir, groupTestSettings)
	// Before anyone rejoins, the loaded group is Stable with both static
	// members and their assignments.
	adm := newAdmin(t, n2)
	if err := testutil.Within(testWait, func() error {
		d, err := adm.DescribeGroups(testCtx(t), "g")
		if err == nil && d.Error() == nil {
			dg := d["g"]
			if dg.State != "Stable" || len(dg.Members) != 2 {
				t.Fatalf("loaded group %+v", dg)
			}
			for _, m := range dg.Members {
				a, ok := m.Assigned.AsConsumer()
				if m.InstanceID == nil || !ok || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 6 {
					t.Fatalf("loaded member %+v", m)
				}
			}
			return nil
		}
		return fmt.Errorf("describe after restart: %v %v", err, d.Error())
	}); err != nil {
		t.Fatal(err)
	}
	a2 := joinGroup(t, n2, "g", "t", opts("a")...)
	b2 := joinGroup(t, n2, "g", "t", opts("b")...)
	waitAssigned(t, 12, []*groupMember{a2, b2}, 6, 6)
	if _, g := a2.cl.GroupMetadata(); g != gen {
		t.Fatalf("generation %d after the restart, was %d: the members rebalanced", g, gen)
	}
	if _, g := b2.cl.GroupMetadata(); g != gen {
		t.Fatalf("b: generation %d after the restart, was %d", g, gen)
	}
	if got := a2.partitions(); got[0] != ownedA[0] || got[5] != ownedA[5] {
		t.Fatalf("a owns %v after the restart, had %v", got, ownedA)
	}
	if got := b2.partitions(); got[0] != ownedB[0] || got[5] != ownedB[5] {
		t.Fatalf("b owns %v after the restart, had %v", got, ownedB)
	}
}
