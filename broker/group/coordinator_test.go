package group

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	session   = 10 * time.Second
	rebalance = 30 * time.Second
	delay     = 3 * time.Second
)

func TestPartitionForMatchesJavaHashCode(t *testing.T) {
	// "hello".hashCode() = 99162322; "Aa" and "BB" collide at 2112;
	// "polygenelubricants".hashCode() = Integer.MIN_VALUE, which Kafka's
	// Utils.abs maps to 0 (Math.abs would stay negative).
	cases := []struct {
		group string
		n     int32
		want  int32
	}{
		{"hello", 50, 99162322 % 50},
		{"Aa", 50, 2112 % 50},
		{"BB", 50, 2112 % 50},
		{"polygenelubricants", 50, 0},
		{"", 50, 0},
		{"x", 1, 0},
	}
	for _, c := range cases {
		if got := PartitionFor(c.group, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.group, c.n, got, c.want)
		}
	}
	// A character outside the BMP hashes as its UTF-16 surrogate pair:
	// "😀" is \uD83D\uDE00 → 0xD83D*31 + 0xDE00 = 1772899 + 56832.
	if got, want := PartitionFor("😀", 1<<20), int32((0xD83D*31+0xDE00)%(1<<20)); got != want {
		t.Errorf("surrogate pair: %d, want %d", got, want)
	}
}

func TestJoinTwoStepHandsOutMemberID(t *testing.T) {
	h := newHarness(t, 0)
	first := recv(t, h.joinAsync(newJoin("g", "", nil, session, rebalance, "range", "m")))
	if first.ErrorCode != kerr.MemberIDRequired.Code || !strings.HasPrefix(first.MemberID, "client-") || first.Generation != -1 {
		t.Fatalf("first join: %+v", first)
	}
	// v3 (before KIP-394) joins at once.
	old := newJoin("g3", "", nil, session, rebalance, "range", "m")
	old.Version = 3
	if r := recv(t, h.joinAsync(old)); r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != r.MemberID {
		t.Fatalf("v3 join: %+v", r)
	}
	// The handed-out id is good for one session timeout.
	h.clock.Advance(session + time.Millisecond)
	late := recv(t, h.joinAsync(newJoin("g", first.MemberID, nil, session, rebalance, "range", "m")))
	if late.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("join with an expired pending id: error %d, want UNKNOWN_MEMBER_ID", late.ErrorCode)
	}
	id, ch := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
	r := recv(t, ch)
	if r.ErrorCode != 0 || r.MemberID != id || r.LeaderID != id || r.Generation != 1 || *r.Protocol != "range" || len(r.Members) != 1 {
		t.Fatalf("second join: %+v", r)
	}
}

func TestJoinPendingMemberHoldsTheRebalance(t *testing.T) {
	// A member id handed out but not yet used counts as a member the
	// join phase waits for (Kafka's hasAllMembersJoined).
	h := newHarness(t, delay)
	ids := h.stableGroup("g", 1, session, rebalance)
	first := recv(t, h.joinAsync(newJoin("g", "", nil, session, rebalance, "range", "m")))
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %d", first.ErrorCode)
	}
	leader := h.joinAsync(newJoin("g", ids[0], nil, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	pending(t, leader, "leader's join while a pending member is outstanding")
	newcomer := h.joinAsync(newJoin("g", first.MemberID, nil, session, rebalance, "range", "m"))
	a, b := recv(t, leader), recv(t, newcomer)
	if a.ErrorCode != 0 || b.ErrorCode != 0 || a.Generation != 2 || b.Generation != 2 || len(a.Members) != 2 || len(b.Members) != 0 {
		t.Fatalf("leader %+v, newcomer %+v", a, b)
	}
}

func TestJoinInitialDelayExtendsWhileMembersArrive(t *testing.T) {
	h := newHarness(t, delay)
	_, a := h.twoStepJoin(newJoin("g", "", nil, session, 10*time.Second, "range", "A"))
	h.awaiting("g", 1)
	h.clock.Advance(2 * time.Second)
	_, b := h.twoStepJoin(newJoin("g", "", nil, session, 10*time.Second, "range", "B"))
	h.awaiting("g", 2)
	h.clock.Advance(time.Second) // t=3s: B arrived in the first step → another step
	pending(t, a, "join at the end of the first delay step")
	h.clock.Advance(3 * time.Second) // t=6s: nobody new in the second step
	ra, rb := recv(t, a), recv(t, b)
	if ra.Generation != 1 || rb.Generation != 1 || ra.LeaderID != ra.MemberID || rb.LeaderID != ra.MemberID {
		t.Fatalf("a %+v, b %+v", ra, rb)
	}
	if len(ra.Members) != 2 || len(rb.Members) != 0 || string(ra.Members[0].ProtocolMetadata) != "A" || string(ra.Members[1].ProtocolMetadata) != "B" {
		t.Fatalf("leader's members %+v, follower's %+v", ra.Members, rb.Members)
	}
}

func TestJoinInitialDelayBoundedByRebalanceTimeout(t *testing.T) {
	h := newHarness(t, delay)
	var chs []<-chan *kmsg.JoinGroupResponse
	_, ch := h.twoStepJoin(newJoin("g", "", nil, session, 7*time.Second, "range", "m"))
	chs = append(chs, ch)
	// A new member every 2s keeps extending the delay, but the steps add
	// up to at most the rebalance timeout (7s: 3 + 3 + 1).
	for i := 2; i <= 5; i++ {
		h.awaiting("g", i-1)
		h.clock.Advance(2 * time.Second)
		if i == 5 {
			break
		}
		_, ch := h.twoStepJoin(newJoin("g", "", nil, session, 7*time.Second, "range", "m"))
		chs = append(chs, ch)
	}
	// t=8s now; the join completed at t=7s at the latest.
	for _, ch := range chs {
		if r := recv(t, ch); r.ErrorCode != 0 || r.Generation != 1 {
			t.Fatalf("join: %+v", r)
		}
	}
	h.c.mu.Lock()
	at := h.c.groups["g"].stateTime
	h.c.mu.Unlock()
	if start := newFakeClock().now; at.Sub(start) > 7*time.Second {
		t.Fatalf("join completed %v after the first join, want at most the 7s rebalance timeout", at.Sub(start))
	}
}

func TestRebalanceRemovesMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t, delay)
	ids := h.stableGroup("g", 3, session, rebalance)
	// ids[2] joins again with new metadata: a rebalance; ids[0] rejoins,
	// ids[1] does not (it is heartbeating only... or not at all).
	c := h.joinAsync(newJoin("g", ids[2], nil, session, rebalance, "range", "changed"))
	h.awaiting("g", 1)
	if h.state("g") != "PreparingRebalance" {
		t.Fatalf("state %s", h.state("g"))
	}
	if code := h.heartbeat("g", ids[0], 1); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %d", code)
	}
	a := h.joinAsync(newJoin("g", ids[0], nil, session, rebalance, "range", "m"))
	h.awaiting("g", 2)
	for i := 0; i < 6; i++ { // ids[0] and ids[2] wait in JoinGroup: alive; ids[1] heartbeats
		h.clock.Advance(rebalance / 6)
		if i < 5 {
			h.heartbeat("g", ids[1], 1)
		}
	}
	ra, rc := recv(t, a), recv(t, c)
	if ra.Generation != 2 || rc.Generation != 2 || ra.LeaderID != ids[0] || len(ra.Members) != 2 {
		t.Fatalf("a %+v c %+v", ra, rc)
	}
	if code := h.heartbeat("g", ids[1], 1); code != kerr.UnknownMemberID.Code {
		t.Fatalf("laggard's heartbeat: %d, want UNKNOWN_MEMBER_ID", code)
	}
}

func TestLeaderThatDoesNotRejoinIsReplaced(t *testing.T) {
	h := newHarness(t, delay)
	ids := h.stableGroup("g", 2, session, rebalance)
	b := h.joinAsync(newJoin("g", ids[1], nil, session, rebalance, "range", "changed"))
	h.awaiting("g", 1)
	h.clock.Advance(rebalance)
	r := recv(t, b)
	if r.ErrorCode != 0 || r.LeaderID != ids[1] || len(r.Members) != 1 || r.Generation != 2 {
		t.Fatalf("join: %+v", r)
	}
}

func TestSessionExpiryRemovesMemberAndRebalances(t *testing.T) {
	h := newHarness(t, delay)
	ids := h.stableGroup("g", 2, session, rebalance)
	for i := 0; i < 4; i++ {
		h.clock.Advance(session / 3)
		if code := h.heartbeat("g", ids[0], 1); i < 2 && code != 0 {
			t.Fatalf("heartbeat %d: %d", i, code)
		}
	}
	// ids[1] never heartbeat: gone after its session; ids[0] must rejoin.
	if h.state("g") != "PreparingRebalance" {
		t.Fatalf("state %s, want PreparingRebalance", h.state("g"))
	}
	if code := h.heartbeat("g", ids[0], 1); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat: %d, want REBALANCE_IN_PROGRESS", code)
	}
	r := recv(t, h.joinAsync(newJoin("g", ids[0], nil, session, rebalance, "range", "m")))
	if r.ErrorCode != 0 || r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
}

func TestSyncStoresTheAssignmentBeforeAnswering(t *testing.T) {
	h := newHarness(t, delay)
	_, a := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	_, b := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
	h.awaiting("g", 2)
	h.clock.Advance(2 * delay)
	ra, rb := recv(t, a), recv(t, b)
	leader, follower := ra.MemberID, rb.MemberID
	h.p.block = make(chan struct{})
	fs := h.syncAsync("g", follower, 1, nil)
	pending(t, fs, "follower's sync before the leader's")
	ls := h.syncAsync("g", leader, 1, map[string]string{leader: "L", follower: "F"})
	pending(t, ls, "leader's sync while the store is blocked")
	pending(t, fs, "follower's sync while the store is blocked")
	if h.state("g") != "CompletingRebalance" {
		t.Fatalf("state %s", h.state("g"))
	}
	h.p.block <- struct{}{}
	rl, rf := recv(t, ls), recv(t, fs)
	if string(rl.MemberAssignment) != "L" || string(rf.MemberAssignment) != "F" || *rl.Protocol != "range" || *rf.ProtocolType != "consumer" {
		t.Fatalf("leader %+v follower %+v", rl, rf)
	}
	s := h.p.last()
	if s.Generation != 1 || s.Leader != leader || s.Protocol != "range" || len(s.Members) != 2 ||
		string(s.Members[0].Assignment) != "L" || string(s.Members[1].Assignment) != "F" || string(s.Members[0].Subscription) != "m" {
		t.Fatalf("stored %+v", s)
	}
	if h.state("g") != "Stable" {
		t.Fatalf("state %s", h.state("g"))
	}
}

func TestSyncStoreFailureAnswersErrorAndRebalances(t *testing.T) {
	h := newHarness(t, delay)
	id, ch := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	h.clock.Advance(2 * delay)
	recv(t, ch)
	h.p.err = kerr.NotLeaderForPartition
	r := recv(t, h.syncAsync("g", id, 1, map[string]string{id: "x"}))
	if r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("sync: %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	if h.state("g") != "PreparingRebalance" {
		t.Fatalf("state %s", h.state("g"))
	}
	h.p.err = errDiskGone
	if code := storeErrorCode(errDiskGone); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("plain error maps to %d", code)
	}
}

func TestSyncErrors(t *testing.T) {
	h := newHarness(t, delay)
	ids := h.stableGroup("g", 2, session, rebalance)
	cases := []struct {
		member string
		gen    int32
		want   int16
	}{
		{ids[1], 1, 0},
		{ids[1], 7, kerr.IllegalGeneration.Code},
		{"nobody", 1, kerr.UnknownMemberID.Code},
	}
	for _, c := range cases {
		if r := recv(t, h.syncAsync("g", c.member, c.gen, nil)); r.ErrorCode != c.want {
			t.Errorf("sync %s gen %d: %d, want %d", c.member, c.gen, r.ErrorCode, c.want)
		}
	}
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation, r.Protocol = "g", ids[1], 1, kmsg.StringPtr("roundrobin")
	if resp := h.c.SyncGroup(context.Background(), r); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("sync with another protocol name: %d", resp.ErrorCode)
	}
	// A rebalance answers a parked follower sync with REBALANCE_IN_PROGRESS.
	a := h.joinAsync(newJoin("g", ids[0], nil, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	if s := recv(t, h.syncAsync("g", ids[1], 1, nil)); s.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Errorf("sync during PreparingRebalance: %d", s.ErrorCode)
	}
	b := h.joinAsync(newJoin("g", ids[1], nil, session, rebalance, "range", "m"))
	recv(t, a)
	recv(t, b)
	fs := h.syncAsync("g", ids[1], 2, nil)
	h.waitFor("parked sync", func() bool { return h.c.groups["g"].members[ids[1]].syncCh != nil })
	h.joinAsync(newJoin("g", ids[0], nil, session, rebalance, "range", "m2"))
	if s := recv(t, fs); s.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Errorf("parked sync when a rebalance starts: %d", s.ErrorCode)
	}
}

func TestSyncTimeoutRemovesMembersThatDoNotSync(t *testing.T) {
	h := newHarness(t, delay)
	ids := make([]string, 2)
	var chs []<-chan *kmsg.JoinGroupResponse
	for i := range ids {
		id, ch := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
		ids[i] = id
		chs = append(chs, ch)
		h.awaiting("g", i+1)
	}
	h.clock.Advance(2 * delay)
	for _, ch := range chs {
		recv(t, ch)
	}
	ls := h.syncAsync("g", ids[0], 1, nil)
	h.waitFor("leader sync parked?", func() bool { return h.c.groups["g"].state == Stable })
	recv(t, ls)
	// ids[1] never syncs (it keeps heartbeating): removed after the
	// rebalance timeout, and the group rebalances.
	for i := 0; i < 4; i++ {
		h.heartbeat("g", ids[1], 1)
		h.heartbeat("g", ids[0], 1)
		h.clock.Advance(rebalance / 4)
	}
	if code := h.heartbeat("g", ids[1], 1); code != kerr.UnknownMemberID.Code {
		t.Fatalf("member that never synced: heartbeat %d", code)
	}
	if h.state("g") != "PreparingRebalance" {
		t.Fatalf("state %s", h.state("g"))
	}
}

func TestStaticMemberRestartKeepsAssignmentWithoutRebalance(t *testing.T) {
	h := newHarness(t, delay)
	inst := kmsg.StringPtr("instance-a")
	a := h.joinAsync(newJoin("g", "", inst, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	_, b := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
	h.awaiting("g", 2)
	h.clock.Advance(2 * delay)
	ra, rb := recv(t, a), recv(t, b)
	oldID := ra.MemberID
	fs := h.syncAsync("g", rb.MemberID, 1, nil)
	h.waitFor("parked sync", func() bool { return h.c.groups["g"].members[rb.MemberID].syncCh != nil })
	recv(t, h.syncAsync("g", oldID, 1, map[string]string{oldID: "mine", rb.MemberID: "yours"}))
	recv(t, fs)
	stores := h.p.storeCount()
	rebalances := counterValue(h.c.metrics.rebalances)

	// The static member restarts: no member id, same instance id and
	// metadata.
	r := recv(t, h.joinAsync(newJoin("g", "", inst, session, rebalance, "range", "m")))
	if r.ErrorCode != 0 || r.Generation != 1 || r.MemberID == oldID || r.LeaderID != oldID || len(r.Members) != 0 {
		t.Fatalf("static rejoin: %+v", r)
	}
	if h.state("g") != "Stable" || counterValue(h.c.metrics.rebalances) != rebalances {
		t.Fatalf("state %s after a static rejoin; rebalances %v → %v", h.state("g"), rebalances, counterValue(h.c.metrics.rebalances))
	}
	if h.p.storeCount() != stores+1 || h.p.last().Members[0].MemberID != r.MemberID {
		t.Fatalf("the new member id was not stored: %+v", h.p.last())
	}
	s := recv(t, h.syncAsync("g", r.MemberID, 1, nil))
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "mine" {
		t.Fatalf("sync after static rejoin: %+v", s)
	}
	// The old incarnation is fenced.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version = 4
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "g", oldID, 1, inst
	if resp := h.c.Heartbeat(context.Background(), hb); resp.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old member's heartbeat: %d, want FENCED_INSTANCE_ID", resp.ErrorCode)
	}
	if err := h.c.ValidateCommit("g", 1, oldID, inst); ErrorCode(err) != kerr.FencedInstanceID.Code {
		t.Fatalf("old member's commit: %v", err)
	}
	if resp := recv(t, h.joinAsync(newJoin("g", oldID, inst, session, rebalance, "range", "m"))); resp.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old member's join: %d", resp.ErrorCode)
	}
}

func TestStaticMemberStoreFailureRevertsTheRestart(t *testing.T) {
	h := newHarness(t, 0)
	inst := kmsg.StringPtr("i")
	r := recv(t, h.joinAsync(newJoin("g", "", inst, session, rebalance, "range", "m")))
	recv(t, h.syncAsync("g", r.MemberID, 1, map[string]string{r.MemberID: "x"}))
	h.p.err = kerr.NotLeaderForPartition
	again := recv(t, h.joinAsync(newJoin("g", "", inst, session, rebalance, "range", "m")))
	if again.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("rejoin with a failing store: %d", again.ErrorCode)
	}
	if code := h.heartbeat("g", r.MemberID, 1); code != 0 {
		t.Fatalf("old member id after a reverted restart: heartbeat %d", code)
	}
}

func TestStaticMemberWithOtherProtocolsRebalances(t *testing.T) {
	h := newHarness(t, 0)
	inst := kmsg.StringPtr("i")
	r := recv(t, h.joinAsync(newJoin("g", "", inst, session, rebalance, "range", "m")))
	recv(t, h.syncAsync("g", r.MemberID, 1, map[string]string{r.MemberID: "x"}))
	again := recv(t, h.joinAsync(newJoin("g", "", inst, session, rebalance, "roundrobin", "m", "range", "m")))
	if again.ErrorCode != 0 || again.Generation != 2 || *again.Protocol != "roundrobin" || again.LeaderID != again.MemberID {
		t.Fatalf("rejoin with another protocol: %+v", again)
	}
}

func TestStaticMemberIsNotRemovedForMissingARebalance(t *testing.T) {
	h := newHarness(t, delay)
	inst := kmsg.StringPtr("s")
	s := h.joinAsync(newJoin("g", "", inst, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	_, d := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
	h.awaiting("g", 2)
	h.clock.Advance(2 * delay)
	rs, rd := recv(t, s), recv(t, d)
	f := h.syncAsync("g", rd.MemberID, 1, nil)
	h.waitFor("parked sync", func() bool { return h.c.groups["g"].members[rd.MemberID].syncCh != nil })
	recv(t, h.syncAsync("g", rs.MemberID, 1, map[string]string{rs.MemberID: "S", rd.MemberID: "D"}))
	recv(t, f)
	// The dynamic member changes metadata; the static one does not rejoin
	// within the rebalance timeout but keeps heartbeating (Kafka keeps it).
	j := h.joinAsync(newJoin("g", rd.MemberID, nil, 4*session, rebalance, "range", "changed"))
	h.awaiting("g", 1)
	for i := 0; i < 6; i++ {
		if code := h.heartbeat("g", rs.MemberID, 1); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("static member's heartbeat: %d", code)
		}
		h.clock.Advance(rebalance / 6)
	}
	r := recv(t, j)
	if r.ErrorCode != 0 || r.Generation != 2 || len(r.Members) != 2 || r.LeaderID != rd.MemberID {
		t.Fatalf("join: %+v", r)
	}
	h.c.mu.Lock()
	_, kept := h.c.groups["g"].members[rs.MemberID]
	h.c.mu.Unlock()
	if !kept {
		t.Fatal("static member removed by the rebalance timeout")
	}
}

func TestLeaveGroupBatched(t *testing.T) {
	h := newHarness(t, delay)
	inst := kmsg.StringPtr("static")
	st := h.joinAsync(newJoin("g", "", inst, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	var dyn []string
	var chs []<-chan *kmsg.JoinGroupResponse
	for i := 0; i < 2; i++ {
		id, ch := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
		dyn, chs = append(dyn, id), append(chs, ch)
		h.awaiting("g", i+2)
	}
	h.clock.Advance(2 * delay)
	staticID := recv(t, st).MemberID
	for _, ch := range chs {
		recv(t, ch)
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	req.Group = "g"
	for _, m := range []kmsg.LeaveGroupRequestMember{
		{MemberID: dyn[0]},
		{InstanceID: inst}, // administrative removal by instance id
		{MemberID: "someone-else", InstanceID: kmsg.StringPtr("static")}, // fenced: now unknown instance
		{MemberID: "nobody"},
	} {
		req.Members = append(req.Members, m)
	}
	resp := h.c.LeaveGroup(context.Background(), req)
	got := []int16{}
	for _, m := range resp.Members {
		got = append(got, m.ErrorCode)
	}
	want := []int16{0, 0, kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code}
	if resp.ErrorCode != 0 || len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("leave: top %d members %v, want %v", resp.ErrorCode, got, want)
	}
	_ = staticID
	// v0: one member id, top-level error.
	v0 := kmsg.NewPtrLeaveGroupRequest()
	v0.Group, v0.MemberID = "g", "nobody"
	if r := h.c.LeaveGroup(context.Background(), v0); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("v0 leave of an unknown member: %d", r.ErrorCode)
	}
	v0.MemberID = dyn[1]
	if r := h.c.LeaveGroup(context.Background(), v0); r.ErrorCode != 0 {
		t.Fatalf("v0 leave: %d", r.ErrorCode)
	}
	// Everyone left: the next join phase ends at once with an empty group,
	// which is stored.
	h.waitFor("group stored empty", func() bool { return h.c.groups["g"].state == Empty })
	h.c.bg.Wait()
	if s := h.p.last(); s.Generation != 2 || len(s.Members) != 0 || s.ProtocolType != "consumer" || s.Protocol != "" {
		t.Fatalf("stored empty group: %+v", s)
	}
}

func TestLeaveGroupFencedInstance(t *testing.T) {
	h := newHarness(t, 0)
	inst := kmsg.StringPtr("i")
	r := recv(t, h.joinAsync(newJoin("g", "", inst, session, rebalance, "range", "m")))
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 3
	req.Group = "g"
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "old-id", InstanceID: inst}}
	if resp := h.c.LeaveGroup(context.Background(), req); resp.Members[0].ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("leave with a stale member id: %d", resp.Members[0].ErrorCode)
	}
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: r.MemberID, InstanceID: inst}}
	if resp := h.c.LeaveGroup(context.Background(), req); resp.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %d", resp.Members[0].ErrorCode)
	}
}

func TestProtocolSelectionByVotes(t *testing.T) {
	cases := []struct {
		members [][]string
		want    string
	}{
		// Only roundrobin is supported by all.
		{[][]string{{"range", "roundrobin"}, {"roundrobin", "range"}, {"roundrobin"}}, "roundrobin"},
		// Both supported by all; range has two first votes.
		{[][]string{{"range", "sticky"}, {"range", "sticky"}, {"sticky", "range"}}, "range"},
		// cooperative-sticky preferred by all, range as fallback.
		{[][]string{{"cooperative-sticky", "range"}, {"cooperative-sticky", "range"}}, "cooperative-sticky"},
	}
	for _, c := range cases {
		h := newHarness(t, delay)
		var chs []<-chan *kmsg.JoinGroupResponse
		for i, protos := range c.members {
			var pairs []string
			for _, p := range protos {
				pairs = append(pairs, p, "meta-"+p)
			}
			_, ch := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, pairs...))
			chs = append(chs, ch)
			h.awaiting("g", i+1)
		}
		h.clock.Advance(2 * delay)
		for _, ch := range chs {
			r := recv(t, ch)
			if *r.Protocol != c.want {
				t.Errorf("%v: selected %s, want %s", c.members, *r.Protocol, c.want)
			}
			for _, m := range r.Members {
				if string(m.ProtocolMetadata) != "meta-"+c.want {
					t.Errorf("leader got metadata %q for %s", m.ProtocolMetadata, c.want)
				}
			}
		}
	}
}

func TestJoinInconsistentProtocols(t *testing.T) {
	h := newHarness(t, delay)
	h.stableGroup("g", 1, session, rebalance)
	other := newJoin("g", "", nil, session, rebalance, "range", "m")
	other.ProtocolType = "connect"
	if r := recv(t, h.joinAsync(other)); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("other protocol type: %d", r.ErrorCode)
	}
	if r := recv(t, h.joinAsync(newJoin("g", "", nil, session, rebalance, "roundrobin", "m"))); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("unsupported protocol: %d", r.ErrorCode)
	}
	empty := newJoin("h", "", nil, session, rebalance)
	if r := recv(t, h.joinAsync(empty)); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("no protocols: %d", r.ErrorCode)
	}
	if r := recv(t, h.joinAsync(newJoin("h", "", nil, 100*time.Millisecond, rebalance, "range", "m"))); r.ErrorCode != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("session below the minimum: %d", r.ErrorCode)
	}
	if r := recv(t, h.joinAsync(newJoin("", "", nil, session, rebalance, "range", "m"))); r.ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("empty group id: %d", r.ErrorCode)
	}
	if r := recv(t, h.joinAsync(newJoin("new", "made-up", nil, session, rebalance, "range", "m"))); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("made-up member id: %d", r.ErrorCode)
	}
}

func TestStableFollowerRejoinWithSameMetadataGetsCurrentGeneration(t *testing.T) {
	// Cooperative rebalancing is client driven: a follower that rejoins
	// unchanged gets the current generation; one that changes its
	// metadata (revoked partitions) starts a rebalance.
	h := newHarness(t, delay)
	ids := h.stableGroup("g", 2, session, rebalance)
	r := recv(t, h.joinAsync(newJoin("g", ids[1], nil, session, rebalance, "range", "m")))
	if r.ErrorCode != 0 || r.Generation != 1 || h.state("g") != "Stable" {
		t.Fatalf("unchanged rejoin: %+v, state %s", r, h.state("g"))
	}
	b := h.joinAsync(newJoin("g", ids[1], nil, session, rebalance, "range", "owned-less"))
	h.awaiting("g", 1)
	if h.state("g") != "PreparingRebalance" {
		t.Fatalf("state %s", h.state("g"))
	}
	a := h.joinAsync(newJoin("g", ids[0], nil, session, rebalance, "range", "m"))
	ra, rb := recv(t, a), recv(t, b)
	if ra.Generation != 2 || rb.Generation != 2 || string(ra.Members[1].ProtocolMetadata) != "owned-less" {
		t.Fatalf("a %+v b %+v", ra, rb)
	}
}

func TestPartitionStatesGateRequests(t *testing.T) {
	h := newHarness(t, delay)
	p := PartitionFor("g", testPartitions)
	h.c.SetPartitionState(p, Loading)
	if r := recv(t, h.joinAsync(newJoin("g", "", nil, session, rebalance, "range", "m"))); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("join while loading: %d", r.ErrorCode)
	}
	if err := h.c.ValidateCommit("g", -1, "", nil); ErrorCode(err) != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("commit while loading: %v", err)
	}
	lr := h.c.ListGroups(context.Background(), kmsg.NewPtrListGroupsRequest())
	if lr.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list while loading: %d", lr.ErrorCode)
	}
	// The load installs a Stable group; its members must heartbeat from
	// the moment the partition is Loaded.
	h.c.LoadGroup(p, GroupSnapshot{Group: "g", ProtocolType: "consumer", Protocol: "range", Leader: "m1", Generation: 5,
		Members: []MemberSnapshot{
			{MemberID: "m1", ClientID: "c", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000, Subscription: []byte("s1"), Assignment: []byte("a1")},
			{MemberID: "m2", ClientID: "c", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000, Subscription: []byte("s2"), Assignment: []byte("a2")},
		}})
	h.c.LoadGroup(p, GroupSnapshot{Group: "gone", ProtocolType: "consumer", Generation: 1, Members: []MemberSnapshot{}})
	h.c.LoadGroup(p, GroupSnapshot{Group: "gone"}) // tombstone
	h.c.SetPartitionState(p, Loaded)
	if _, ok := h.c.GroupState("gone"); ok {
		t.Fatal("tombstoned group loaded")
	}
	if h.state("g") != "Stable" {
		t.Fatalf("loaded state %s", h.state("g"))
	}
	if s := recv(t, h.syncAsync("g", "m2", 5, nil)); s.ErrorCode != 0 || string(s.MemberAssignment) != "a2" {
		t.Fatalf("sync of a loaded member: %+v", s)
	}
	for i := 0; i < 3; i++ {
		h.clock.Advance(4 * time.Second)
		h.heartbeat("g", "m1", 5)
	}
	if code := h.heartbeat("g", "m2", 5); code != kerr.UnknownMemberID.Code {
		t.Fatalf("loaded member that never heartbeat: %d", code)
	}
	// Losing the partition drops its groups and parks nothing.
	j := h.joinAsync(newJoin("g", "m1", nil, session, rebalance, "range", "s1"))
	recv(t, j)
	h.c.SetPartitionState(p, NotOwned)
	if code := h.heartbeat("g", "m1", 5); code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat after resignation: %d", code)
	}
	if _, ok := h.c.GroupState("g"); ok {
		t.Fatal("group kept after resignation")
	}
}

func TestResignationAnswersParkedJoins(t *testing.T) {
	h := newHarness(t, delay)
	_, ch := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	h.c.SetPartitionState(PartitionFor("g", testPartitions), NotOwned)
	if r := recv(t, ch); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked join on resignation: %d", r.ErrorCode)
	}
}

func TestValidateCommit(t *testing.T) {
	h := newHarness(t, delay)
	// Simple commits: unknown group (created Empty), or Empty group.
	if err := h.c.ValidateCommit("simple", -1, "", nil); err != nil {
		t.Fatalf("simple commit: %v", err)
	}
	if h.state("simple") != "Empty" {
		t.Fatalf("simple group state %s", h.state("simple"))
	}
	if err := h.c.ValidateCommit("unknown", 3, "m", nil); ErrorCode(err) != kerr.IllegalGeneration.Code {
		t.Fatalf("generation for an unknown group: %v", err)
	}
	ids := h.stableGroup("g", 2, session, rebalance)
	cases := []struct {
		gen    int32
		member string
		want   int16
	}{
		{1, ids[0], 0},
		{-1, "", kerr.UnknownMemberID.Code}, // simple commit into a live group
		{2, ids[0], kerr.IllegalGeneration.Code},
		{1, "x", kerr.UnknownMemberID.Code},
	}
	for _, c := range cases {
		if got := ErrorCode(h.c.ValidateCommit("g", c.gen, c.member, nil)); got != c.want {
			t.Errorf("commit gen %d member %q: %d, want %d", c.gen, c.member, got, c.want)
		}
	}
	// Completing a rebalance: REBALANCE_IN_PROGRESS.
	a := h.joinAsync(newJoin("g", ids[0], nil, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	if err := h.c.ValidateCommit("g", 1, ids[1], nil); err != nil {
		t.Fatalf("commit during PreparingRebalance: %v", err)
	}
	b := h.joinAsync(newJoin("g", ids[1], nil, session, rebalance, "range", "m"))
	recv(t, a)
	recv(t, b)
	if err := h.c.ValidateCommit("g", 2, ids[1], nil); ErrorCode(err) != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit during CompletingRebalance: %v", err)
	}
}

func TestDescribeListDeleteGroups(t *testing.T) {
	h := newHarness(t, delay)
	ids := h.stableGroup("stable", 2, session, rebalance)
	if err := h.c.ValidateCommit("empty", -1, "", nil); err != nil {
		t.Fatal(err)
	}
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version = 5
	d.Groups = []string{"stable", "empty", "missing"}
	resp := h.c.DescribeGroups(context.Background(), d)
	st := resp.Groups[0]
	if st.State != "Stable" || st.Protocol != "range" || st.ProtocolType != "consumer" || len(st.Members) != 2 ||
		st.Members[0].MemberID != ids[0] || string(st.Members[0].ProtocolMetadata) != "m" || string(st.Members[1].MemberAssignment) != "a1" ||
		st.Members[0].ClientHost != "/127.0.0.1" || st.AuthorizedOperations != -2147483648 {
		t.Fatalf("stable: %+v", st)
	}
	if resp.Groups[1].State != "Empty" || resp.Groups[2].State != "Dead" || resp.Groups[2].ErrorCode != 0 {
		t.Fatalf("empty %+v missing %+v", resp.Groups[1], resp.Groups[2])
	}
	d.Version = 6
	d.IncludeAuthorizedOperations = true
	resp = h.c.DescribeGroups(context.Background(), d)
	if resp.Groups[2].ErrorCode != kerr.GroupIDNotFound.Code || resp.Groups[0].AuthorizedOperations != groupOperations {
		t.Fatalf("v6: %+v", resp.Groups)
	}

	l := kmsg.NewPtrListGroupsRequest()
	l.Version = 5
	names := func(r *kmsg.ListGroupsResponse) string {
		var s []string
		for _, g := range r.Groups {
			s = append(s, g.Group+":"+g.GroupState+":"+g.GroupType)
		}
		return strings.Join(s, ",")
	}
	if got := names(h.c.ListGroups(context.Background(), l)); got != "empty:Empty:classic,stable:Stable:classic" {
		t.Fatalf("list: %s", got)
	}
	l.StatesFilter = []string{"stable"}
	if got := names(h.c.ListGroups(context.Background(), l)); got != "stable:Stable:classic" {
		t.Fatalf("list stable: %s", got)
	}
	l.StatesFilter, l.TypesFilter = nil, []string{"consumer"}
	if got := names(h.c.ListGroups(context.Background(), l)); got != "" {
		t.Fatalf("list consumer-type: %s", got)
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = 2
	del.Groups = []string{"stable", "empty", "missing", "empty"}
	dr := h.c.DeleteGroups(context.Background(), del)
	got := map[string]int16{}
	for _, g := range dr.Groups {
		got[g.Group] = g.ErrorCode
	}
	if len(dr.Groups) != 3 || got["stable"] != kerr.NonEmptyGroup.Code || got["empty"] != 0 || got["missing"] != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete: %+v", dr.Groups)
	}
	if len(h.p.deletes) != 1 || h.p.deletes[0] != "empty" {
		t.Fatalf("tombstoned %v", h.p.deletes)
	}
	if _, ok := h.c.GroupState("empty"); ok {
		t.Fatal("deleted group still known")
	}
	// A failed tombstone write leaves the group Empty.
	if err := h.c.ValidateCommit("again", -1, "", nil); err != nil {
		t.Fatal(err)
	}
	h.p.err = errDiskGone
	del.Groups = []string{"again"}
	if dr := h.c.DeleteGroups(context.Background(), del); dr.Groups[0].ErrorCode != kerr.CoordinatorNotAvailable.Code || h.state("again") != "Empty" {
		t.Fatalf("failed delete: %+v, state %s", dr.Groups, h.state("again"))
	}
}

func TestGroupMaxSize(t *testing.T) {
	clock := newFakeClock()
	c := NewCoordinator(Options{Clock: clock, Partitions: 1, MaxSize: 2, MinSessionTimeout: time.Second, InitialRebalanceDelay: delay})
	defer c.Close()
	c.SetPartitionState(0, Loaded)
	h := &harness{t: t, c: c, clock: clock, p: &fakePersister{}}
	h.stableGroup("g", 2, session, rebalance)
	// Kafka's acceptJoiningMember: a Stable group at its size takes no
	// unknown member, not even for the first step of the join.
	if r := recv(t, h.joinAsync(newJoin("g", "", nil, session, rebalance, "range", "m"))); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member: %d, want GROUP_MAX_SIZE_REACHED", r.ErrorCode)
	}
}

func TestGroupMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	clock := newFakeClock()
	c := NewCoordinator(Options{Clock: clock, Partitions: 1, MinSessionTimeout: time.Second, Registry: reg, InitialRebalanceDelay: delay})
	c.SetPartitionState(0, Loaded)
	h := &harness{t: t, c: c, clock: clock, p: &fakePersister{}}
	h.stableGroup("a", 2, session, rebalance)
	h.stableGroup("b", 1, session, rebalance)
	if err := c.ValidateCommit("c", -1, "", nil); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	want := map[string]float64{
		`strata_group_groups{state="CompletingRebalance"}`: 0, `strata_group_groups{state="Dead"}`: 0,
		`strata_group_groups{state="Empty"}`: 1, `strata_group_groups{state="PreparingRebalance"}`: 0,
		`strata_group_groups{state="Stable"}`: 2, `strata_group_members`: 3, `strata_group_rebalances_total`: 2,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	c.Close()
	if got := gather(t, reg); len(got) != 0 {
		t.Fatalf("series left after Close: %v", got)
	}
	// A second coordinator can register on the same registry.
	c2 := NewCoordinator(Options{Registry: reg})
	defer c2.Close()
	if !c2.metrics.registered {
		t.Fatal("second coordinator's metrics not registered")
	}
}

func TestRepeatedJoinAnswersTheParkedOne(t *testing.T) {
	// A client that retries its JoinGroup (a request timeout) must not
	// leave the first one parked forever: its connection answers in order.
	h := newHarness(t, delay)
	ids := h.stableGroup("g", 2, session, rebalance)
	first := h.joinAsync(newJoin("g", ids[0], nil, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	second := h.joinAsync(newJoin("g", ids[0], nil, session, rebalance, "range", "m"))
	if r := recv(t, first); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("superseded join: %+v", r)
	}
	pending(t, second, "the retried join before the other member rejoined")
	other := h.joinAsync(newJoin("g", ids[1], nil, session, rebalance, "range", "m"))
	if r := recv(t, second); r.ErrorCode != 0 || r.Generation != 2 || len(r.Members) != 2 {
		t.Fatalf("retried join: %+v", r)
	}
	recv(t, other)
}

// TestValidateTxnCommit: Kafka's validateOffsetCommit for transactional
// commits: the member checks of a v3+ commit, but no member (v0-v2) is
// accepted in any state, and no REBALANCE_IN_PROGRESS.
func TestValidateTxnCommit(t *testing.T) {
	h := newHarness(t, delay)
	if err := h.c.ValidateTxnCommit("simple", -1, "", nil); err != nil || h.state("simple") != "Empty" {
		t.Fatalf("simple txn commit: %v, state %s", err, h.state("simple"))
	}
	if err := h.c.ValidateTxnCommit("unknown", 3, "m", nil); ErrorCode(err) != kerr.IllegalGeneration.Code {
		t.Fatalf("generation for an unknown group: %v", err)
	}
	inst := kmsg.StringPtr("static-a")
	a := h.joinAsync(newJoin("g", "", inst, session, rebalance, "range", "m"))
	h.awaiting("g", 1)
	id1, b := h.twoStepJoin(newJoin("g", "", nil, session, rebalance, "range", "m"))
	h.awaiting("g", 2)
	h.clock.Advance(2 * delay)
	ra := recv(t, a)
	recv(t, b)
	// CompletingRebalance: a transactional commit is no
	// REBALANCE_IN_PROGRESS (the plain one is).
	if err := h.c.ValidateCommit("g", 1, id1, nil); ErrorCode(err) != kerr.RebalanceInProgress.Code {
		t.Fatalf("plain commit while completing: %v", err)
	}
	cases := []struct {
		gen    int32
		member string
		inst   *string
		want   int16
	}{
		{1, id1, nil, 0},
		{1, ra.MemberID, inst, 0},
		{-1, "", nil, 0}, // no member: accepted in a live group
		{2, id1, nil, kerr.IllegalGeneration.Code},
		{1, "x", nil, kerr.UnknownMemberID.Code},
		{1, id1, inst, kerr.FencedInstanceID.Code}, // another member's instance id
		{1, "x", kmsg.StringPtr("nobody"), kerr.UnknownMemberID.Code},
	}
	for _, c := range cases {
		if got := ErrorCode(h.c.ValidateTxnCommit("g", c.gen, c.member, c.inst)); got != c.want {
			t.Errorf("txn commit gen %d member %q: %d, want %d", c.gen, c.member, got, c.want)
		}
	}
}
