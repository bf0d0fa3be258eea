package consumer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// simClient is a well-behaved KIP-848 client: it owns exactly what the
// last assignment it received says, and reports that in every heartbeat.
type simClient struct {
	id    string
	epoch int32
	owned Assignment
	names []string
}

func (c *simClient) request(group string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, group, c.id, c.epoch
	req.RebalanceTimeoutMillis = -1
	if c.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = c.names
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	{
		for _, t := range c.owned.topicIDs() {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = t, slices.Clone(c.owned[t])
			req.Topics = append(req.Topics, rt)
		}
	}
	return req
}

func (c *simClient) apply(resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if resp.ErrorCode != 0 {
		// Fenced or unknown: give everything up and rejoin.
		c.epoch, c.owned = 0, Assignment{}
		return
	}
	c.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		c.owned = Assignment{}
		for _, t := range resp.Assignment.Topics {
			for _, p := range t.Partitions {
				c.owned.add(t.TopicID, p)
			}
		}
	}
}

// TestGroupPropertyRevokeBeforeAssign drives random joins, leaves,
// heartbeats and partition additions through well-behaved clients. At
// every step no partition is owned by two clients at once (the
// coordinator hands a partition over only after its owner released it),
// nor held by two members in the coordinator; replaying the records gives
// the live group; and once the clients keep heartbeating, the group
// converges to Stable with every member owning its target.
func TestGroupPropertyRevokeBeforeAssign(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 848))
	for iter := range 100 {
		img := TopicImage{}
		for i := range 1 + rng.IntN(3) {
			top := Topic{Name: fmt.Sprintf("t%d", i), Partitions: int32(1 + rng.IntN(12))}
			top.ID = topicID(top.Name)
			img[top.Name] = top
		}
		var names []string
		for n := range img {
			names = append(names, n)
		}
		slices.Sort(names)
		g := NewGroup("g", DefaultConfig())
		var log []Record
		clients := map[string]*simClient{}
		next := 0
		now := int64(0)
		beat := func(c *simClient) {
			now++
			res := g.Heartbeat(now, c.request("g"), Client{ID: c.id}, img)
			log = append(log, res.Records...)
			c.apply(res.Response)
		}
		check := func(step string) {
			owner := map[tp]string{}
			for _, c := range clients {
				for tt, ps := range c.owned {
					for _, p := range ps {
						if o, ok := owner[tp{tt, p}]; ok {
							t.Fatalf("iter %d %s: partition %s-%d owned by clients %s and %s", iter, step, tt, p, o, c.id)
						}
						owner[tp{tt, p}] = c.id
					}
				}
			}
			held := map[tp]string{}
			for _, m := range g.Members {
				for _, a := range []Assignment{m.Assigned, m.PendingRevocation} {
					for tt, ps := range a {
						for _, p := range ps {
							if o, ok := held[tp{tt, p}]; ok {
								t.Fatalf("iter %d %s: partition %s-%d held by members %s and %s", iter, step, tt, p, o, m.ID)
							}
							held[tp{tt, p}] = m.ID
						}
					}
				}
			}
			if err := sameGroup(g, Replay(DefaultConfig(), log)["g"]); err != nil && len(g.Members) > 0 {
				t.Fatalf("iter %d %s: replay != live: %v", iter, step, err)
			}
		}
		for step := range 60 {
			switch op := rng.IntN(10); {
			case op < 2 || len(clients) == 0:
				c := &simClient{id: fmt.Sprintf("m%d", next), owned: Assignment{}, names: names}
				next++
				clients[c.id] = c
				beat(c)
			case op < 3:
				ids := sortedClientIDs(clients)
				c := clients[ids[rng.IntN(len(ids))]]
				c.epoch = LeaveEpoch
				res := g.Heartbeat(now, c.request("g"), Client{ID: c.id}, img)
				log = append(log, res.Records...)
				delete(clients, c.id)
			case op < 4:
				// A topic grows.
				n := names[rng.IntN(len(names))]
				top := img[n]
				top.Partitions += int32(1 + rng.IntN(3))
				img[n] = top
				log = append(log, g.MetadataChanged(img)...)
			default:
				ids := sortedClientIDs(clients)
				beat(clients[ids[rng.IntN(len(ids))]])
			}
			check(fmt.Sprintf("step %d", step))
		}
		// Everyone keeps heartbeating: the group must converge.
		for round := 0; round < 10 && g.State() != StateStable && len(clients) > 0; round++ {
			for _, id := range sortedClientIDs(clients) {
				beat(clients[id])
				check(fmt.Sprintf("round %d", round))
			}
		}
		if len(clients) == 0 {
			continue
		}
		if g.State() != StateStable {
			t.Fatalf("iter %d: not stable after 10 rounds: %s", iter, g.State())
		}
		for id, c := range clients {
			if !c.owned.Equal(g.Target[id]) {
				t.Fatalf("iter %d: client %s owns %v, target %v", iter, id, c.owned, g.Target[id])
			}
		}
	}
}

func sortedClientIDs(m map[string]*simClient) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
