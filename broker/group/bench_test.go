package group

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkRebalance measures one whole rebalance of a Stable group in the
// state machine alone (no persister, fake clock): every member rejoins
// (the leader first, which starts the rebalance), then syncs, the leader
// with an assignment for everyone.
func BenchmarkRebalance(b *testing.B) {
	for _, members := range []int{10, 100, 1000} {
		b.Run("members="+strconv.Itoa(members), func(b *testing.B) {
			clock := newFakeClock()
			c := NewCoordinator(Options{Clock: clock, Partitions: 1, MinSessionTimeout: time.Second})
			defer c.Close()
			c.SetPartitionState(0, Loaded)
			ctx := context.Background()
			ids := make([]string, members)
			join := func(i int) *kmsg.JoinGroupResponse {
				r := newJoin("g", ids[i], nil, time.Minute, time.Minute, "range", "m")
				r.Version = 3 // no two-step: ids come from the first join
				return c.JoinGroup(ctx, r)
			}
			rebalance := func() {
				var wg sync.WaitGroup
				resps := make([]*kmsg.JoinGroupResponse, members)
				// The leader (or the first member) joins first and starts
				// the rebalance; the rest follow concurrently.
				wg.Add(1)
				go func() { defer wg.Done(); resps[0] = join(0) }()
				for {
					c.mu.Lock()
					started := c.groups["g"].state == PreparingRebalance
					c.mu.Unlock()
					if started {
						break
					}
					time.Sleep(time.Microsecond)
				}
				for i := 1; i < members; i++ {
					wg.Add(1)
					go func() { defer wg.Done(); resps[i] = join(i) }()
				}
				wg.Wait()
				for i, r := range resps {
					if r.ErrorCode != 0 {
						b.Fatalf("join %d: %d", i, r.ErrorCode)
					}
					ids[i] = r.MemberID
				}
				gen := resps[0].Generation
				assign := make([]kmsg.SyncGroupRequestGroupAssignment, members)
				for i, id := range ids {
					assign[i] = kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte("a")}
				}
				for i := range members {
					wg.Add(1)
					go func() {
						defer wg.Done()
						s := kmsg.NewPtrSyncGroupRequest()
						s.Group, s.MemberID, s.Generation = "g", ids[i], gen
						if ids[i] == resps[0].LeaderID {
							s.GroupAssignment = assign
						}
						if r := c.SyncGroup(ctx, s); r.ErrorCode != 0 {
							b.Errorf("sync %d: %d", i, r.ErrorCode)
						}
					}()
				}
				wg.Wait()
			}
			// Start from a Stable group of members with the ids rebalance
			// rejoins with; the first is the leader.
			c.mu.Lock()
			g := newGroup("g", 0, clock.Now())
			c.groups["g"] = g
			for i := range ids {
				ids[i] = "member-" + strconv.Itoa(i)
				g.add(&member{id: ids[i], clientID: "c", rebalanceTimeout: time.Minute, sessionTimeout: time.Minute,
					protocolType: "consumer", protocols: []protocol{{name: "range", metadata: []byte("m")}}})
			}
			g.state, g.generation, g.protocol = Stable, 1, "range"
			c.mu.Unlock()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				rebalance()
			}
		})
	}
}
