package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
