package group

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestUpgradeHandsOverAndDrops: Upgrade shows the conversion a Stable
// group's members with every protocol and assignment; a refusal keeps the
// group as it was; a success drops it (a parked JoinGroup is answered
// REBALANCE_IN_PROGRESS) and no store of it follows. An Empty or unknown
// group is not found.
func TestUpgradeHandsOverAndDrops(t *testing.T) {
	h := newHarness(t, time.Second)
	ids := h.stableGroup("g", 2, time.Minute, time.Minute)
	if found, _ := h.c.Upgrade("nope", func(ClassicView) error { t.Fatal("called"); return nil }); found {
		t.Fatal("unknown group found")
	}
	refused := errors.New("no")
	var seen ClassicView
	found, err := h.c.Upgrade("g", func(v ClassicView) error { seen = v; return refused })
	if !found || err != refused || h.state("g") != "Stable" {
		t.Fatalf("refused: found %v err %v state %s", found, err, h.state("g"))
	}
	if seen.State != "Stable" || seen.ProtocolType != "consumer" || seen.Protocol != "range" || seen.Generation != 1 || len(seen.Members) != 2 {
		t.Fatalf("view %+v", seen)
	}
	for i, m := range seen.Members {
		if m.MemberID != ids[i] || string(m.Assignment) != "a"+string(rune('0'+i)) || len(m.Protocols) != 1 || m.Protocols[0].Name != "range" || string(m.Protocols[0].Metadata) != "m" {
			t.Fatalf("member %d: %+v", i, m)
		}
	}
	// A rejoin parks (a rebalance starts); the upgrade answers it.
	rejoin := h.joinAsync(newJoin("g", ids[0], nil, time.Minute, time.Minute, "range", "m"))
	h.awaiting("g", 1)
	stores := h.p.storeCount()
	if found, err := h.c.Upgrade("g", func(ClassicView) error { return nil }); !found || err != nil {
		t.Fatalf("upgrade: %v %v", found, err)
	}
	if r := recv(t, rejoin); r.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("parked join answered %d", r.ErrorCode)
	}
	if _, ok := h.c.GroupState("g"); ok {
		t.Fatal("group still there")
	}
	h.clock.Advance(2 * time.Minute)
	if h.p.storeCount() != stores {
		t.Fatal("a store of the upgraded group followed")
	}
}

// TestAdoptRebalances: an adopted group starts Stable at its generation
// with its members' protocols, and rebalances at once: heartbeats say
// REBALANCE_IN_PROGRESS, the rejoins complete the next generation.
func TestAdoptRebalances(t *testing.T) {
	h := newHarness(t, time.Second)
	s := GroupSnapshot{Group: "g", ProtocolType: "consumer", Protocol: "range", Leader: "m1", Generation: 7,
		Members: []MemberSnapshot{
			{MemberID: "m1", ClientID: "c", RebalanceTimeoutMs: 60000, SessionTimeoutMs: 60000, Subscription: []byte("s1"), Assignment: []byte("a1")},
			{MemberID: "m2", ClientID: "c", RebalanceTimeoutMs: 60000, SessionTimeoutMs: 60000, Subscription: []byte("s2"), Assignment: []byte("a2")},
		}}
	protos := map[string][]Protocol{"m1": {{Name: "sticky", Metadata: []byte("x")}, {Name: "range", Metadata: []byte("s1")}}}
	h.c.Adopt(PartitionFor("g", testPartitions), s, protos, "test")
	if st := h.state("g"); st != "PreparingRebalance" {
		t.Fatalf("state %s", st)
	}
	if code := h.heartbeat("g", "m2", 7); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat: %d", code)
	}
	h.c.mu.Lock()
	m1 := h.c.groups["g"].members["m1"]
	got := len(m1.protocols)
	h.c.mu.Unlock()
	if got != 2 {
		t.Fatalf("m1 has %d protocols", got)
	}
	a := h.joinAsync(newJoin("g", "m1", nil, time.Minute, time.Minute, "range", "s1"))
	b := h.joinAsync(newJoin("g", "m2", nil, time.Minute, time.Minute, "range", "s2"))
	ra, rb := recv(t, a), recv(t, b)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != 8 {
		t.Fatalf("rejoins: %d %d generation %d", ra.ErrorCode, rb.ErrorCode, ra.Generation)
	}
}
