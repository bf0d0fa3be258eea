package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// procCluster is n combined-mode (broker,controller) strata processes
// forming one quorum, each on its own data directory.
type procCluster struct {
	t        *testing.T
	settings [][]string // per node (index = node.id-1), as passed to launchProc
	dirs     []string   // per node, its log.dirs
	voters   string     // controller.quorum.voters
	procs    []*proc
	started  int // processes launched, for log file names
}

// startProcCluster starts n nodes with the CONTROLLER listeners on ports
// chosen here (the voters must be known in advance), every other listener
// on port 0, and extra settings for all; it returns once every node serves.
func startProcCluster(t *testing.T, n int, extra ...string) *procCluster {
	t.Helper()
	ports := freePorts(t, n)
	var voters []string
	for i, p := range ports {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p))
	}
	c := &procCluster{t: t, voters: strings.Join(voters, ",")}
	for i, p := range ports {
		c.dirs = append(c.dirs, t.TempDir())
		c.settings = append(c.settings, append([]string{
			"node.id=" + strconv.Itoa(i+1),
			"process.roles=broker,controller",
			fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", p),
			"controller.quorum.voters=" + c.voters,
			"admin.listener=127.0.0.1:0",
			"log.dirs=" + c.dirs[i],
		}, extra...))
	}
	for i := range c.settings {
		c.procs = append(c.procs, c.launch(i+1))
	}
	for _, p := range c.procs {
		p.waitServing(t)
	}
	return c
}

// freePorts returns n loopback ports free a moment ago, below the
// ephemeral range (32768 and up on Linux): a node keeps its port across
// restarts, and an ephemeral one could meanwhile be any outgoing
// connection's source port (freePortsOn).
func freePorts(t *testing.T, n int) []int { return freePortsOn(t, "127.0.0.1", n) }

func (c *procCluster) launch(id int) *proc {
	c.started++
	return launchProc(c.t, c.started, c.settings[id-1]...)
}

// node returns the process of node.id id.
func (c *procCluster) node(id int32) *proc { return c.procs[id-1] }

// restart starts node id again on its data directory (after a kill) and
// waits until it serves.
func (c *procCluster) restart(id int32) *proc {
	c.t.Helper()
	p := c.launch(int(id))
	c.procs[id-1] = p
	p.waitServing(c.t)
	return p
}

// addrs returns the PLAINTEXT addresses of the nodes other than except.
func (c *procCluster) addrs(except ...int32) []string {
	var out []string
	for i, p := range c.procs {
		if !slices.Contains(except, int32(i+1)) {
			out = append(out, p.addr)
		}
	}
	return out
}

// client returns a client of the nodes other than except, closed at cleanup.
func (c *procCluster) client(except ...int32) (*kgo.Client, *kadm.Client) {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs(except...)...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// produceAcked produces n records with acks=all to partition 0 of topic,
// one synchronous batch of 100 at a time, and returns the offset of each
// acknowledged value.
func produceAcked(t *testing.T, cl *kgo.Client, topic string, n int) map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	acked := map[int64]string{}
	for i := 0; i < n; {
		var batch []*kgo.Record
		for ; i < n && len(batch) < 100; i++ {
			batch = append(batch, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "%s-%05d", topic, i)})
		}
		for _, r := range cl.ProduceSync(ctx, batch...) {
			if r.Err != nil {
				t.Fatalf("produce: %v", r.Err)
			}
			acked[r.Record.Offset] = string(r.Record.Value)
		}
	}
	return acked
}

// partition0 returns partition 0 of topic as the nodes other than except
// report it, with the brokers they list.
func partition0(t *testing.T, adm *kadm.Client, topic string) (kadm.PartitionDetail, []int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := adm.Metadata(ctx, topic)
	if err != nil {
		return kadm.PartitionDetail{}, nil, err
	}
	td, ok := m.Topics[topic]
	if !ok || td.Err != nil {
		return kadm.PartitionDetail{}, nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	p, ok := td.Partitions[0]
	if !ok {
		return kadm.PartitionDetail{}, nil, fmt.Errorf("topic %s has no partition 0", topic)
	}
	return p, m.Brokers.NodeIDs(), nil
}

// waitPartition0 polls partition 0 of topic until ok accepts it.
func waitPartition0(t *testing.T, adm *kadm.Client, topic, what string, ok func(p kadm.PartitionDetail, brokers []int32) bool) kadm.PartitionDetail {
	t.Helper()
	var p kadm.PartitionDetail
	if err := testutil.Within(procWait, func() error {
		var brokers []int32
		var err error
		p, brokers, err = partition0(t, adm, topic)
		if err == nil && ok(p, brokers) {
			return nil
		}
		return fmt.Errorf("%s: partition %s-0 still %+v (brokers %v, err %v) after %v", what, topic, p, brokers, err, procWait)
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// endOffset0 returns the end offset of partition 0 of topic.
func endOffset0(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s-0: %+v", topic, o)
	}
	return o.Offset
}

// clusterSettings make a killed broker fenced within about two seconds.
var clusterSettings = []string{"broker.session.timeout.ms=2000", "broker.heartbeat.interval.ms=200"}

// TestClusterReplicatedTopicSurvivesLeaderKill9: on three nodes, a topic
// with replication factor 3 is created with replicas and ISR [1,2,3]; the
// records acknowledged with acks=all survive a kill -9 of the leader: an
// ISR member is elected and the end offset covers every acknowledged
// record. (Before replication, this topic was created with an ISR of
// three while only its leader's log received records; after 2,458
// records and a kill -9, an "in sync" replica with an empty log was
// elected: every record lost, its offsets free for other records.)
func TestClusterReplicatedTopicSurvivesLeaderKill9(t *testing.T) {
	c := startProcCluster(t, 3, clusterSettings...)
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	const topic, n = "replicated", 2458
	resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create with replication factor 3: %v (%s)", err, resp.ErrMessage)
	}
	p := waitPartition0(t, adm, topic, "all three replicas in sync", func(p kadm.PartitionDetail, _ []int32) bool {
		return len(p.Replicas) == 3 && len(p.ISR) == 3 && p.Leader >= 0
	})
	acked := produceAcked(t, cl, topic, n)
	killed := p.Leader
	c.node(killed).kill()
	_, adm2 := c.client(killed)
	after := waitPartition0(t, adm2, topic, "election after kill -9", func(p kadm.PartitionDetail, _ []int32) bool {
		return p.Leader >= 0 && p.Leader != killed
	})
	if end := endOffset0(t, adm2, topic); end < int64(len(acked)) {
		t.Fatalf("after kill -9 of leader %d, node %d was elected and the end offset is %d: %d of %d acknowledged records lost",
			killed, after.Leader, end, len(acked)-int(end), len(acked))
	}
}

// TestClusterKill9OnlyReplicaLeavesPartitionOffline: kill -9 of the broker
// holding a partition's only replica leaves the partition offline (leader
// -1, LEADER_NOT_AVAILABLE) once the controller has fenced it, never led by
// a broker without its records; restarted on its data directory, the
// broker leads it again with every acknowledged record.
func TestClusterKill9OnlyReplicaLeavesPartitionOffline(t *testing.T) {
	c := startProcCluster(t, 3, clusterSettings...)
	cl, adm := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	const topic, n = "single", 2458
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v / %v", err, resp.Err)
	}
	acked := produceAcked(t, cl, topic, n)
	if len(acked) != n {
		t.Fatalf("%d distinct offsets acknowledged for %d records", len(acked), n)
	}
	p, _, err := partition0(t, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Replicas, []int32{p.Leader}) || !slices.Equal(p.ISR, []int32{p.Leader}) {
		t.Fatalf("partition before the kill: %+v, want one replica, the leader, in the ISR", p)
	}
	killed := p.Leader
	c.node(killed).kill()
	_, survivors := c.client(killed)
	// The fencing and the leadership change are one metadata entry: once a
	// survivor no longer lists the killed broker, the partition's fate is
	// decided.
	p = waitPartition0(t, survivors, topic, "fencing of the killed broker", func(_ kadm.PartitionDetail, brokers []int32) bool {
		return !slices.Contains(brokers, killed)
	})
	if p.Leader != -1 || !errors.Is(p.Err, kerr.LeaderNotAvailable) || !slices.Equal(p.ISR, []int32{killed}) {
		t.Fatalf("partition after the kill -9 of broker %d: leader %d, ISR %v, err %v; want leader -1, ISR [%d], LEADER_NOT_AVAILABLE", killed, p.Leader, p.ISR, p.Err, killed)
	}
	c.restart(killed)
	waitPartition0(t, survivors, topic, "leadership back on the restarted broker", func(p kadm.PartitionDetail, _ []int32) bool {
		return p.Leader == killed && p.Err == nil
	})
	if end := endOffset0(t, survivors, topic); end != n {
		t.Fatalf("end offset %d after restart, want %d", end, n)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	got := 0
	for got < n {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want, ok := acked[r.Offset]; !ok || want != string(r.Value) {
				t.Fatalf("offset %d holds %q, acknowledged %q", r.Offset, r.Value, want)
			}
			got++
		})
	}
}

// TestClusterReportsTheQuorumsClusterID: each node used to generate its own
// cluster.id. Now the first leader records one in the metadata log: every
// node of a three-node cluster, and a broker-only node joining it, reports
// it in DescribeCluster and Metadata and keeps it in its meta.properties;
// a node whose meta.properties names another cluster exits at start with
// one line saying so.
func TestClusterReportsTheQuorumsClusterID(t *testing.T) {
	c := startProcCluster(t, 3)
	dir := t.TempDir()
	joiner := launchProc(t, 100, "node.id=4", "process.roles=broker", "listeners=PLAINTEXT://127.0.0.1:0",
		"controller.quorum.voters="+c.voters, "admin.listener=127.0.0.1:0", "log.dirs="+dir)
	joiner.waitServing(t)
	ids := map[string][]int{}
	for i, p := range append(slices.Clone(c.procs), joiner) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), procWait)
		defer cancel()
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err != nil || m.Cluster != dc.ClusterID {
			t.Fatalf("node %d: Metadata cluster %q (%v), DescribeCluster %q", i+1, m.Cluster, err, dc.ClusterID)
		}
		ids[dc.ClusterID] = append(ids[dc.ClusterID], i+1)
	}
	if len(ids) != 1 {
		t.Fatalf("cluster ids by node: %v, want one id", ids)
	}
	var id string
	for k := range ids {
		id = k
	}
	for _, d := range append(slices.Clone(c.dirs), dir) {
		b, err := os.ReadFile(filepath.Join(d, "meta.properties"))
		if err != nil || !strings.Contains(string(b), "cluster.id="+id+"\n") {
			t.Fatalf("%s/meta.properties: %v\n%s", d, err, b)
		}
	}

	foreign := t.TempDir()
	props := "version=1\ncluster.id=ForeignCluster00000000\nnode.id=5\nincarnation.id=" + uuid.NewString() + "\ncluster.id.source=quorum\n"
	if err := os.WriteFile(filepath.Join(foreign, "meta.properties"), []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	p := launchProc(t, 101, "node.id=5", "process.roles=broker", "listeners=PLAINTEXT://127.0.0.1:0",
		"controller.quorum.voters="+c.voters, "admin.listener=127.0.0.1:0", "log.dirs="+foreign)
	select {
	case <-p.done:
	case <-time.After(procWait):
		t.Fatalf("node of another cluster still running after %v", procWait)
	}
	if code := p.cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatal("node of another cluster exited 0")
	}
	b, _ := os.ReadFile(p.err)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(l, "INCONSISTENT_CLUSTER_ID") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "ForeignCluster00000000") || !strings.Contains(lines[0], id) {
		t.Fatalf("stderr of the node of another cluster:\n%s\nwant one INCONSISTENT_CLUSTER_ID line naming both ids", b)
	}
	t.Logf("refused: %s", lines[0])
}
