package main

// Process-level replication fault tests (issue 14): three combined-mode
// strata processes, a topic at RF=3 with min.insync.replicas=2, an
// idempotent acks=all franz-go load running through each fault (kill -9
// of the leader, SIGSTOP of the leader past the session timeout, the
// leader cut from the other nodes through internal/netfault), and the
// internal/deliverycheck verdict on a final full read. Each logs its
// fault-matrix row; bench/faults runs them with more rounds
// (STRATA_TEST_FAULT_ROUNDS) and gathers the rows (STRATA_TEST_FAULT_REPORT).

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/deliverycheck"
	"github.com/strata-io/strata/internal/netfault"
	"github.com/strata-io/strata/internal/testutil"
)

// faultProcSettings: clusterSettings (fencing within about two seconds)
// plus Kafka's durable-cluster settings.
var faultProcSettings = append(slices.Clone(clusterSettings), "min.insync.replicas=2", "replica.lag.time.max.ms=3000")

// faultRoundsOr is STRATA_TEST_FAULT_ROUNDS, else def.
func faultRoundsOr(def int) int {
	if n, err := strconv.Atoi(os.Getenv("STRATA_TEST_FAULT_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return def
}

// faultRun is one fault test's load and measurements.
type faultRun struct {
	t     *testing.T
	c     *procCluster
	topic string
	rc    *deliverycheck.Recorder
	cl    *kgo.Client
	load  *deliverycheck.Producer
	res   *deliverycheck.FaultResult
	// stopConsumer stops the group consumer reading along (its polls go
	// into rc: offsets must rise within each assignment generation).
	stopConsumer func()
}

// startFaultRun creates topic (RF=3, min.insync.replicas=2) on c, waits
// for a full ISR and starts the load.
func startFaultRun(t *testing.T, c *procCluster, topic, fault string) *faultRun {
	t.Helper()
	_, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v / %v (%s)", topic, err, resp.Err, resp.ErrMessage)
	}
	c.waitAgreed0(topic, "a full ISR", fullISR0)
	r := &faultRun{t: t, c: c, topic: topic, rc: deliverycheck.NewRecorder(true), res: &deliverycheck.FaultResult{Fault: fault}}
	r.cl = r.newProducerClient()
	r.load = deliverycheck.Produce(context.Background(), r.cl, topic, r.rc, deliverycheck.ProduceOptions{Prefix: topic, MaxInFlight: 100})
	cctx, ccancel := context.WithCancel(context.Background())
	consumed := make(chan error, 1)
	go func() {
		consumed <- deliverycheck.Consume(cctx, c.addrs(), topic+"-group", topic, "group", r.rc, kgo.RetryTimeout(10*time.Second))
	}()
	var once sync.Once
	r.stopConsumer = func() {
		once.Do(func() {
			ccancel()
			select {
			case err := <-consumed:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(procWait):
				t.Error("the group consumer did not stop")
			}
		})
	}
	t.Cleanup(r.stopConsumer)
	return r
}

func (r *faultRun) newProducerClient() *kgo.Client {
	// A frozen (SIGSTOP) or blackholed leader answers nothing: its
	// connections look alive, so only the request timeout (the produce
	// timeout plus the overhead; 10s+10s by default, as Kafka's
	// request.timeout.ms of 30s) gets the producer to the new leader.
	// Shorter ones keep each fault's stall well inside procWait.
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.c.addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RecordDeliveryTimeout(2*procWait), kgo.RetryTimeout(2*procWait),
		kgo.ProduceRequestTimeout(4*time.Second), kgo.RequestTimeoutOverhead(2*time.Second))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(cl.Close)
	return cl
}

// waitMoreAcked waits until the load has n more acknowledgements.
func (r *faultRun) waitMoreAcked(n int64) {
	r.t.Helper()
	want := r.load.Stats().Acked + n
	testutil.Eventually(r.t, procWait, func() bool { return r.load.Stats().Acked >= want }, "%d acknowledgements (load stalled?)", want)
}

// finish stops the load, reads everything back from the healed cluster,
// checks the history, logs and saves the matrix row.
func (r *faultRun) finish() {
	t := r.t
	t.Helper()
	st := r.load.Stop()
	r.stopConsumer()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	reader, err := kgo.NewClient(kgo.SeedBrokers(r.c.addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := deliverycheck.FinalRead(ctx, reader, r.topic, r.rc); err != nil {
		t.Fatal(err)
	}
	rep := deliverycheck.Check(r.rc.History())
	r.res.Add(rep)
	t.Logf("%s: %s; producer %+v", r.res.Fault, rep.Summary(), st)
	t.Logf("%s\n%s", deliverycheck.MatrixHeader(), r.res.Row())
	if err := r.res.Save(os.Getenv("STRATA_TEST_FAULT_REPORT")); err != nil {
		t.Error(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if rep.Acked == 0 {
		t.Fatal("nothing acknowledged")
	}
}

// leader0 is the current leader of partition 0 of r's topic, as every
// node other than except reports it.
func (r *faultRun) leader0(except ...int32) int32 {
	r.t.Helper()
	return r.c.waitAgreed0(r.topic, "a leader", func(p kmsg.MetadataResponseTopicPartition) bool { return p.Leader >= 0 }, except...).Leader
}

// waitNewLeader waits until the nodes other than old report a leader
// other than old, and returns when.
func (r *faultRun) waitNewLeader(old int32) time.Time {
	r.t.Helper()
	r.c.waitAgreed0(r.topic, "a new leader", func(p kmsg.MetadataResponseTopicPartition) bool {
		return p.Leader >= 0 && p.Leader != old
	}, old)
	return time.Now()
}

// waitFullISR waits until every node reports partition 0 of r's topic
// with every replica in its ISR, and returns when.
func (r *faultRun) waitFullISR() time.Time {
	r.t.Helper()
	r.c.waitAgreed0(r.topic, "a full ISR", fullISR0)
	return time.Now()
}

// fullISR0 accepts a partition with a leader and every replica in sync.
func fullISR0(p kmsg.MetadataResponseTopicPartition) bool {
	return p.Leader >= 0 && len(p.ISR) == len(p.Replicas) && len(p.Replicas) > 0
}

// waitAgreed0 polls every node but except, each directly, for partition 0
// of topic until they all report the same leader, leader epoch and ISR and
// ok accepts it, and returns it. Asking one broker is not enough: kadm's
// Metadata answers from kgo's cache for MetadataMinAge (5s: the times
// measured came out as multiples of 5s), and kgo sends a Metadata request
// to any broker it knows — a node just healed or resumed answers from its
// stale view (a full ISR with itself leading) until it has caught up.
func (c *procCluster) waitAgreed0(topic, what string, ok func(kmsg.MetadataResponseTopicPartition) bool, except ...int32) kmsg.MetadataResponseTopicPartition {
	c.t.Helper()
	var seeds []*kgo.Broker
	for _, addr := range c.addrs(except...) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			c.t.Fatal(err)
		}
		defer cl.Close()
		seeds = append(seeds, cl.SeedBrokers()[0])
	}
	var got kmsg.MetadataResponseTopicPartition
	if err := testutil.Within(procWait, func() error {
		var views []kmsg.MetadataResponseTopicPartition
		for _, b := range seeds {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, b)
			cancel()
			if err != nil {
				return fmt.Errorf("%s: metadata: %v", what, err)
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				return fmt.Errorf("%s: no partition 0 of %s in %+v", what, topic, resp.Topics)
			}
			views = append(views, resp.Topics[0].Partitions[0])
		}
		for _, v := range views[1:] {
			if v.Leader != views[0].Leader || v.LeaderEpoch != views[0].LeaderEpoch || !slices.Equal(slices.Sorted(slices.Values(v.ISR)), slices.Sorted(slices.Values(views[0].ISR))) {
				return fmt.Errorf("%s: the nodes disagree on %s-0: %+v", what, topic, views)
			}
		}
		if got = views[0]; !ok(got) {
			return fmt.Errorf("%s: %s-0 is %+v", what, topic, got)
		}
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return got
}

// TestFaultKill9LeaderRepeatedly kills the leader of an RF=3 partition
// with SIGKILL under idempotent acks=all load, waits for another ISR
// member to lead, restarts the killed node on its data directory and
// waits for the ISR to be full again; several rounds, then every
// acknowledged record is read back exactly once (Kafka's replication_test
// hard_bounce).
func TestFaultKill9LeaderRepeatedly(t *testing.T) {
	c := startProcCluster(t, 3, faultProcSettings...)
	r := startFaultRun(t, c, "kill9-leader", "kill -9 the leader (process)")
	for range faultRoundsOr(3) {
		r.waitMoreAcked(500)
		old := r.leader0()
		at := time.Now()
		c.node(old).kill()
		r.res.Reelection = append(r.res.Reelection, r.waitNewLeader(old).Sub(at))
		r.waitMoreAcked(300)
		restarted := time.Now()
		c.restart(old)
		r.res.ISRRecovery = append(r.res.ISRRecovery, r.waitFullISR().Sub(restarted))
		r.res.Runs++
	}
	r.finish()
}

// TestFaultSIGSTOPLeaderPastSessionTimeout freezes the leader's process
// (SIGSTOP) until the controller has fenced it and another ISR member
// leads, then resumes it (SIGCONT): it must rejoin as a follower, truncate
// whatever it appended alone, and never serve data the cluster does not
// hold: reads from it right after the resume are checked with the rest of
// the history (two values at one offset would be an inconsistent offset).
func TestFaultSIGSTOPLeaderPastSessionTimeout(t *testing.T) {
	c := startProcCluster(t, 3, faultProcSettings...)
	r := startFaultRun(t, c, "sigstop-leader", "SIGSTOP the leader past broker.session.timeout.ms (process)")
	for round := range faultRoundsOr(1) {
		r.waitMoreAcked(500)
		old := r.leader0()
		p := c.node(old)
		at := time.Now()
		if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		r.res.Reelection = append(r.res.Reelection, r.waitNewLeader(old).Sub(at))
		r.waitMoreAcked(300)
		resumed := time.Now()
		if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		r.probeStale(old, p.addr, fmt.Sprintf("resumed-%d-%d", old, round))
		r.res.ISRRecovery = append(r.res.ISRRecovery, r.waitFullISR().Sub(resumed))
		r.res.Runs++
	}
	r.finish()
}

// probeStale fetches partition 0 from offset 0 straight from the broker
// of node id at addr (a consumer's Fetch, no leader epoch), again and
// again until its own Metadata names another leader (it learnt it was
// deposed), recording what it serves as polls of consumer name: the
// checker compares them with every other observation.
func (r *faultRun) probeStale(id int32, addr, name string) {
	t := r.t
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	// Every request goes to the seed, the resumed broker itself: kgo would
	// send a Metadata request to any broker it knows.
	seed := cl.SeedBrokers()[0]
	served, fetches := 0, 0
	for gen := int32(0); ; gen++ {
		if gen > 0 { // poll every 20ms until the event, bounded by ctx
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(r.topic)
		mreq.Topics = append(mreq.Topics, mt)
		m, err := mreq.RequestWith(ctx, seed)
		if ctx.Err() != nil {
			t.Fatalf("the resumed broker %d still names itself leader of %s-0 after %v (%d fetches)", id, r.topic, procWait, fetches)
		}
		if err != nil || len(m.Topics) != 1 {
			continue // it may still be resuming its connections
		}
		td := m.Topics[0]
		if len(td.Partitions) > 0 && td.Partitions[0].Leader != id {
			break
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 0, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = r.topic, td.TopicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = 0, 0, -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, seed)
		fetches++
		if err != nil {
			continue
		}
		for _, tp := range resp.Topics {
			for i := range tp.Partitions {
				fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: r.topic, Partition: 0}, &tp.Partitions[i], kgo.DefaultDecompressor(), nil)
				for _, rec := range fp.Records {
					r.rc.Polled(name, gen, rec)
					served++
				}
			}
		}
	}
	t.Logf("the resumed broker %d served %d records in %d fetches before it knew it was deposed", id, served, fetches)
}

// startProxiedProcCluster is startProcCluster with every link between
// nodes through nw: node i binds its PLAINTEXT and CONTROLLER listeners on
// 127.0.0.(i+1) and advertises proxies on the same IP (advertised.listeners,
// controller.quorum.voters), so cutting an IP in nw cuts that node off.
func startProxiedProcCluster(t *testing.T, n int, nw *netfault.Network, extra ...string) *procCluster {
	t.Helper()
	c := &procCluster{t: t}
	var voters []string
	plain := make([]string, n) // bound PLAINTEXT
	ctl := make([]string, n)   // bound CONTROLLER
	adv := make([]string, n)   // advertised PLAINTEXT (proxy)
	for i := range n {
		ip := fmt.Sprintf("127.0.0.%d", i+2)
		ports := freePortsOn(t, ip, 2)
		plain[i], ctl[i] = net.JoinHostPort(ip, strconv.Itoa(ports[0])), net.JoinHostPort(ip, strconv.Itoa(ports[1]))
		pp, err := nw.Proxy(ip+":0", plain[i])
		if err != nil {
			t.Fatal(err)
		}
		cp, err := nw.Proxy(ip+":0", ctl[i])
		if err != nil {
			t.Fatal(err)
		}
		adv[i] = pp.Addr()
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, cp.Addr()))
	}
	c.voters = strings.Join(voters, ",")
	for i := range n {
		c.dirs = append(c.dirs, t.TempDir())
		c.settings = append(c.settings, append([]string{
			"node.id=" + strconv.Itoa(i+1),
			"process.roles=broker,controller",
			fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://%s", plain[i], ctl[i]),
			"advertised.listeners=PLAINTEXT://" + adv[i],
			"controller.quorum.voters=" + c.voters,
			fmt.Sprintf("admin.listener=127.0.0.%d:0", i+2),
			"log.dirs=" + c.dirs[i],
		}, extra...))
	}
	for i := range c.settings {
		c.procs = append(c.procs, c.launch(i+1))
	}
	for i, p := range c.procs {
		p.waitServing(t)
		p.addr = adv[i] // clients and checks go through the proxies
	}
	return c
}

// freePortsOn is testutil.FreePortsOn.
func freePortsOn(t *testing.T, ip string, n int) []int { return testutil.FreePortsOn(t, ip, n) }

// TestFaultProcLeaderCutFromPeers cuts the leader's node off the
// other two (its followers, and the controller quorum's majority) through
// netfault proxies while clients still reach it: the others fence it and
// elect another ISR member; healed, it rejoins as a follower and the ISR
// is full again. Nothing acknowledged is lost (Jepsen 2013's scenario:
// min.insync.replicas=2 keeps the lone old leader from acknowledging).
func TestFaultProcLeaderCutFromPeers(t *testing.T) {
	nw := netfault.New(netfault.Blackhole)
	t.Cleanup(func() { nw.Close() })
	c := startProxiedProcCluster(t, 3, nw, faultProcSettings...)
	r := startFaultRun(t, c, "cut-leader", "cut the leader from followers and controller (process, netfault)")
	for range faultRoundsOr(1) {
		r.waitMoreAcked(500)
		old := r.leader0()
		at := time.Now()
		nw.Isolate(fmt.Sprintf("127.0.0.%d", old+1))
		elected := r.waitNewLeader(old)
		r.res.Reelection = append(r.res.Reelection, elected.Sub(at))
		r.waitMoreAcked(300)
		healed := time.Now()
		nw.Heal()
		r.res.ISRRecovery = append(r.res.ISRRecovery, r.waitFullISR().Sub(healed))
		t.Logf("node %d cut: new leader after %v, the load on it %v later (300 acks), full ISR %v after the heal", old,
			elected.Sub(at).Round(time.Millisecond), healed.Sub(elected).Round(time.Millisecond), r.res.ISRRecovery[len(r.res.ISRRecovery)-1].Round(time.Millisecond))
		r.res.Runs++
	}
	r.finish()
}
