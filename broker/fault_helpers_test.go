package broker

// Helpers of the replication fault tests (fault_test.go, issue 14): an
// in-process cluster whose inter-node links pass an internal/netfault
// proxy, brokers on a vfs.MemFS that can lose their page cache, and the
// measurements of a fault (re-election and ISR recovery times).

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/deliverycheck"
	"github.com/strata-io/strata/internal/netfault"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/vfs"
)

// nodeIP is broker id's loopback address in a testCluster.
func nodeIP(id int32) string { return fmt.Sprintf("127.0.0.%d", id+1) }

// freePortOn returns a port free a moment ago on ip.
func freePortOn(t testing.TB, ip string) int { return testutil.FreePortsOn(t, ip, 1)[0] }

// startProxiedCluster is startCluster with every inter-node link through
// nw: broker i binds 127.0.0.(i+1):P (the same P across restarts) and
// advertises a proxy on 127.0.0.(i+1):Q; the brokers reach the
// controller through a proxy on the controller's IP. Clients (dialing
// from 127.0.0.1) pass the proxies too. mem lists brokers whose data dir
// is a vfs.MemFS (crashable, testCluster.crash).
func startProxiedCluster(t testing.TB, n int, extra map[string]string, nw *netfault.Network, mem ...int32) *testCluster {
	t.Helper()
	c := &testCluster{t: t, dirs: map[int32]string{}, nodes: map[int32]*Node{}, extra: extra,
		fss: map[int32]vfs.FS{}, own: map[int32]map[string]string{}, nw: nw}
	for _, id := range mem {
		c.fss[id] = vfs.NewMem()
	}
	proxied := func(id int32) (listen string, props map[string]string) {
		ip := nodeIP(id)
		listen = net.JoinHostPort(ip, strconv.Itoa(freePortOn(t, ip)))
		p, err := nw.Proxy(ip+":0", listen)
		if err != nil {
			t.Fatal(err)
		}
		return listen, map[string]string{"advertised.listeners": "PLAINTEXT://" + p.Addr()}
	}
	listen, own := proxied(1)
	ctlProps := map[string]string{
		"node.id":                  "1",
		"listeners":                "PLAINTEXT://" + listen + ",CONTROLLER://127.0.0.2:0",
		"admin.listener":           "127.0.0.2:0",
		"controller.quorum.voters": "1@127.0.0.2:0",
	}
	for k, v := range extra {
		ctlProps[k] = v
	}
	for k, v := range own {
		ctlProps[k] = v
	}
	c.ctl = startNode(t, t.TempDir(), ctlProps)
	c.nodes[1] = c.ctl
	ctlProxy, err := nw.Proxy("127.0.0.2:0", c.ctl.Addrs()["CONTROLLER"])
	if err != nil {
		t.Fatal(err)
	}
	for i := int32(2); i <= int32(n); i++ {
		listen, own := proxied(i)
		own["listeners"] = "PLAINTEXT://" + listen
		own["controller.quorum.voters"] = "100@" + ctlProxy.Addr()
		c.own[i] = own
		c.dirs[i] = t.TempDir()
		c.start(i)
	}
	return c
}

// startMemCluster is startCluster with brokers mem on a vfs.MemFS each.
func startMemCluster(t testing.TB, n int, extra map[string]string, mem ...int32) *testCluster {
	t.Helper()
	c := startCluster(t, 1, extra)
	c.fss = map[int32]vfs.FS{}
	for _, id := range mem {
		c.fss[id] = vfs.NewMem()
	}
	for i := int32(2); i <= int32(n); i++ {
		c.dirs[i] = t.TempDir()
		c.start(i)
	}
	return c
}

// crash loses broker id's page cache: in a proxied cluster every link of
// the node is cut first (so nothing it does after this instant reaches
// anyone, as after a power loss), its file system becomes what a power
// loss now would leave (vfs.MemFS.CrashClone, keepPct percent of the
// unsynced bytes kept), the node is closed and the links healed. It
// stays down (c.start(id) restarts it on the clone); crash returns when
// it happened.
func (c *testCluster) crash(id int32, keepPct int, rng *rand.Rand) time.Time {
	c.t.Helper()
	mem, ok := c.fss[id].(*vfs.MemFS)
	if !ok {
		c.t.Fatalf("broker %d is not on a MemFS", id)
	}
	if c.nw != nil {
		c.nw.CutAll(nodeIP(id))
	}
	at := time.Now()
	c.fss[id] = mem.CrashClone(keepPct, rng)
	c.stop(id)
	if c.nw != nil {
		c.nw.Heal()
	}
	return at
}

// leaderOf is partition p of topic's leader in the controller's view (-1
// without one).
func (c *testCluster) leaderOf(topic string, p int32) int32 {
	if st, ok := c.partitionState(topic, p); ok {
		return st.Leader
	}
	return -1
}

// waitPartition polls the controller's view of topic-p until ok holds
// and returns it.
func (c *testCluster) waitPartition(topic string, p int32, what string, ok func(metadata.PartitionInfo) bool) metadata.PartitionInfo {
	c.t.Helper()
	return c.waitPartitionWithin(testWait, topic, p, what, ok)
}

// waitPartitionWithin is waitPartition bounded by d.
func (c *testCluster) waitPartitionWithin(d time.Duration, topic string, p int32, what string, ok func(metadata.PartitionInfo) bool) metadata.PartitionInfo {
	c.t.Helper()
	var st metadata.PartitionInfo
	if err := testutil.Within(d, func() error {
		var found bool
		st, found = c.partitionState(topic, p)
		if found && ok(st) {
			return nil
		}
		return fmt.Errorf("%s: %s-%d is %+v", what, topic, p, st)
	}); err != nil {
		c.t.Fatal(err)
	}
	return st
}

// waitFullISR waits until every replica of topic-p is in its ISR with a
// leader, and returns when that was seen. It waits up to three times
// testWait: a healed broker is unfenced, catches up into the current
// epoch and is added back by an AlterPartition (about a second after a
// heal in-process).
func (c *testCluster) waitFullISR(topic string, p int32) time.Time {
	c.t.Helper()
	c.waitPartitionWithin(3*testWait, topic, p, "ISR back to every replica", func(st metadata.PartitionInfo) bool {
		return st.Leader >= 0 && len(st.ISR) == len(st.Replicas)
	})
	return time.Now()
}

// waitNewLeader waits until topic-p has a leader other than old, and
// returns when that was seen.
func (c *testCluster) waitNewLeader(topic string, p int32, old int32) time.Time {
	c.t.Helper()
	c.waitPartition(topic, p, fmt.Sprintf("a leader other than %d", old), func(st metadata.PartitionInfo) bool {
		return st.Leader >= 0 && st.Leader != old
	})
	return time.Now()
}

// createAssigned creates topic with one partition per assignment (replica
// lists, the first the preferred leader) and configs.
func createAssigned(t testing.TB, cl *kgo.Client, topic string, configs map[string]string, assignments ...[]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(testWait / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, a := range assignments {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(i), a
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.Topics[0].ErrorCode; e != 0 {
		t.Fatalf("create %s: error %d %v", topic, e, resp.Topics[0].ErrorMessage)
	}
}

// faultRounds is how many times a fault test repeats its fault:
// STRATA_TEST_FAULT_ROUNDS (bench/faults sets it), else def.
func faultRounds(def int) int {
	if n, err := strconv.Atoi(os.Getenv("STRATA_TEST_FAULT_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return def
}

// faultReportPath is where fault rows are appended as JSON lines
// (STRATA_TEST_FAULT_REPORT, set by bench/faults; "" = nowhere).
func faultReportPath() string { return os.Getenv("STRATA_TEST_FAULT_REPORT") }

// faultClientLogger logs the load's client at info level with
// STRATA_TEST_VERBOSE (what the producer saw during a fault), else
// nothing.
func faultClientLogger() kgo.Logger {
	if os.Getenv("STRATA_TEST_VERBOSE") == "" {
		return nil
	}
	return kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string { return "kgo: " })
}

// faultProducer is the load of a fault test: an idempotent acks=all
// franz-go producer over the whole cluster feeding rc.
func (c *testCluster) faultProducer(topic string, rc *deliverycheck.Recorder, prefix string) (*kgo.Client, *deliverycheck.Producer) {
	c.t.Helper()
	// A leader cut off its followers holds acks=all produces until the
	// produce timeout: 4s (not kgo's 10s, plus 2s of overhead, not 10s)
	// keeps each fault's stall well inside testWait.
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(2*testWait), kgo.RetryTimeout(2*testWait),
		kgo.ProduceRequestTimeout(4*time.Second), kgo.RequestTimeoutOverhead(2*time.Second),
		kgo.WithLogger(faultClientLogger()))
	return cl, deliverycheck.Produce(context.Background(), cl, topic, rc, deliverycheck.ProduceOptions{Prefix: prefix, MaxInFlight: 100})
}

// waitAcked waits until p has more than n acknowledgements.
func waitAcked(t testing.TB, p *deliverycheck.Producer, n int64) {
	t.Helper()
	testutil.Eventually(t, 2*testWait, func() bool { return p.Stats().Acked > n }, "more than %d acknowledgements", n)
}

// finishFaultRun stops the load, checks partition 0's replicas hold the
// same bytes, reads every partition back, checks the history and logs and
// records the matrix row of r.
func finishFaultRun(t testing.TB, c *testCluster, cl *kgo.Client, topic string, p *deliverycheck.Producer, rc *deliverycheck.Recorder, r *deliverycheck.FaultResult) {
	t.Helper()
	st := p.Stop()
	c.checkReplicasAgree(topic, 0)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := deliverycheck.FinalRead(ctx, cl, topic, rc); err != nil {
		t.Fatal(err)
	}
	rep := deliverycheck.Check(rc.History())
	r.Add(rep)
	t.Logf("%s: %s; producer %+v", r.Fault, rep.Summary(), st)
	t.Logf("%s\n%s", deliverycheck.MatrixHeader(), r.Row())
	if err := r.Save(faultReportPath()); err != nil {
		t.Error(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	if rep.Acked == 0 {
		t.Fatal("nothing acknowledged")
	}
}

// replicaLogBytes reads topic-p's whole local log on n (from its local start).
func replicaLogBytes(n *Node, topic string, p int32) (start int64, b []byte, err error) {
	part := n.partition(topic, p)
	if part == nil {
		return 0, nil, fmt.Errorf("broker %d hosts no %s-%d", n.cfg.NodeID, topic, p)
	}
	l := part.log
	start = l.LocalLogStartOffset()
	end := l.LogEndOffset()
	for off := start; off < end; {
		v, err := l.Read(off, 64<<20, end)
		if err != nil {
			return 0, nil, err
		}
		chunk, err := v.Bytes()
		next := v.NextOffset
		v.Release()
		if err != nil {
			return 0, nil, err
		}
		if next <= off {
			return 0, nil, fmt.Errorf("read at %d made no progress", off)
		}
		b = append(b, chunk...)
		off = next
	}
	return start, b, nil
}

// checkReplicasAgree waits (load stopped, faults healed) until every
// replica of topic-p has the same log end, then fails unless their logs
// hold the same bytes: followers append the leader's batches byte for
// byte, so two replicas differing anywhere is a divergence truncation
// missed (issue 14's property: no two replicas differ below the HW).
func (c *testCluster) checkReplicasAgree(topic string, p int32) {
	c.t.Helper()
	st, _ := c.partitionState(topic, p)
	ends := func() map[int32]int64 {
		out := map[int32]int64{}
		for _, id := range st.Replicas {
			if n := c.node(id); n != nil {
				if part := n.partition(topic, p); part != nil {
					out[id] = part.log.LogEndOffset()
				}
			}
		}
		return out
	}
	if err := testutil.Within(testWait, func() error {
		e := ends()
		if len(e) != len(st.Replicas) {
			return fmt.Errorf("replicas hosting %s-%d: %v of %v", topic, p, e, st.Replicas)
		}
		var first int64 = -1
		for _, v := range e {
			if first >= 0 && v != first {
				return fmt.Errorf("replica log ends of %s-%d differ: %v", topic, p, e)
			}
			first = v
		}
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	var ref []byte
	var refID int32 = -1
	for _, id := range st.Replicas {
		start, b, err := replicaLogBytes(c.node(id), topic, p)
		if err != nil {
			c.t.Fatal(err)
		}
		if start != 0 {
			c.t.Fatalf("broker %d: %s-%d starts at %d", id, topic, p, start)
		}
		if refID < 0 {
			ref, refID = b, id
			continue
		}
		if !bytes.Equal(b, ref) {
			i := 0
			for i < min(len(b), len(ref)) && b[i] == ref[i] {
				i++
			}
			c.t.Fatalf("%s-%d: broker %d's log (%d bytes) differs from broker %d's (%d bytes) from byte %d", topic, p, id, len(b), refID, len(ref), i)
		}
	}
	if len(ref) == 0 {
		c.t.Fatalf("%s-%d: every replica's log is empty", topic, p)
	}
	c.t.Logf("%s-%d: the %d replicas hold the same %d bytes", topic, p, len(st.Replicas), len(ref))
}
