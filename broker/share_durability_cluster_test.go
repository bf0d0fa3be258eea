package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/internal/netfault"
	"github.com/strata-io/strata/internal/testutil"
)

// shareGate holds consumers between receiving records and acknowledging
// them while the test moves a leader: what they hold is acquired and not
// acknowledged across the fault.
type shareGate struct {
	mu      sync.Mutex
	closed  bool
	closeAt int           // > 0: the gate closes once this many records are accepted
	open    chan struct{} // closed when the gate opens again
	waiting int           // consumers blocked in wait holding records
}

func newShareGate() *shareGate { return &shareGate{open: make(chan struct{})} }

// closeWhen closes the gate once n records are accepted (as the consumers
// tell wait): the consumers do not run ahead while the test is busy.
func (g *shareGate) closeWhen(n int) {
	g.mu.Lock()
	g.closeAt = n
	g.mu.Unlock()
}

// reopen opens the gate, to close again at closeAt (0: stays open).
func (g *shareGate) reopen(closeAt int) {
	g.mu.Lock()
	if g.closed {
		g.closed = false
		close(g.open)
	}
	g.closeAt = closeAt
	g.mu.Unlock()
}

func (g *shareGate) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// wait blocks while the gate is closed (or until ctx ends); accepted is
// how many records are accepted so far.
func (g *shareGate) wait(ctx context.Context, accepted int) {
	g.mu.Lock()
	if !g.closed && g.closeAt > 0 && accepted >= g.closeAt {
		g.closed, g.closeAt, g.open = true, 0, make(chan struct{})
	}
	if !g.closed {
		g.mu.Unlock()
		return
	}
	g.waiting++
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
}

// shareLedger is what the consumers of TestShareDurableAcrossLeaderAndCoordinatorRestart
// saw and what the brokers confirmed.
type shareLedger struct {
	mu sync.Mutex
	// counts are the delivery counts of every delivery of an offset, in
	// order; phases the fault phase each was seen in.
	counts map[int64][]int16
	phases map[int64][]int
	// accepted counts confirmed accepts (the acknowledgement flushed and
	// answered without error); acceptSent marks accepts whose outcome
	// is unknown (an error came back: stale after a leader move, the
	// coordinator away); released is the delivery count of the last
	// confirmed release.
	accepted   map[int64]int
	acceptSent map[int64]bool
	released   map[int64]int16
	// confirmed are the delivery counts of the deliveries whose
	// acknowledgements the broker confirmed; unconfirmed counts the
	// others (stale copies, or acks lost to a fault).
	confirmed   map[int64][]int16
	unconfirmed int
	violations  []string
}

// shareSeen is what the ledger held for a record when it was delivered.
type shareSeen struct {
	count          int16
	acceptedBefore int   // confirmed accepts by then
	released       int16 // count of the last confirmed release by then (-1 none)
	last           int16 // count of the last confirmed delivery by then (-1 none)
}

func (l *shareLedger) violate(format string, args ...any) {
	if len(l.violations) < 20 {
		l.violations = append(l.violations, fmt.Sprintf(format, args...))
	}
}

// TestShareDurableAcrossLeaderAndCoordinatorRestart: issue 19's
// durability claim end to end, on the real path (share-partition leader
// → RPC persister over the inter-broker listener → share coordinator →
// __share_group_state at RF=3). Two kgo share consumers consume a topic
// at RF=3, accepting some records and releasing others (a record is
// accepted at its first delivery if its offset is even, at its second if
// offset%4 == 1, at its third or later always). Twice the consumers are
// held between receiving and acknowledging a batch while (a) the
// share-partition's leader goes down and comes back, then (b) the broker
// leading the key's __share_group_state partition restarts; "shutdown"
// closes them, "power-loss" crashes them (links cut, unsynced bytes
// lost). Checked, for every delivery whose acknowledgement the broker
// confirmed: it is not of a record whose accept was confirmed before it
// came; a record whose release was confirmed at delivery count c comes
// back with a count above c (counts carry over the leader change and the
// restart, never restart at 1); counts never go down; and the group ends
// with every record accepted exactly once, its durable share-partition
// start offset past them all. A delivery whose acknowledgement fails is
// not judged: after a power loss it can be a copy kgo fetched ahead from
// the dead leader, whose acquisition died with it (acquisitions are not
// durable, in Kafka either) while the new leader delivered the records
// again.
func TestShareDurableAcrossLeaderAndCoordinatorRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	t.Run("shutdown", func(t *testing.T) { testShareDurable(t, false) })
	t.Run("power-loss", func(t *testing.T) { testShareDurable(t, true) })
}

// testShareDurable is TestShareDurableAcrossLeaderAndCoordinatorRestart;
// with crash, brokers 2 and 3 are on a vfs.MemFS behind proxies and lose
// power (their links cut at once, their unsynced bytes gone) instead of
// shutting down.
func testShareDurable(t *testing.T, crash bool) {
	settings := map[string]string{
		"group.coordinator.rebalance.protocols": "classic,consumer,share",
		"group.share.delivery.count.limit":      "10", // no record archived: every one must end accepted
		"share.coordinator.write.timeout.ms":    "5000",
	}
	for _, m := range []map[string]string{replicatedGroupSettings, shareProps} {
		for k, v := range m {
			settings[k] = v
		}
	}
	var c *testCluster
	down := func(id int32) {
		if crash {
			c.crash(id, 0, rand.New(rand.NewPCG(uint64(id), 19)))
		} else {
			c.stop(id)
		}
	}
	if crash {
		// Every link through a proxy, so that a crash cuts the node's
		// links at once (nothing it does after reaches anyone).
		nw := netfault.New(netfault.Refuse)
		t.Cleanup(func() { nw.Close() })
		c = startProxiedCluster(t, 3, settings, nw, 2, 3)
	} else {
		c = startCluster(t, 3, settings)
	}
	admin := c.client()
	// The share-partition's leader is broker 2; once it is shut down,
	// broker 1 (next in the replica list) leads.
	createAssigned(t, admin, "q", nil, []int32{2, 1, 3})
	c.waitFullISR("q", 0)
	n1 := c.node(1)
	ctx := testCtx(t)
	if err := n1.shares.ensureTopic(ctx); err != nil {
		t.Fatal(err)
	}
	tid := topicID(t, n1, "q")
	// A group whose __share_group_state partition broker 3 leads: neither
	// the share-partition's leader nor the controller.
	var key share.Key
	var idx int32 = -1
	for i := 0; i < 1000 && idx < 0; i++ {
		k := share.Key{Group: fmt.Sprintf("dur-%d", i), TopicID: tid, Partition: 0}
		if j := sharePartitionFor(k, 3); c.leaderOf(shareStateTopic, j) == 3 {
			key, idx = k, j
		}
	}
	if idx < 0 {
		t.Fatal("no share key whose state partition broker 3 leads")
	}
	c.waitFullISR(shareStateTopic, idx)
	group := key.Group
	setGroupConfigs(t, admin, group, "share.auto.offset.reset", "earliest")

	// Batches of 10 records: a share fetch acquires whole batches.
	const total, batch = 1000, 10
	for i := 0; i < total; i += batch {
		var rs []*kgo.Record
		for j := i; j < i+batch; j++ {
			rs = append(rs, &kgo.Record{Topic: "q", Value: []byte(strconv.Itoa(j))})
		}
		if err := admin.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	l := &shareLedger{counts: map[int64][]int16{}, phases: map[int64][]int{}, accepted: map[int64]int{},
		acceptSent: map[int64]bool{}, released: map[int64]int16{}, confirmed: map[int64][]int16{}}
	var phase atomic.Int32
	gate := newShareGate()
	gate.closeWhen(total / 4)
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var where [2]atomic.Value // what each consumer is doing, for a failure's message
	var earlyErrs atomic.Int64
	for ci := range 2 {
		var ackErr atomic.Bool
		cl := c.client(kgo.ShareGroup(group), kgo.ConsumeTopics("q"), kgo.ShareMaxRecords(batch),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				if rs.Error() != nil {
					ackErr.Store(true)
					if w, _ := where[ci].Load().(string); w != "flush" {
						earlyErrs.Add(1) // drained before FlushAcks (see below)
					}
				}
			}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				where[ci].Store("poll")
				recs := cl.PollFetches(cctx).Records()
				if len(recs) == 0 {
					continue
				}
				ph := int(phase.Load())
				// What the ledger held when each record came: judged once
				// the broker confirms this delivery's acknowledgement.
				// A delivery whose acknowledgement fails may be a stale
				// copy: kgo buffers what it fetched ahead from the old
				// leader and hands it out after the leader died, the
				// acquisition lost with it (acquisitions are not durable,
				// in Kafka either); the new leader has meanwhile
				// delivered the same records. Such a copy's acks go to
				// no one, so it is counted, not judged.
				seen := make([]shareSeen, len(recs))
				l.mu.Lock()
				for i, r := range recs {
					o := r.Offset
					seen[i] = shareSeen{count: int16(r.DeliveryCount()), acceptedBefore: l.accepted[o], released: -1, last: -1}
					if rc, ok := l.released[o]; ok {
						seen[i].released = rc
					}
					if cs := l.confirmed[o]; len(cs) > 0 {
						seen[i].last = cs[len(cs)-1]
					}
					l.counts[o] = append(l.counts[o], seen[i].count)
					l.phases[o] = append(l.phases[o], ph)
				}
				accepted := len(l.accepted)
				l.mu.Unlock()
				where[ci].Store(fmt.Sprint("gate ", len(recs)))
				gate.wait(cctx, accepted) // a fault may happen here, the batch acquired and not acknowledged
				// Cleared before the first Ack, not after the last: kgo may
				// drain an ack at once (it wakes the source), and an ack it
				// drops as stale (acquired from a leader that has since
				// moved) reports its error to the callback then, before
				// FlushAcks is called; cleared after, such an error was
				// lost and the dropped accept counted as confirmed.
				ackErr.Store(false)
				accept := make([]bool, len(recs))
				for i, r := range recs {
					o, dc := r.Offset, r.DeliveryCount()
					accept[i] = dc >= 3 || o%2 == 0 || (dc == 2 && o%4 == 1)
					if accept[i] {
						r.Ack(kgo.AckAccept)
					} else {
						r.Ack(kgo.AckRelease)
					}
				}
				where[ci].Store("flush")
				fctx, fcancel := context.WithTimeout(cctx, testWait)
				err := cl.FlushAcks(fctx)
				fcancel()
				ok := err == nil && !ackErr.Load()
				l.mu.Lock()
				for i, r := range recs {
					o, sn := r.Offset, seen[i]
					if !ok {
						l.unconfirmed++
					} else {
						if sn.acceptedBefore > 0 {
							l.violate("offset %d delivered again (count %d, phase %d, consumer %d) after a confirmed accept, and this delivery's acknowledgement confirmed too; counts so far %v", o, sn.count, ph, ci, l.counts[o])
						}
						if sn.last >= 0 && sn.count < sn.last {
							l.violate("offset %d delivered with count %d after count %d (phase %d)", o, sn.count, sn.last, ph)
						}
						if sn.released >= 0 && sn.count <= sn.released {
							l.violate("offset %d released at count %d came back with count %d (phase %d): the count did not carry over", o, sn.released, sn.count, ph)
						}
						l.confirmed[o] = append(l.confirmed[o], sn.count)
					}
					switch {
					case ok && accept[i]:
						l.accepted[r.Offset]++
					case ok:
						l.released[r.Offset] = int16(r.DeliveryCount())
					case accept[i]:
						l.acceptSent[r.Offset] = true
					}
				}
				l.mu.Unlock()
			}
		}()
	}
	progress := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.accepted)
	}
	// hold waits (bounded) for a consumer to be held at the closed gate
	// with records, so the fault hits records acquired and not
	// acknowledged.
	hold := func(what string) {
		testutil.Eventually(t, 2*testWait, func() bool { return gate.held() > 0 }, "a consumer held with records before %s (%v %v, %d accepted)", what, where[0].Load(), where[1].Load(), progress())
		// The other consumer too, if it gets there within a second
		// (most runs): wait for it, not for a fixed time.
		for deadline := time.Now().Add(time.Second); gate.held() < 2 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}

	// (a) once a quarter of the records is accepted, the share-partition's
	// leader shuts down; the consumers go on with its successor.
	hold("the leader change")
	held := gate.held()
	phase.Store(1)
	if old := c.leaderOf("q", 0); old != 2 {
		t.Fatalf("q-0 led by %d, want 2", old)
	}
	down(2)
	c.waitNewLeader("q", 0, 2)
	// The gate closes again two batches on, so that records are left for
	// after the restart in (b).
	gate.reopen(progress() + 2*batch)
	c.start(2)

	// (b) the broker leading the key's __share_group_state partition
	// restarts.
	hold("the coordinator restart")
	held2 := gate.held()
	c.waitFullISR("q", 0)
	c.waitFullISR(shareStateTopic, idx)
	coord := c.leaderOf(shareStateTopic, idx)
	if coord == 1 || coord == c.leaderOf("q", 0) {
		t.Fatalf("state partition %d led by %d, q-0 by %d: want another broker than the controller and the share-partition's leader", idx, coord, c.leaderOf("q", 0))
	}
	phase.Store(2)
	down(coord)
	c.waitNewLeader(shareStateTopic, idx, coord)
	c.start(coord)
	phase.Store(3)
	gate.reopen(0)

	testutil.Eventually(t, 2*testWait, func() bool {
		st, err := n1.sharePersister.Read(context.Background(), key, -1)
		return err == nil && st.StartOffset == total
	}, "the durable share-partition start offset reaches %d", total)
	cancel()
	wg.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		t.Error(v)
	}
	var missing, twice []int64
	carried := map[int]int{} // phase -> redeliveries there of records delivered in an earlier phase, their count carried over
	for o := int64(0); o < total; o++ {
		switch n := l.accepted[o]; {
		case n > 1:
			twice = append(twice, o)
		case n == 0:
			// Accepted with the outcome unknown, and never delivered
			// again: the accept took (the durable start offset is past it).
			if !l.acceptSent[o] {
				missing = append(missing, o)
			}
		}
		cs, ps := l.counts[o], l.phases[o]
		for i := 1; i < len(cs); i++ {
			// Delivered again in a later phase with a count carried
			// over (not started again at 1).
			if ps[i] > ps[i-1] && cs[i] >= 2 && cs[i] >= cs[i-1] {
				carried[ps[i]]++
			}
		}
	}
	if len(twice) > 0 {
		t.Errorf("offsets accepted twice: %v", twice)
	}
	if len(missing) > 0 {
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
		t.Errorf("offsets never accepted: %v", missing)
	}
	if carried[1] == 0 {
		t.Errorf("no record delivered before the leader change came back after it with its delivery count carried over")
	}
	st, err := n1.sharePersister.Read(context.Background(), key, -1)
	if err != nil || st.StartOffset != total || len(st.Batches) != 0 {
		t.Errorf("durable state at the end: %+v %v, want start %d and nothing in flight", st, err, total)
	}
	unknown := 0
	for range l.acceptSent {
		unknown++
	}
	t.Logf("held across the leader change: %d consumer(s); across the coordinator restart: %d; accepts with unknown outcome: %d; deliveries whose acks were not confirmed: %d (ack errors reported before FlushAcks: %d); redeliveries in a later phase with the count carried over, per phase: %v",
		held, held2, unknown, l.unconfirmed, earlyErrs.Load(), carried)
}
