package consumer

import (
	"fmt"
	"reflect"
	"testing"
)

// TestReplayResumesWithoutRebalance: a coordinator that rebuilds a group
// from its records (failover, restart) and arms its timers with Loaded
// answers every member's next heartbeat exactly as the live group does,
// writes the same records, and bumps no epoch: no extra rebalance.
func TestReplayResumesWithoutRebalance(t *testing.T) {
	img := TopicImage{}
	for i, n := range []int32{6, 3} {
		top := Topic{Name: fmt.Sprintf("t%d", i), Partitions: n}
		top.ID = topicID(top.Name)
		img[top.Name] = top
	}
	live := NewGroup("g", DefaultConfig())
	var log []Record
	var clients []*simClient
	now := int64(0)
	beat := func(g *Group, c *simClient) Result {
		now++
		return g.Heartbeat(now, c.request("g"), Client{ID: c.id}, img)
	}
	// Three members join; heartbeat twice around so the group is in the
	// middle of a reconciliation (someone still revoking), then a fourth
	// joins.
	for i := range 3 {
		c := &simClient{id: fmt.Sprintf("m%d", i), owned: Assignment{}, names: []string{"t0", "t1"}}
		clients = append(clients, c)
		r := beat(live, c)
		log = append(log, r.Records...)
		c.apply(r.Response)
		if i == 0 {
			continue
		}
		r = beat(live, clients[0])
		log = append(log, r.Records...)
		clients[0].apply(r.Response)
	}
	if live.State() == StateStable {
		t.Fatalf("want the group mid-reconciliation, it is %s", live.State())
	}
	restored := Replay(DefaultConfig(), log)["g"]
	restored.Loaded(now)
	if at, ok := restored.NextDeadline(); !ok || at > now+int64(DefaultConfig().SessionTimeoutMs) {
		t.Fatalf("timers after Loaded: %d %v", at, ok)
	}
	unrevoked := 0
	for id, m := range restored.Members {
		if m.State == UnrevokedPartitions {
			unrevoked++
			if _, ok := restored.rebalance[id]; !ok {
				t.Fatalf("member %s revoking without a rebalance timer after Loaded", id)
			}
		}
	}
	if unrevoked == 0 {
		t.Fatalf("want a member revoking at the failover")
	}
	for round := range 4 {
		for _, c := range clients {
			now++
			req := c.request("g")
			a := live.Heartbeat(now, req, Client{ID: c.id}, img)
			b := restored.Heartbeat(now, req, Client{ID: c.id}, img)
			if !reflect.DeepEqual(a.Response, b.Response) {
				t.Fatalf("round %d %s: responses differ:\nlive     %+v\nrestored %+v", round, c.id, a.Response, b.Response)
			}
			if len(a.Records) != len(b.Records) {
				t.Fatalf("round %d %s: %d records live, %d restored", round, c.id, len(a.Records), len(b.Records))
			}
			for i := range a.Records {
				ka, va := EncodeRecord(a.Records[i])
				kb, vb := EncodeRecord(b.Records[i])
				if string(ka) != string(kb) || string(va) != string(vb) {
					t.Fatalf("round %d %s: record %d differs", round, c.id, i)
				}
				if _, bump := b.Records[i].(*GroupMetadataRecord); bump {
					t.Fatalf("round %d %s: the restored group bumped its epoch", round, c.id)
				}
			}
			c.apply(a.Response)
		}
	}
	if live.State() != StateStable || restored.State() != StateStable {
		t.Fatalf("not stable: live %s restored %s", live.State(), restored.State())
	}
}
