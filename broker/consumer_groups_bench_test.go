package broker

// Group benchmarks through the broker (raw requests over loopback, one
// node): the time from a member's join to a stable assignment, classic
// (JoinGroup/SyncGroup: every member rejoins and the leader assigns) and
// KIP-848 (ConsumerGroupHeartbeat: members heartbeat, the coordinator
// assigns and they reconcile), for groups of 10, 100 and 1000 members; and
// the heartbeats per second one coordinator sustains.
//
//	go test -run '^$' -bench 'JoinToStable848|GroupHeartbeatRate' -benchtime 10x ./broker/
//
// The KIP-848 op heartbeats every member in rounds (8 connections in
// parallel, as fast as the coordinator answers: no heartbeat interval)
// until the group is Stable; the classic op is the joiner's JoinGroup,
// every member's Heartbeat (REBALANCE_IN_PROGRESS) and rejoin, and the
// SyncGroups. The restore between ops (the joiner leaving, the group
// settling again) is not timed. Metrics: heartbeats/op (848), and for
// the rate benchmark heartbeats/s.

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker/group/consumer"
)

// benchConns is the number of connections KIP-848 members share.
const benchConns = 8

// benchGroupNode starts a node with group g loaded and a topic t of
// 2×members partitions (a joiner takes partitions from the others, as in
// broker/group/consumer's BenchmarkJoinToStable); timeouts are long (nothing expires during
// a run).
func benchGroupNode(b *testing.B, members int) (*Node, *rawConn) {
	b.Helper()
	n := startNode(b, b.TempDir(), withSettings(map[string]string{
		"group.max.session.timeout.ms": "600000",
	}))
	c := dialRaw(b, n)
	findCoordinator(b, c, "g")
	waitLoaded(b, n, "g")
	createTopic(b, newAdmin(b, n), "t", int32(2*members), nil)
	return n, c
}

// refresh moves the connections' deadlines a minute ahead.
func refresh(cs ...*rawConn) {
	for _, c := range cs {
		c.nc.SetDeadline(time.Now().Add(time.Minute))
	}
}

// round848 heartbeats every member once, members spread over conns, and
// returns the heartbeats sent.
func round848(b *testing.B, conns []*rawConn, ms []*sim848) int {
	var wg sync.WaitGroup
	for ci, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := ci; i < len(ms); i += len(conns) {
				k := ms[i]
				k.c = c
				if r := k.heartbeat(); r.ErrorCode != 0 {
					b.Errorf("heartbeat %s: %v", k.id, kerr.ErrorForCode(r.ErrorCode))
					return
				}
			}
		}()
	}
	wg.Wait()
	return len(ms)
}

// settle848 runs rounds until group g is Stable and returns the
// heartbeats sent.
func settle848(b *testing.B, n *Node, conns []*rawConn, ms []*sim848) int {
	beats := 0
	for round := 0; ; round++ {
		var st consumer.GroupState
		n.groups.cgs.with("g", func(g *consumer.Group) { st = g.State() })
		if st == consumer.StateStable && round > 0 {
			return beats
		}
		if round > 100 {
			b.Fatalf("not stable after %d rounds: %s", round, st)
		}
		beats += round848(b, conns, ms)
	}
}

func stable848(b *testing.B, n *Node, members int) ([]*rawConn, []*sim848) {
	conns := make([]*rawConn, benchConns)
	for i := range conns {
		conns[i] = dialRaw(b, n)
	}
	ms := make([]*sim848, members)
	for i := range ms {
		ms[i] = &sim848{t: b, group: "g", id: "member-" + strconv.Itoa(i)}
	}
	refresh(conns...)
	settle848(b, n, conns, ms)
	return conns, ms
}

func benchJoin848(b *testing.B, members int) {
	n, _ := benchGroupNode(b, members)
	conns, ms := stable848(b, n, members)
	beats := 0
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		refresh(conns...)
		k := &sim848{t: b, c: conns[0], group: "g", id: fmt.Sprintf("joiner-%d", i)}
		all := append(ms[:members:members], k)
		b.StartTimer()
		if r := k.heartbeat(); r.ErrorCode != 0 {
			b.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		beats += 1 + settle848(b, n, conns, all)
		b.StopTimer()
		if r := k.leave(); r.ErrorCode != 0 {
			b.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		settle848(b, n, conns, ms)
		b.StartTimer()
	}
	b.ReportMetric(float64(beats)/float64(b.N), "heartbeats/op")
}

func benchJoinClassic(b *testing.B, members int) {
	n, _ := benchGroupNode(b, members)
	parts := int32(2 * members)
	ms := make([]*classicSim, members)
	for i := range ms {
		ms[i] = newClassicSim(b, n, "g")
		refresh(ms[i].c)
		if r := ms[i].joinOnce(); r.ErrorCode != kerr.MemberIDRequired.Code {
			b.Fatalf("first join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	rebalanceClassic(b, ms, parts)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		joiner := newClassicSim(b, n, "g")
		for _, m := range ms {
			refresh(m.c)
		}
		refresh(joiner.c)
		if r := joiner.joinOnce(); r.ErrorCode != kerr.MemberIDRequired.Code {
			b.Fatalf("joiner's first join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		b.StartTimer()
		// The joiner's JoinGroup starts the rebalance; every member learns
		// it from its Heartbeat and rejoins; then all sync.
		done := make(chan struct{})
		var jr int16
		go func() { defer close(done); jr = joiner.joinOnce().ErrorCode }()
		for {
			if st, _ := n.groups.members.GroupState("g"); st == "PreparingRebalance" {
				break
			}
			time.Sleep(10 * time.Microsecond)
		}
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code := m.heartbeat(); code != kerr.RebalanceInProgress.Code {
					b.Errorf("heartbeat %s: %v", m.id, kerr.ErrorForCode(code))
				}
			}()
		}
		wg.Wait()
		rejoinAndSync(b, ms, joiner, done, &jr, parts)
		b.StopTimer()
		if code := joiner.leave(); code != 0 {
			b.Fatalf("leave: %v", kerr.ErrorForCode(code))
		}
		rebalanceClassic(b, ms, parts)
		b.StartTimer()
	}
}

// rejoinAndSync rejoins ms (the joiner's JoinGroup is parked already, its
// answer arrives on done) and syncs everyone, the leader spreading parts
// partitions round-robin.
func rejoinAndSync(b *testing.B, ms []*classicSim, joiner *classicSim, done chan struct{}, jr *int16, parts int32) {
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := m.joinOnce(); r.ErrorCode != 0 {
				b.Errorf("rejoin %s: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
			}
		}()
	}
	wg.Wait()
	<-done
	if *jr != 0 {
		b.Fatalf("joiner's join: %v", kerr.ErrorForCode(*jr))
	}
	all := append(ms[:len(ms):len(ms)], joiner)
	ids := make([]string, len(all))
	for i, m := range all {
		ids[i] = m.id
	}
	assign := map[string][]int32{}
	for p := range parts {
		id := ids[int(p)%len(ids)]
		assign[id] = append(assign[id], p)
	}
	leader := classicLeader(b, all)
	for _, m := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a map[string][]int32
			if m.id == leader {
				a = assign
			}
			if r := m.sync(a); r.ErrorCode != 0 {
				b.Errorf("sync %s: %v", m.id, kerr.ErrorForCode(r.ErrorCode))
			}
		}()
	}
	wg.Wait()
}

// classicLeader is the member of ms its last JoinGroup answer named
// leader.
func classicLeader(b *testing.B, ms []*classicSim) string {
	for _, m := range ms {
		if m.leader {
			return m.id
		}
	}
	b.Fatal("no leader")
	return ""
}

// BenchmarkJoinToStable848: the time from a member's join to a stable
// assignment, classic vs KIP-848, through the broker.
func BenchmarkJoinToStable848(b *testing.B) {
	for _, proto := range []string{"classic", "848"} {
		for _, members := range []int{10, 100, 1000} {
			b.Run(proto+"/members="+strconv.Itoa(members), func(b *testing.B) {
				if proto == "classic" {
					benchJoinClassic(b, members)
				} else {
					benchJoin848(b, members)
				}
			})
		}
	}
}

// BenchmarkGroupHeartbeatRate: heartbeats per second one coordinator
// answers for a Stable group of 1000 members, over 8 connections in
// parallel: KIP-848 ConsumerGroupHeartbeat and classic Heartbeat.
func BenchmarkGroupHeartbeatRate(b *testing.B) {
	const members = 1000
	b.Run("848", func(b *testing.B) {
		n, _ := benchGroupNode(b, members)
		conns, ms := stable848(b, n, members)
		refresh(conns...)
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for ci, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := ci; i < b.N; i += len(conns) {
					k := *ms[i%members]
					k.c = c
					if r := k.heartbeat(); r.ErrorCode != 0 {
						b.Errorf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "heartbeats/s")
	})
	b.Run("classic", func(b *testing.B) {
		n, _ := benchGroupNode(b, members)
		ms := make([]*classicSim, members)
		for i := range ms {
			ms[i] = newClassicSim(b, n, "g")
			refresh(ms[i].c)
			ms[i].joinOnce()
		}
		rebalanceClassic(b, ms, 2*members)
		conns := make([]*rawConn, benchConns)
		for i := range conns {
			conns[i] = dialRaw(b, n)
		}
		refresh(conns...)
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for ci, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := ci; i < b.N; i += len(conns) {
					m := *ms[i%members]
					m.c = c
					if code := m.heartbeat(); code != 0 {
						b.Errorf("heartbeat: %v", kerr.ErrorForCode(code))
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "heartbeats/s")
	})
}
