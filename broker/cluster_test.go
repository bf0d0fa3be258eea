package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

// TestBrokerOnlyNodeJoinsAndServesItsPartitions runs a combined node and a
// broker-only node that reaches the controller over TCP. Each serves the
// partitions it leads, answers NOT_LEADER_OR_FOLLOWER for the others, and
// both list both brokers in Metadata.
func TestBrokerOnlyNodeJoinsAndServesItsPartitions(t *testing.T) {
	a := startNode(t, t.TempDir(), nil)
	b := startNode(t, t.TempDir(), map[string]string{
		"node.id":                  "2",
		"process.roles":            "broker",
		"listeners":                "PLAINTEXT://127.0.0.1:0",
		"controller.quorum.voters": "1@" + a.Addrs()["CONTROLLER"],
	})
	adm := kadm.NewClient(newClient(t, a))
	createTopic(t, adm, "spread", 4, nil)

	md, err := adm.Metadata(testCtx(t), "spread")
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 2 {
		t.Fatalf("metadata lists %d brokers, want 2", len(md.Brokers))
	}
	leaders := map[int32]int32{}
	for _, p := range md.Topics["spread"].Partitions {
		leaders[p.Partition] = p.Leader
	}
	if len(leaders) != 4 {
		t.Fatalf("leaders %v", leaders)
	}
	nodes := map[int32]*Node{1: a, 2: b}
	// CreateTopics answers once the node that served it has reconciled; the
	// other broker follows the metadata log on its own and may lag a little
	// (a real client would retry NOT_LEADER_OR_FOLLOWER). Wait until each
	// node has opened the partitions it leads.
	for part, leader := range leaders {
		eventually(t, fmt.Sprintf("node %d to host partition %d", leader, part), func() bool {
			return nodes[leader].partition("spread", part) != nil && nodes[leader].metadataOffset() >= a.metadataOffset()
		})
	}
	used := map[int32]bool{}
	for part, leader := range leaders {
		used[leader] = true
		for id, n := range nodes {
			c := dialRaw(t, n)
			code, _ := produceErr(t, c.roundTrip(produceReq(9, "spread", [16]byte{}, part, -1, recordBatch(0, "x"))))
			want := int16(0)
			if id != leader {
				want = kerr.NotLeaderForPartition.Code
			}
			if code != want {
				t.Errorf("partition %d (leader %d) produced on node %d: code %d, want %d", part, leader, id, code, want)
			}
		}
	}
	if !used[1] || !used[2] {
		t.Fatalf("placement used only %v", used)
	}
	// Admin requests work through the broker-only node too (it names
	// itself controller and forwards to the quorum).
	createTopic(t, kadm.NewClient(newClient(t, b)), "via-b", 2, nil)

	// A client bootstrapped on either node finds every partition.
	cl := newClient(t, b, kgo.ConsumeTopics("spread"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	ctx := testCtx(t)
	for got < 4 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(*kgo.Record) { got++ })
	}
	if got != 4 {
		t.Fatalf("consumed %d of 4 records across both brokers", got)
	}
}

func TestAdvertisedListenersInMetadata(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"advertised.listeners": "PLAINTEXT://broker.example:19092"})
	c := dialRaw(t, n)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "broker.example" || resp.Brokers[0].Port != 19092 {
		t.Fatalf("brokers %+v", resp.Brokers)
	}
	if resp.ClusterID == nil || *resp.ClusterID != n.ClusterID() || resp.ControllerID != 1 {
		t.Fatalf("cluster id %v controller %d", resp.ClusterID, resp.ControllerID)
	}
}

func TestCreateTopicsValidateOnlyAndErrors(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	v, err := adm.ValidateCreateTopics(ctx, 3, 1, nil, "dry")
	if err != nil || v.Error() != nil {
		t.Fatalf("validate: %v %v", err, v.Error())
	}
	if td, _ := adm.ListTopics(ctx, "dry"); td.Has("dry") && td["dry"].Err == nil {
		t.Fatal("validate-only created the topic")
	}
	createTopic(t, adm, "twice", 1, nil)
	for _, tc := range []struct {
		name       string
		partitions int32
		rf         int16
		configs    map[string]*string
		want       error
	}{
		{"twice", 1, 1, nil, kerr.TopicAlreadyExists},
		{"zero", 0, 1, nil, kerr.InvalidPartitions},
		{"rf", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"cfg", 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("soon")}, kerr.InvalidConfig},
	} {
		resp, _ := adm.CreateTopic(ctx, tc.partitions, tc.rf, tc.configs, tc.name)
		if !errors.Is(resp.Err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, resp.Err, tc.want)
		}
	}
	// A topic created with -1 counts takes the broker's defaults.
	resp, err := adm.CreateTopic(ctx, -1, -1, nil, "defaults")
	if err != nil || resp.Err != nil || resp.NumPartitions != 1 || resp.ReplicationFactor != 1 {
		t.Fatalf("defaults: %v %+v", err, resp)
	}
}

// TestClusterIDIsTheQuorumsOnEveryNode: a broker-only node used to make
// up its own cluster.id; now every node reports the quorum's (recorded in
// the metadata log) in Metadata and DescribeCluster and keeps it in its
// meta.properties; a node whose meta.properties names another cluster is
// refused with one line saying so; a meta.properties an older version
// wrote (an id the node generated itself) takes the quorum's id.
func TestClusterIDIsTheQuorumsOnEveryNode(t *testing.T) {
	a := startNode(t, t.TempDir(), nil)
	brokerOnly := func(id int) map[string]string {
		return map[string]string{
			"node.id":                  strconv.Itoa(id),
			"process.roles":            "broker",
			"listeners":                "PLAINTEXT://127.0.0.1:0",
			"controller.quorum.voters": "1@" + a.Addrs()["CONTROLLER"],
		}
	}
	dirB := t.TempDir()
	b := startNode(t, dirB, brokerOnly(2))
	want := a.ClusterID()
	if want == "" || b.ClusterID() != want {
		t.Fatalf("controller node reports cluster id %q, broker-only node %q", want, b.ClusterID())
	}
	for _, n := range []*Node{a, b} {
		cl := newClient(t, n)
		m, err := kadm.NewClient(cl).BrokerMetadata(testCtx(t))
		if err != nil || m.Cluster != want {
			t.Fatalf("Metadata from node %d: cluster %q (%v), want %q", n.cfg.NodeID, m.Cluster, err, want)
		}
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(testCtx(t), cl)
		if err != nil || dc.ClusterID != want {
			t.Fatalf("DescribeCluster from node %d: %v, want cluster %q", n.cfg.NodeID, err, want)
		}
	}
	props := func(dir string) map[string]string {
		t.Helper()
		f, err := os.Open(filepath.Join(dir, "meta.properties"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		p, err := ReadProperties(f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := props(dirB); p["cluster.id"] != want || p["cluster.id.source"] != "quorum" {
		t.Fatalf("broker-only node's meta.properties: %v", p)
	}

	// A node of another cluster: refused, one line, naming both ids.
	foreign := t.TempDir()
	inc := uuid.New()
	write := func(dir, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "meta.properties"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(foreign, "version=1\ncluster.id=ForeignCluster00000000\nnode.id=3\nincarnation.id="+inc.String()+"\ncluster.id.source=quorum\n")
	_, err := Open(Options{Config: testConfig(t, foreign, brokerOnly(3)), Logger: testLogger(), StartTimeout: testWait})
	if !errors.Is(err, kerr.InconsistentClusterID) || !strings.Contains(err.Error(), "ForeignCluster00000000") || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("node of another cluster: %v, want one line of INCONSISTENT_CLUSTER_ID naming both ids", err)
	}
	if p := props(foreign); p["cluster.id"] != "ForeignCluster00000000" {
		t.Fatalf("refused node's meta.properties rewritten: %v", p)
	}
	a.view(func(st *metadata.State) {
		if _, ok := st.Broker(3); ok {
			t.Error("node of another cluster registered")
		}
	})

	// A meta.properties from before: its own made-up id, no source.
	legacy := t.TempDir()
	write(legacy, "version=1\ncluster.id=MadeUpByThisNode000000\nnode.id=4\nincarnation.id="+inc.String()+"\n")
	d := startNode(t, legacy, brokerOnly(4))
	if d.ClusterID() != want {
		t.Fatalf("node with an older meta.properties reports %q, want the quorum's %q", d.ClusterID(), want)
	}
	if p := props(legacy); p["cluster.id"] != want || p["cluster.id.source"] != "quorum" || p["incarnation.id"] != inc.String() {
		t.Fatalf("older meta.properties not updated: %v", p)
	}
}
