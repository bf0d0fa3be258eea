package consumer

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/google/uuid"
)

// benchGroup builds a stable group of n members on one topic of 2n
// partitions, driven by simulated clients.
func benchGroup(b *testing.B, n int) (*Group, TopicImage, []*simClient, *int64) {
	top := Topic{Name: "t", ID: topicID("t"), Partitions: int32(2 * n)}
	img := TopicImage{"t": top}
	g := NewGroup("g", DefaultConfig())
	now := new(int64)
	clients := make([]*simClient, n)
	for i := range clients {
		clients[i] = &simClient{id: "member-" + strconv.Itoa(i), owned: Assignment{}, names: []string{"t"}}
		*now++
		clients[i].apply(g.Heartbeat(*now, clients[i].request("g"), Client{ID: "c"}, img).Response)
	}
	converge(b, g, img, clients, now)
	return g, img, clients, now
}

// converge heartbeats every client in turn until the group is stable and
// returns the number of heartbeats it took.
func converge(b *testing.B, g *Group, img TopicImage, clients []*simClient, now *int64) int {
	beats := 0
	for round := 0; g.State() != StateStable; round++ {
		if round > 10 {
			b.Fatalf("not stable after %d rounds: %s", round, g.State())
		}
		for _, c := range clients {
			*now++
			c.apply(g.Heartbeat(*now, c.request("g"), Client{ID: "c"}, img).Response)
			beats++
		}
	}
	return beats
}

// BenchmarkJoinToStable: one member joins a stable group of n members;
// the op is the time from its join until every member reconciled to the
// new target (all heartbeats included), the KIP-848 counterpart of the
// classic BenchmarkRebalance in broker/group. The leave that restores the
// group between ops is not timed.
func BenchmarkJoinToStable(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run("members="+strconv.Itoa(n), func(b *testing.B) {
			g, img, clients, now := benchGroup(b, n)
			beats := 0
			b.ResetTimer()
			for i := range b.N {
				c := &simClient{id: fmt.Sprintf("joiner-%d", i), owned: Assignment{}, names: []string{"t"}}
				all := append(clients[:n:n], c)
				*now++
				c.apply(g.Heartbeat(*now, c.request("g"), Client{ID: "c"}, img).Response)
				beats += converge(b, g, img, all, now)
				b.StopTimer()
				c.epoch = LeaveEpoch
				g.Heartbeat(*now, c.request("g"), Client{ID: "c"}, img)
				converge(b, g, img, clients, now)
				b.StartTimer()
			}
			b.ReportMetric(float64(beats)/float64(b.N), "heartbeats/op")
		})
	}
}

// BenchmarkHeartbeat: a steady-state heartbeat of a stable member (what a
// coordinator spends per member every heartbeat interval).
func BenchmarkHeartbeat(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run("members="+strconv.Itoa(n), func(b *testing.B) {
			g, img, clients, now := benchGroup(b, n)
			b.ResetTimer()
			for i := range b.N {
				c := clients[i%n]
				*now++
				if r := g.Heartbeat(*now, c.request("g"), Client{ID: "c"}, img); r.Response.ErrorCode != 0 || len(r.Records) > 0 {
					b.Fatalf("steady heartbeat: error %d, %d records", r.Response.ErrorCode, len(r.Records))
				}
			}
		})
	}
}

// BenchmarkAssign: one target computation after a member joined a group
// of n (one topic, 2n partitions), from the previous target.
func BenchmarkAssign(b *testing.B) {
	for _, as := range Assignors() {
		for _, n := range []int{10, 100, 1000} {
			b.Run(as.Name()+"/members="+strconv.Itoa(n), func(b *testing.B) {
				top := Topic{Name: "t", ID: topicID("t"), Partitions: int32(2 * n)}
				in := AssignInput{Topics: map[uuid.UUID]Topic{top.ID: top}}
				for i := range n {
					in.Members = append(in.Members, MemberSpec{ID: "member-" + strconv.Itoa(i), Topics: []uuid.UUID{top.ID}})
				}
				prev, err := as.Assign(in)
				if err != nil {
					b.Fatal(err)
				}
				in = withCurrent(in, prev)
				in.Members = append(in.Members, MemberSpec{ID: "joiner", Topics: []uuid.UUID{top.ID}})
				b.ResetTimer()
				for range b.N {
					if _, err := as.Assign(in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAssignHeterogeneous: uniform with mixed subscriptions, n
// members each on 5 of 10 topics of n/2 partitions, after one joined.
func BenchmarkAssignHeterogeneous(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run("members="+strconv.Itoa(n), func(b *testing.B) {
			in := AssignInput{Topics: map[uuid.UUID]Topic{}}
			var ids []uuid.UUID
			for i := range 10 {
				top := Topic{Name: fmt.Sprintf("t%d", i), Partitions: int32(max(n/2, 1))}
				top.ID = topicID(top.Name)
				in.Topics[top.ID] = top
				ids = append(ids, top.ID)
			}
			for i := range n {
				m := MemberSpec{ID: "member-" + strconv.Itoa(i)}
				for k := range 5 {
					m.Topics = append(m.Topics, ids[(i+k*3)%10])
				}
				in.Members = append(in.Members, m)
			}
			prev, err := Uniform{}.Assign(in)
			if err != nil {
				b.Fatal(err)
			}
			in = withCurrent(in, prev)
			in.Members = append(in.Members, MemberSpec{ID: "joiner", Topics: ids[:5]})
			b.ResetTimer()
			for range b.N {
				if _, err := (Uniform{}).Assign(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
