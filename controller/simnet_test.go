package controller

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// recorder is a Receiver that keeps what it is given.
type recorder struct {
	mu          sync.Mutex
	got         []*raftpb.Message
	at          []time.Time
	unreachable []uint64
	snaps       []bool
}

func (r *recorder) Receive(m *raftpb.Message) {
	r.mu.Lock()
	r.got = append(r.got, m)
	r.at = append(r.at, time.Now())
	r.mu.Unlock()
}
func (r *recorder) ReportUnreachable(id uint64) {
	r.mu.Lock()
	r.unreachable = append(r.unreachable, id)
	r.mu.Unlock()
}
func (r *recorder) ReportSnapshot(id uint64, failed bool) {
	r.mu.Lock()
	r.snaps = append(r.snaps, failed)
	r.mu.Unlock()
}
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func msg(from, to, idx uint64, typ raftpb.MessageType) *raftpb.Message {
	return &raftpb.Message{From: &from, To: &to, Index: &idx, Type: typ.Enum()}
}

func TestSimNetworkDropsDelaysAndPartitions(t *testing.T) {
	net := NewSimNetwork(3)
	defer net.Close()
	r1, r2 := &recorder{}, &recorder{}
	e1, e2 := net.Endpoint(1), net.Endpoint(2)
	if err := e1.Start(r1); err != nil {
		t.Fatal(err)
	}
	if err := e2.Start(r2); err != nil {
		t.Fatal(err)
	}
	// Delay: messages arrive in order, not before their delay.
	net.Delay(1, 2, 30*time.Millisecond)
	sent := time.Now()
	e1.Send([]*raftpb.Message{msg(1, 2, 1, raftpb.MsgApp), msg(1, 2, 2, raftpb.MsgApp)})
	if !waitFor(testWait, func() bool { return r2.count() == 2 }) {
		t.Fatal("delayed messages not delivered")
	}
	if d := r2.at[0].Sub(sent); d < 30*time.Millisecond {
		t.Fatalf("delivered after %v, delay 30ms", d)
	}
	if r2.got[0].GetIndex() != 1 || r2.got[1].GetIndex() != 2 {
		t.Fatal("delayed messages reordered")
	}
	// Drop half: roughly half arrive, the rest are reported unreachable.
	net.Heal()
	net.Drop(1, 2, 0.5)
	for i := range 400 {
		e1.Send([]*raftpb.Message{msg(1, 2, uint64(10+i), raftpb.MsgHeartbeat)})
	}
	if !waitFor(testWait, func() bool { return r2.count()-2+len(r1.unreachable) == 400 }) {
		t.Fatalf("delivered %d + unreachable %d != 400", r2.count()-2, len(r1.unreachable))
	}
	if got := r2.count() - 2; got < 120 || got > 280 {
		t.Fatalf("50%% drop delivered %d of 400", got)
	}
	// Partition: nothing crosses, either way; a lost MsgSnap is reported
	// failed, a delivered one finished.
	net.Heal()
	net.Partition([]uint64{1}, []uint64{2})
	before := r2.count()
	e1.Send([]*raftpb.Message{msg(1, 2, 1000, raftpb.MsgSnap)})
	e2.Send([]*raftpb.Message{msg(2, 1, 1000, raftpb.MsgApp)})
	net.Heal()
	e1.Send([]*raftpb.Message{msg(1, 2, 1001, raftpb.MsgSnap)})
	if !waitFor(testWait, func() bool { return r2.count() == before+1 }) {
		t.Fatal("healed link does not deliver")
	}
	if r1.count() != 0 {
		t.Fatal("message crossed the partition")
	}
	r1.mu.Lock()
	snaps := slices.Clone(r1.snaps)
	r1.mu.Unlock()
	if !slices.Equal(snaps, []bool{true, false}) {
		t.Fatalf("snapshot reports %v, want [failed, finished]", snaps)
	}
}

// TestNodeCommitsOverLossyDelayedNetwork: 3 voters with 20% loss and 5ms
// delay on every link still commit, and converge on one log.
func TestNodeCommitsOverLossyDelayedNetwork(t *testing.T) {
	c := newNodeCluster(t, 3, 1000)
	for _, a := range c.ids {
		for _, b := range c.ids {
			if a != b {
				c.net.Drop(a, b, 0.2)
				c.net.Delay(a, b, 5*time.Millisecond)
			}
		}
	}
	for i := range 20 {
		c.propose(fmt.Sprint("l", i))
	}
	lead := c.leader()
	if n := len(c.fsms[lead].entries()); n < 20 {
		t.Fatalf("leader applied %d entries", n)
	}
	// A proposal that timed out may still commit later, so compare the
	// nodes with each other rather than with a snapshot of the leader.
	if !waitFor(testWait, func() bool {
		want := c.fsms[lead].entries()
		for _, id := range c.ids {
			if !slices.Equal(c.fsms[id].entries(), want) {
				return false
			}
		}
		return true
	}) {
		for _, id := range c.ids {
			t.Logf("node %d: %v", id, c.fsms[id].entries())
		}
		t.Fatal("nodes diverged")
	}
}
