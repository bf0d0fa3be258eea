package group

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// fakeClock is a [Clock] whose time moves only by Advance, which fires the
// due timers in time order on the caller's goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	seq     int
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), seq: len(c.timers), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves time forward by d, firing every timer due on the way.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if t.stopped || t.at.After(end) {
				continue
			}
			if next == nil || t.at.Before(next.at) || (t.at.Equal(next.at) && t.seq < next.seq) {
				next = t
			}
		}
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		next.stopped = true
		c.now = next.at
		c.mu.Unlock()
		next.f()
	}
}

// fakePersister records stores; block, when set, holds each store until
// a value is received from it; err fails stores.
type fakePersister struct {
	mu      sync.Mutex
	stores  []GroupSnapshot
	deletes []string
	err     error
	block   chan struct{}
}

func (p *fakePersister) StoreGroup(ctx context.Context, _ int32, g GroupSnapshot) error {
	if p.block != nil {
		select {
		case <-p.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.stores = append(p.stores, g)
	return nil
}

func (p *fakePersister) DeleteGroup(_ context.Context, _ int32, group string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.deletes = append(p.deletes, group)
	return nil
}

func (p *fakePersister) storeCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.stores)
}

func (p *fakePersister) last() GroupSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stores[len(p.stores)-1]
}

var errDiskGone = errors.New("disk gone")

// harness is a coordinator on a fake clock owning every partition.
type harness struct {
	t     *testing.T
	c     *Coordinator
	clock *fakeClock
	p     *fakePersister
}

const testPartitions = 4

func newHarness(t *testing.T, delay time.Duration) *harness {
	t.Helper()
	h := &harness{t: t, clock: newFakeClock(), p: &fakePersister{}}
	h.c = NewCoordinator(Options{Clock: h.clock, Persister: h.p, Partitions: testPartitions,
		InitialRebalanceDelay: delay, MinSessionTimeout: time.Second, MaxSessionTimeout: time.Hour})
	for i := int32(0); i < testPartitions; i++ {
		h.c.SetPartitionState(i, Loaded)
	}
	t.Cleanup(h.c.Close)
	return h
}

// newJoin builds a JoinGroup v9 request: protocols are name=metadata pairs.
func newJoin(groupID, memberID string, instanceID *string, session, rebalance time.Duration, protos ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group, r.MemberID, r.InstanceID = groupID, memberID, instanceID
	r.SessionTimeoutMillis = int32(session / time.Millisecond)
	r.RebalanceTimeoutMillis = int32(rebalance / time.Millisecond)
	r.ProtocolType = "consumer"
	for i := 0; i+1 < len(protos); i += 2 {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = protos[i], []byte(protos[i+1])
		r.Protocols = append(r.Protocols, p)
	}
	return r
}

// joinAsync sends a JoinGroup on its own goroutine.
func (h *harness) joinAsync(req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	ctx := WithClient(context.Background(), "client", "/127.0.0.1")
	go func() { ch <- h.c.JoinGroup(ctx, req) }()
	return ch
}

// syncAsync sends a SyncGroup on its own goroutine.
func (h *harness) syncAsync(groupID, memberID string, gen int32, assign map[string]string) <-chan *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = groupID, memberID, gen
	ids := make([]string, 0, len(assign))
	for id := range assign {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, []byte(assign[id])
		r.GroupAssignment = append(r.GroupAssignment, a)
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- h.c.SyncGroup(context.Background(), r) }()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		panic("unreachable")
	}
}

// pending asserts that ch has no answer yet (after letting goroutines run).
func pending[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s answered early: %+v", what, v)
	case <-time.After(20 * time.Millisecond):
	}
}

// waitFor polls cond (under the coordinator's lock) until it holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	testutil.Eventually(h.t, 10*time.Second, func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		return cond()
	}, "%s", what)
}

// awaiting waits until n members of groupID have a parked JoinGroup.
func (h *harness) awaiting(groupID string, n int) {
	h.t.Helper()
	h.waitFor("parked joins", func() bool { g := h.c.groups[groupID]; return g != nil && g.numAwaiting == n })
}

func (h *harness) state(groupID string) string {
	s, _ := h.c.GroupState(groupID)
	return s
}

func (h *harness) heartbeat(groupID, memberID string, gen int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = groupID, memberID, gen
	return h.c.Heartbeat(context.Background(), r).ErrorCode
}

// twoStepJoin runs a KIP-394 join: the first answer's id is used for the
// second (parked) join.
func (h *harness) twoStepJoin(req *kmsg.JoinGroupRequest) (string, <-chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	first := recv(h.t, h.joinAsync(req))
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		h.t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", first.ErrorCode)
	}
	again := *req
	again.MemberID = first.MemberID
	return first.MemberID, h.joinAsync(&again)
}

// stableGroup builds a Stable group of n dynamic members (protocol
// "range"), the first the leader, each assigned "a<i>".
func (h *harness) stableGroup(groupID string, n int, session, rebalance time.Duration) []string {
	h.t.Helper()
	var ids []string
	var chs []<-chan *kmsg.JoinGroupResponse
	for i := 0; i < n; i++ {
		id, ch := h.twoStepJoin(newJoin(groupID, "", nil, session, rebalance, "range", "m"))
		ids = append(ids, id)
		chs = append(chs, ch)
		h.awaiting(groupID, i+1)
	}
	h.clock.Advance(2 * h.c.o.InitialRebalanceDelay)
	var gen int32
	for _, ch := range chs {
		r := recv(h.t, ch)
		if r.ErrorCode != 0 {
			h.t.Fatalf("join: error %d", r.ErrorCode)
		}
		gen = r.Generation
	}
	assign := map[string]string{}
	for i, id := range ids {
		assign[id] = "a" + string(rune('0'+i))
	}
	var syncs []<-chan *kmsg.SyncGroupResponse
	for i := len(ids) - 1; i >= 0; i-- { // followers first, leader last
		a := map[string]string(nil)
		if i == 0 {
			a = assign
		}
		syncs = append(syncs, h.syncAsync(groupID, ids[i], gen, a))
		if i > 0 {
			h.waitFor("parked sync", func() bool { return h.c.groups[groupID].members[ids[i]].syncCh != nil })
		}
	}
	for _, ch := range syncs {
		if r := recv(h.t, ch); r.ErrorCode != 0 {
			h.t.Fatalf("sync: error %d", r.ErrorCode)
		}
	}
	if s := h.state(groupID); s != "Stable" {
		h.t.Fatalf("state %s, want Stable", s)
	}
	return ids
}

// gather returns every series of reg as name{labels} -> value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			k := mf.GetName()
			if len(m.GetLabel()) > 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"=\""+l.GetValue()+"\"")
				}
				k += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[k] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[k] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
