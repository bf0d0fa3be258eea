package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/controller/metadata"
)

func TestLivenessResetGivesFreshSessions(t *testing.T) {
	l := newLiveness(100 * time.Millisecond)
	now := time.Now()
	if got := l.expired([]int32{1, 2}, now); len(got) != 0 {
		t.Fatalf("unseen brokers expired at once: %v", got)
	}
	l.touchAt(2, now.Add(100*time.Millisecond))
	if got := l.expired([]int32{1, 2}, now.Add(150*time.Millisecond)); !slices.Equal(got, []int32{1}) {
		t.Fatalf("expired %v, want [1]", got)
	}
	// Leadership changed: every session starts again from the first check.
	l.reset()
	if got := l.expired([]int32{1, 2}, now.Add(time.Second)); len(got) != 0 {
		t.Fatalf("after reset expired %v, want none", got)
	}
	if got := l.expired([]int32{1, 2}, now.Add(time.Second+150*time.Millisecond)); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("fresh sessions did not expire: %v", got)
	}
	if !l.alive(3) {
		t.Fatal("a broker never heard from by this leader counts as alive")
	}
}

func TestLivenessNextExpiry(t *testing.T) {
	l := newLiveness(time.Second)
	now := time.Now()
	if got := l.nextExpiry([]int32{1}, now); !got.Equal(now.Add(time.Second)) {
		t.Fatalf("unseen broker: next expiry %v after now, want a full session", got.Sub(now))
	}
	l.touchAt(1, now.Add(-300*time.Millisecond))
	l.touchAt(2, now.Add(-700*time.Millisecond))
	if got := l.nextExpiry([]int32{1, 2, 3}, now); !got.Equal(now.Add(300 * time.Millisecond)) {
		t.Fatalf("next expiry %v after now, want broker 2's in 300ms", got.Sub(now))
	}
	if got := l.nextExpiry([]int32{1}, now); !got.Equal(now.Add(700 * time.Millisecond)) {
		t.Fatalf("next expiry %v after now, want broker 1's in 700ms", got.Sub(now))
	}
}

// TestLivenessFencesAtSessionExpiry: a broker that falls silent is fenced
// as its session runs out, not up to a check period later. Five brokers
// fall silent 80ms apart; with a fixed check every 400ms (min(session/8,
// heartbeat interval)), whatever the loop's phase, one of them would wait
// at least 320ms past its expiry, and every such wait adds to the
// re-election of the partitions it led.
func TestLivenessFencesAtSessionExpiry(t *testing.T) {
	const session = 3200 * time.Millisecond
	c := newCtrlCluster(t, clusterOpts{n: 1, tune: func(cfg *Config) {
		cfg.BrokerSessionTimeout = session
		cfg.BrokerHeartbeatInterval = 3 * time.Second
	}})
	ctl := c.leader()
	epochs := registerBrokers(t, ctl, 5, 0)
	ids := []int32{101, 102, 103, 104, 105}
	last := map[int32]time.Time{}
	for i, id := range ids {
		if i > 0 {
			time.Sleep(80 * time.Millisecond) // pacing the load, not waiting for an event
		}
		if _, err := ctl.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: id, BrokerEpoch: epochs[id], CurrentMetadataOffset: 1 << 40}); err != nil {
			t.Fatal(err)
		}
		last[id] = time.Now() // the session was renewed before the answer
	}
	fencedAt := map[int32]time.Time{}
	deadline := time.Now().Add(session + testWait)
	for len(fencedAt) < len(ids) && time.Now().Before(deadline) {
		ctl.fsm.read(func(st *metadata.State) {
			for _, id := range ids {
				if b, ok := st.Broker(id); ok && b.Fenced && fencedAt[id].IsZero() {
					fencedAt[id] = time.Now()
				}
			}
		})
		time.Sleep(time.Millisecond)
	}
	for _, id := range ids {
		if fencedAt[id].IsZero() {
			t.Fatalf("broker %d not fenced within %v of its last heartbeat", id, session+testWait)
		}
		late := fencedAt[id].Sub(last[id].Add(session))
		t.Logf("broker %d fenced %v after its session ran out", id, late.Round(time.Millisecond))
		if late < -50*time.Millisecond {
			t.Errorf("broker %d fenced %v before its session ran out", id, -late)
		}
		if late > 150*time.Millisecond {
			t.Errorf("broker %d fenced %v after its session ran out, want within 150ms", id, late)
		}
	}
}

// TestLivenessNewLeaderStartsSessionsWhenReady: a new leader gives every
// broker a fresh session (it cannot know their last heartbeats) starting
// as soon as it is ready, not at the liveness loop's next round (up to a
// check period later: 500ms here, 1.125s with Kafka's defaults), so a
// broker lost together with the old leader is fenced one session timeout
// after the election.
func TestLivenessNewLeaderStartsSessionsWhenReady(t *testing.T) {
	const session = 4 * time.Second // check period min(session/8, heartbeat interval) = 500ms
	c := newCtrlCluster(t, clusterOpts{n: 1, tune: func(cfg *Config) {
		cfg.BrokerSessionTimeout = session
		cfg.BrokerHeartbeatInterval = 3 * time.Second
	}})
	registerBrokers(t, c.leader(), 1, 0)
	c.stop(1)
	c.start(1)
	ctl := c.ctrls[1]
	ctl.node.campaign() // elected at once, not after an election timeout
	var ready time.Time
	deadline := time.Now().Add(testWait)
	for ready.IsZero() && time.Now().Before(deadline) {
		if ctl.node.isLeaderReady() {
			ready = time.Now()
		}
		time.Sleep(time.Millisecond)
	}
	if ready.IsZero() {
		t.Fatal("restarted controller not leading")
	}
	var fenced time.Time
	deadline = ready.Add(session + testWait)
	for fenced.IsZero() && time.Now().Before(deadline) {
		ctl.fsm.read(func(st *metadata.State) {
			if b, ok := st.Broker(101); ok && b.Fenced {
				fenced = time.Now()
			}
		})
		time.Sleep(time.Millisecond)
	}
	if fenced.IsZero() {
		t.Fatalf("silent broker not fenced within %v of the election", session+testWait)
	}
	late := fenced.Sub(ready.Add(session))
	t.Logf("silent broker fenced %v after a session timeout from the new leader's readiness", late.Round(time.Millisecond))
	if late < -20*time.Millisecond || late > 150*time.Millisecond {
		t.Fatalf("silent broker fenced %v after a session from the new leader's readiness, want within [0, 150ms]", late)
	}
}
