package broker

// In-process replication fault tests (issue 14): three brokers, a topic at
// RF=3 with min.insync.replicas=2, an idempotent acks=all franz-go load
// running through each fault, and the internal/deliverycheck verdict on a
// final full read (nothing acknowledged lost, no duplicate, no offset
// holding two values). Each logs its fault-matrix row; bench/faults runs
// them with more rounds (STRATA_TEST_FAULT_ROUNDS) and gathers the rows
// (STRATA_TEST_FAULT_REPORT).

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/deliverycheck"
	"github.com/strata-io/strata/internal/netfault"
	"github.com/strata-io/strata/internal/testutil"
)

// faultSettings make a lost broker fenced within about two seconds and a
// lagging follower leave the ISR within a few.
var faultSettings = map[string]string{
	"broker.session.timeout.ms":    "2000",
	"broker.heartbeat.interval.ms": "200",
	"replica.lag.time.max.ms":      "3000",
	"min.insync.replicas":          "2",
}

var faultTopicConfigs = map[string]string{"min.insync.replicas": "2"}

// TestProxiedClusterCutFencesBroker: in a cluster whose links pass
// netfault proxies, cutting broker 2's link to the controller's IP stops
// its heartbeats (the controller client dials from the broker's own IP)
// and the controller fences it; healing unfences it. Clients reach every
// broker through its advertised proxy.
func TestProxiedClusterCutFencesBroker(t *testing.T) {
	nw := netfault.New(netfault.Refuse)
	t.Cleanup(func() { nw.Close() })
	c := startProxiedCluster(t, 2, faultSettings, nw)
	fenced := func(want bool) func() bool {
		return func() bool {
			var f bool
			c.ctl.view(func(st *metadata.State) {
				b, ok := st.Broker(2)
				f = !ok || b.Fenced
			})
			return f == want
		}
	}
	createAssigned(t, c.client(), "via-proxy", nil, []int32{2})
	if fenced(true)() {
		t.Fatal("broker 2 fenced before the cut")
	}
	nw.Cut(nodeIP(2), nodeIP(1))
	testutil.Eventually(t, testWait, fenced(true), "broker 2 fenced after its link to the controller was cut")
	nw.Heal()
	testutil.Eventually(t, testWait, fenced(false), "broker 2 unfenced after the heal")
}

// TestCutLeaderStepsAsideForClients: a leader cut off from the controller
// and its followers but not from clients is fenced by the controller, which
// elects another ISR member; the old one's view still names itself. Once
// broker.session.timeout.ms has passed since its last answered heartbeat it
// must stop claiming the partition to clients — Metadata without a leader
// (LEADER_NOT_AVAILABLE, so clients ask another broker at once), produce
// refused with NOT_LEADER_OR_FOLLOWER rather than held to REQUEST_TIMED_OUT
// (which kgo and the Java client retry at the same leader without asking
// for metadata), no coordinator named on itself — and lead again once a
// controller answers. Before this, a producer could retry the cut leader
// for as long as its metadata refreshes kept landing on it.
func TestCutLeaderStepsAsideForClients(t *testing.T) {
	nw := netfault.New(netfault.Blackhole)
	t.Cleanup(func() { nw.Close() })
	c := startProxiedCluster(t, 3, faultSettings, nw)
	const topic = "steps-aside"
	createAssigned(t, c.client(), topic, faultTopicConfigs, []int32{2, 3, 1})
	c.waitFullISR(topic, 0)
	var id [16]byte
	c.ctl.view(func(st *metadata.State) {
		tp, _ := st.TopicByName(topic)
		id = tp.ID
	})
	leaderSeen := func(rc *rawConn) (int32, int16) {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Topics) == 0 {
			return -2, -1
		}
		if rt := resp.Topics[0]; len(rt.Partitions) == 0 {
			return -2, rt.ErrorCode // the topic not in this broker's view yet
		}
		p := resp.Topics[0].Partitions[0]
		return p.Leader, p.ErrorCode
	}
	rc := dialRaw(t, c.nodes[2]) // from 127.0.0.1: no link cut
	// The controller's full ISR does not mean broker 2 has applied the
	// topic to its own view yet: wait for it to name itself.
	testutil.Eventually(t, testWait, func() bool {
		l, code := leaderSeen(rc)
		return l == 2 && code == 0
	}, "broker 2 to show itself the partition's leader before the cut")

	nw.Isolate(nodeIP(2))
	cut := time.Now()
	c.waitNewLeader(topic, 0, 2)
	session := 2 * time.Second // faultSettings' broker.session.timeout.ms
	testutil.Eventually(t, testWait, func() bool {
		l, code := leaderSeen(rc)
		return l == -1 && code == kerr.LeaderNotAvailable.Code
	}, "the cut leader's Metadata to show the partition without a leader")
	if d := time.Since(cut); d < session-200*time.Millisecond {
		t.Fatalf("broker 2 stepped aside %v after the cut, before broker.session.timeout.ms", d)
	}
	start := time.Now()
	resp := rc.roundTrip(produceReq(9, topic, id, 0, -1, recordBatch(time.Now().UnixMilli(), "zombie")))
	if code, _ := produceErr(t, resp); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("acks=-1 produce to the cut leader: error %d, want NOT_LEADER_OR_FOLLOWER (6)", code)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the refusal took %v: it was held for the request timeout", d)
	}

	nw.Heal()
	c.waitFullISR(topic, 0)
	testutil.Eventually(t, testWait, func() bool {
		l, code := leaderSeen(rc)
		return l >= 0 && code == 0
	}, "broker 2, healed, to show the partition's leader again")
}

// TestFaultLeaderCutFromPeersAndController cuts the leader of an RF=3
// partition from the other brokers and the controller (clients still
// reach it): the controller fences it and elects another ISR member, the
// load moves there; healed, the old leader rejoins as a follower,
// truncates what it appended alone, and the ISR is full again. Nothing
// acknowledged is lost or duplicated.
func TestFaultLeaderCutFromPeersAndController(t *testing.T) {
	runLeaderCut(t, false)
}

// TestFaultLeaderPartitionedSilently is the cut above as a firewall
// dropping packets makes it: the old leader's open connections (its
// metadata watch among them) are not closed but go silent, and stay dead
// after the heal; nothing tells the broker but its own deadlines. It must
// notice its dead watch stream, learn it was deposed and rejoin within a
// few seconds of the heal (before the watch stream had a read deadline
// and keepalives, it waited on the dead stream forever: the ISR never
// became full again).
func TestFaultLeaderPartitionedSilently(t *testing.T) {
	runLeaderCut(t, true)
}

// runLeaderCut is the two tests above: each round isolates the leader
// (silently: netfault.IsolateSilently), waits for another leader and more
// acknowledgements there, heals, and waits for the full ISR. ISR
// recovery is measured from the heal.
func runLeaderCut(t *testing.T, silently bool) {
	nw := netfault.New(netfault.Blackhole)
	t.Cleanup(func() { nw.Close() })
	c := startProxiedCluster(t, 3, faultSettings, nw)
	topic, fault := "cut-leader", "cut leader from followers and controller (in-process)"
	if silently {
		topic, fault = "silent-cut-leader", "partition the leader silently, packets dropped (in-process)"
	}
	createAssigned(t, c.client(), topic, faultTopicConfigs, []int32{2, 3, 1})
	c.waitFullISR(topic, 0)

	rc := deliverycheck.NewRecorder(true)
	cl, load := c.faultProducer(topic, rc, "cut")
	res := &deliverycheck.FaultResult{Fault: fault}
	for round := range faultRounds(1) {
		waitAcked(t, load, load.Stats().Acked+300)
		old := c.leaderOf(topic, 0)
		if old == 1 {
			// Broker 1 hosts the controller: cutting it off the others
			// fences them instead. Move on to a round it does not lead.
			t.Logf("round %d: broker 1 (the controller's) leads; no cut", round)
			continue
		}
		at := time.Now()
		if silently {
			nw.IsolateSilently(nodeIP(old))
		} else {
			nw.Isolate(nodeIP(old))
		}
		res.Reelection = append(res.Reelection, c.waitNewLeader(topic, 0, old).Sub(at))
		waitAcked(t, load, load.Stats().Acked+300) // the load goes on at the new leader
		healed := time.Now()
		nw.Heal()
		res.ISRRecovery = append(res.ISRRecovery, c.waitFullISR(topic, 0).Sub(healed))
		t.Logf("round %d: broker %d cut for %v; new leader after %v, full ISR %v after the heal", round, old,
			healed.Sub(at).Round(time.Millisecond), res.Reelection[len(res.Reelection)-1].Round(time.Millisecond),
			res.ISRRecovery[len(res.ISRRecovery)-1].Round(time.Millisecond))
		res.Runs++
	}
	finishFaultRun(t, c, cl, topic, load, rc, res)
}

// TestFaultFollowerThenLeaderLosePageCache: a follower loses its unflushed
// page cache (MemFS crash clone, nothing unsynced kept) and restarts under
// load: it truncates by leader epoch, catches up and rejoins the ISR;
// then the leader loses its own, another ISR member is elected, and the
// old leader comes back as a follower. Nothing acknowledged is lost.
func TestFaultFollowerThenLeaderLosePageCache(t *testing.T) {
	nw := netfault.New(netfault.Refuse)
	t.Cleanup(func() { nw.Close() })
	c := startProxiedCluster(t, 3, faultSettings, nw, 2, 3)
	const topic = "lose-cache"
	createAssigned(t, c.client(), topic, faultTopicConfigs, []int32{2, 3, 1})
	c.waitFullISR(topic, 0)
	rng := rand.New(rand.NewPCG(14, 5))

	rc := deliverycheck.NewRecorder(true)
	cl, load := c.faultProducer(topic, rc, "cache")
	follower := &deliverycheck.FaultResult{Fault: "follower loses its page cache (MemFS crash clone)"}
	leader := &deliverycheck.FaultResult{Fault: "then the leader loses its page cache"}
	for round := range faultRounds(1) {
		// A follower on a MemFS (brokers 2 and 3 are).
		waitAcked(t, load, load.Stats().Acked+300)
		st, _ := c.partitionState(topic, 0)
		var f int32 = -1
		for _, id := range st.Replicas {
			if id != st.Leader && id != 1 {
				f = id
			}
		}
		if f < 0 {
			t.Fatalf("round %d: no MemFS follower in %+v", round, st)
		}
		at := c.crash(f, 0, rng)
		c.start(f)
		follower.ISRRecovery = append(follower.ISRRecovery, c.waitFullISR(topic, 0).Sub(at))
		follower.Runs++

		waitAcked(t, load, load.Stats().Acked+300)
		old := c.leaderOf(topic, 0)
		if old == 1 {
			t.Logf("round %d: broker 1 (on the OS file system) leads; no leader crash", round)
			continue
		}
		at = c.crash(old, 0, rng)
		leader.Reelection = append(leader.Reelection, c.waitNewLeader(topic, 0, old).Sub(at))
		waitAcked(t, load, load.Stats().Acked+300)
		c.start(old)
		leader.ISRRecovery = append(leader.ISRRecovery, c.waitFullISR(topic, 0).Sub(at))
		leader.Runs++
	}
	finishFaultRun(t, c, cl, topic, load, rc, leader)
	follower.Acked = leader.Acked // one load for both faults
	t.Logf("%s\n%s", deliverycheck.MatrixHeader(), follower.Row())
	if err := follower.Save(faultReportPath()); err != nil {
		t.Error(err)
	}
}

// TestFaultLeaderCleanBounce stops the leader cleanly (a rolling restart's
// step) and starts it again, repeatedly, under load: another ISR member
// leads meanwhile, the restarted broker rejoins the ISR, and clients see
// only retriable errors: every record is acknowledged in the end.
func TestFaultLeaderCleanBounce(t *testing.T) {
	c := startCluster(t, 3, faultSettings)
	const topic = "bounce-leader"
	createAssigned(t, c.client(), topic, faultTopicConfigs, []int32{2, 3, 1})
	c.waitFullISR(topic, 0)

	rc := deliverycheck.NewRecorder(true)
	cl, load := c.faultProducer(topic, rc, "bounce")
	res := &deliverycheck.FaultResult{Fault: "clean stop and restart of the leader (in-process)"}
	for round := range faultRounds(2) {
		waitAcked(t, load, load.Stats().Acked+300)
		old := c.leaderOf(topic, 0)
		if old == 1 {
			t.Logf("round %d: broker 1 (the controller's) leads; no bounce", round)
			continue
		}
		at := time.Now()
		c.stop(old)
		res.Reelection = append(res.Reelection, c.waitNewLeader(topic, 0, old).Sub(at))
		waitAcked(t, load, load.Stats().Acked+300)
		c.start(old)
		res.ISRRecovery = append(res.ISRRecovery, c.waitFullISR(topic, 0).Sub(at))
		res.Runs++
	}
	finishFaultRun(t, c, cl, topic, load, rc, res)
	if st := load.Stats(); st.Failed != 0 {
		t.Fatalf("%d of %d records failed across clean restarts", st.Failed, st.Sent)
	}
}

// TestFaultBaselineNoFault is the matrix's control row: the same load and
// checks with no fault injected (every replica ends with the same bytes,
// nothing lost or duplicated).
func TestFaultBaselineNoFault(t *testing.T) {
	c := startCluster(t, 3, faultSettings)
	const topic = "baseline"
	createAssigned(t, c.client(), topic, faultTopicConfigs, []int32{2, 3, 1})
	c.waitFullISR(topic, 0)
	rc := deliverycheck.NewRecorder(true)
	cl, load := c.faultProducer(topic, rc, "baseline")
	res := &deliverycheck.FaultResult{Fault: "none (baseline, in-process)", Runs: 1}
	waitAcked(t, load, 2000)
	finishFaultRun(t, c, cl, topic, load, rc, res)
}
