package broker

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/netfault"
	"github.com/strata-io/strata/storage/vfs"
)

// testCluster is an in-process cluster of brokers 1..n, broker i on its
// own loopback address 127.0.0.(i+1), so a fault-injecting proxy or
// per-address rule can tell the nodes apart. Broker 1 also runs the
// controller (a quorum of one; a controller-only node is not built), so
// fault tests stop or cut brokers 2..n. Brokers 2..n keep their data
// dirs across stop and restart.
type testCluster struct {
	t     testing.TB
	ctl   *Node
	dirs  map[int32]string
	nodes map[int32]*Node // nil while stopped
	extra map[string]string
	// fss, per broker, is the file system of its data dir (nil: the OS;
	// a vfs.MemFS for crash tests, fault_helpers_test.go); own, per broker,
	// are settings over props (fixed ports, advertised.listeners).
	fss map[int32]vfs.FS
	own map[int32]map[string]string
	nw  *netfault.Network // the links' proxies, nil unless startProxiedCluster
}

// startCluster starts a controller and n brokers; extra applies to every
// broker (and to the controller's cluster-wide defaults).
func startCluster(t testing.TB, n int, extra map[string]string) *testCluster {
	t.Helper()
	return startClusterWith(t, n, extra, nil)
}

// startClusterWith is startCluster with settings of each broker's own
// over extra (own[1]: the controller's node), e.g. broker.rack.
func startClusterWith(t testing.TB, n int, extra map[string]string, own map[int32]map[string]string) *testCluster {
	t.Helper()
	return startClusterTuned(t, n, extra, own, nil)
}

// startClusterTuned is startClusterWith with ctlTune (nil: none) applied
// to the controller node's parsed Config, for what is not a setting
// (Config.snapshotEntries).
func startClusterTuned(t testing.TB, n int, extra map[string]string, own map[int32]map[string]string, ctlTune func(*Config)) *testCluster {
	t.Helper()
	if own == nil {
		own = map[int32]map[string]string{}
	}
	c := &testCluster{t: t, dirs: map[int32]string{}, nodes: map[int32]*Node{}, extra: extra, own: own}
	ctlProps := map[string]string{
		"node.id":                  "1",
		"listeners":                "PLAINTEXT://127.0.0.2:0,CONTROLLER://127.0.0.2:0",
		"admin.listener":           "127.0.0.2:0",
		"controller.quorum.voters": "1@127.0.0.2:0",
	}
	for k, v := range extra {
		ctlProps[k] = v
	}
	for k, v := range own[1] {
		ctlProps[k] = v
	}
	ctlCfg := testConfig(t, t.TempDir(), ctlProps)
	if ctlTune != nil {
		ctlTune(&ctlCfg)
	}
	ctl, err := Open(Options{Config: ctlCfg, Logger: testLogger(), StartTimeout: testWait})
	if err != nil {
		t.Fatalf("open controller node: %v", err)
	}
	t.Cleanup(func() { ctl.Close() })
	c.ctl = ctl
	c.nodes[1] = c.ctl
	for i := int32(2); i <= int32(n); i++ {
		c.dirs[i] = t.TempDir()
		c.start(i)
	}
	return c
}

func (c *testCluster) props(id int32) map[string]string {
	p := map[string]string{
		"node.id":                  strconv.Itoa(int(id)),
		"process.roles":            "broker",
		"listeners":                fmt.Sprintf("PLAINTEXT://127.0.0.%d:0", id+1),
		"admin.listener":           fmt.Sprintf("127.0.0.%d:0", id+1),
		"controller.quorum.voters": "100@" + c.ctl.Addrs()["CONTROLLER"],
	}
	for k, v := range c.extra {
		p[k] = v
	}
	for k, v := range c.own[id] {
		p[k] = v
	}
	return p
}

// start (re)starts broker id (2..n) on its data dir.
func (c *testCluster) start(id int32) *Node {
	c.t.Helper()
	n := startNodeOn(c.t, c.fss[id], c.dirs[id], c.props(id))
	c.nodes[id] = n
	return n
}

// stop closes broker id (2..n; a clean shutdown).
func (c *testCluster) stop(id int32) {
	c.t.Helper()
	if id == 1 {
		c.t.Fatal("testCluster: broker 1 runs the controller and cannot be stopped")
	}
	if n := c.nodes[id]; n != nil {
		n.Close()
		c.nodes[id] = nil
	}
}

// node returns running broker id (nil while stopped).
func (c *testCluster) node(id int32) *Node { return c.nodes[id] }

// seeds lists every running broker's client address.
func (c *testCluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		if n != nil {
			s = append(s, n.Addr())
		}
	}
	return s
}

// client is a franz-go client of the whole cluster.
func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.RetryTimeout(testWait)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// partitionState is the controller's view of one partition.
func (c *testCluster) partitionState(topic string, index int32) (metadata.PartitionInfo, bool) {
	var out metadata.PartitionInfo
	var ok bool
	c.ctl.view(func(st *metadata.State) {
		t, found := st.TopicByName(topic)
		if !found {
			return
		}
		out, ok = st.Partition(t.ID, index)
	})
	return out, ok
}
