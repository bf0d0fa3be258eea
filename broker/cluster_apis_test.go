package broker

import (
	"crypto/rand"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

func partitionCount(n *Node, topic string) int {
	var c int
	n.view(func(st *metadata.State) {
		if t, ok := st.TopicByName(topic); ok {
			c = len(st.Partitions(t.ID))
		}
	})
	return c
}

func createPartitionsReq(v int16, validate bool, topic string, count int32, assign ...[]int32) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(v)
	req.ValidateOnly, req.TimeoutMillis = validate, int32(testWait.Milliseconds())
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = topic, count
	for _, a := range assign {
		ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
		ra.Replicas = a
		t.Assignment = append(t.Assignment, ra)
	}
	req.Topics = append(req.Topics, t)
	return req
}

// TestCreatePartitionsEveryVersion: partitions grow through the
// controller, the new ones serve produce and fetch as soon as the request
// is answered; fewer or as many partitions is INVALID_PARTITIONS;
// validate-only changes nothing.
func TestCreatePartitionsEveryVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "grow", 1, nil)

	// kadm: add two.
	rs, err := adm.CreatePartitions(testCtx(t), 2, "grow")
	if err != nil || rs["grow"].Err != nil {
		t.Fatalf("kadm create partitions: %v %+v", err, rs)
	}
	if c := partitionCount(n, "grow"); c != 3 {
		t.Fatalf("%d partitions after adding 2 to 1", c)
	}
	for p := int32(1); p < 3; p++ {
		if n.partition("grow", p) == nil {
			t.Fatalf("partition %d not open when CreatePartitions answered", p)
		}
	}

	c := dialRaw(t, n)
	count := int32(3)
	for v := int16(0); v <= kmsg.NewPtrCreatePartitionsRequest().MaxVersion(); v++ {
		// Validate-only: accepted, nothing changes.
		resp := c.roundTrip(createPartitionsReq(v, true, "grow", count+5)).(*kmsg.CreatePartitionsResponse)
		if resp.Topics[0].ErrorCode != 0 || partitionCount(n, "grow") != int(count) {
			t.Fatalf("v%d validate-only: code %d, %d partitions", v, resp.Topics[0].ErrorCode, partitionCount(n, "grow"))
		}
		// Not more partitions: refused with a message.
		for _, bad := range []int32{count, count - 1} {
			resp = c.roundTrip(createPartitionsReq(v, false, "grow", bad)).(*kmsg.CreatePartitionsResponse)
			if tr := resp.Topics[0]; tr.ErrorCode != kerr.InvalidPartitions.Code || tr.ErrorMessage == nil {
				t.Fatalf("v%d count %d of %d: code %d message %v", v, bad, count, tr.ErrorCode, tr.ErrorMessage)
			}
		}
		// One more, with an explicit assignment every other version.
		var assign [][]int32
		if v%2 == 1 {
			assign = [][]int32{{1}}
		}
		count++
		resp = c.roundTrip(createPartitionsReq(v, false, "grow", count, assign...)).(*kmsg.CreatePartitionsResponse)
		if tr := resp.Topics[0]; tr.ErrorCode != 0 || tr.Topic != "grow" {
			t.Fatalf("v%d grow to %d: %+v", v, count, tr)
		}
		if got := partitionCount(n, "grow"); got != int(count) || n.partition("grow", count-1) == nil {
			t.Fatalf("v%d: %d partitions (want %d), newest open: %v", v, got, count, n.partition("grow", count-1) != nil)
		}
	}

	// Errors: unknown topic, an assignment naming an unknown broker, or
	// the wrong number of assignments.
	for _, bad := range []struct {
		req  *kmsg.CreatePartitionsRequest
		code int16
	}{
		{createPartitionsReq(3, false, "missing", 4), kerr.UnknownTopicOrPartition.Code},
		{createPartitionsReq(3, false, "grow", count+1, []int32{9}), kerr.InvalidReplicaAssignment.Code},
		{createPartitionsReq(3, false, "grow", count+2, []int32{1}), kerr.InvalidReplicaAssignment.Code},
	} {
		resp := c.roundTrip(bad.req).(*kmsg.CreatePartitionsResponse)
		if tr := resp.Topics[0]; tr.ErrorCode != bad.code || tr.ErrorMessage == nil {
			t.Errorf("%s count %d: code %d (%v), want %d", tr.Topic, bad.req.Topics[0].Count, tr.ErrorCode, tr.ErrorMessage, bad.code)
		}
	}
	if got := partitionCount(n, "grow"); got != int(count) {
		t.Fatalf("refused requests changed the partition count to %d", got)
	}

	// Every new partition takes records and gives them back.
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < count; p++ {
		r := &kgo.Record{Topic: "grow", Partition: p, Value: []byte{byte(p)}}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
	got := consumeAll(t, n, "grow", int(count))
	for p := int32(0); p < count; p++ {
		if r := got[[2]int64{int64(p), 0}]; r == nil || len(r.Value) != 1 || r.Value[0] != byte(p) {
			t.Fatalf("partition %d: %+v", p, r)
		}
	}
}

// TestDescribeClusterEveryVersion: cluster id, controller id, brokers
// (fenced ones only when asked, v2), authorized operations only when asked,
// and the endpoint type errors of a broker endpoint.
func TestDescribeClusterEveryVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	// A second broker that registers and never heartbeats stays fenced.
	_, err := n.svc.RegisterBroker(testCtx(t), metadata.RegisterBrokerRequest{
		BrokerID: 2, IncarnationID: uuid.New(),
		Listeners: []metadata.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 1, SecurityProtocol: "PLAINTEXT"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !n.waitMetadata(testCtx(t), func(st *metadata.State) bool { _, ok := st.Broker(2); return ok }) {
		t.Fatal("broker 2 never reached the view")
	}
	c := dialRaw(t, n)
	self := n.Addr()
	for v := int16(0); v <= kmsg.NewPtrDescribeClusterRequest().MaxVersion(); v++ {
		for _, withOps := range []bool{false, true} {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.SetVersion(v)
			req.EndpointType = endpointTypeBroker
			req.IncludeClusterAuthorizedOperations = withOps
			req.IncludeFencedBrokers = true
			resp := c.roundTrip(req).(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != 0 || resp.ClusterID != n.ClusterID() || resp.ControllerID != 1 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			wantOps := int32(authorizedOpsOmitted)
			if withOps {
				wantOps = clusterOperations
			}
			if resp.ClusterAuthorizedOperations != wantOps {
				t.Errorf("v%d ops requested %v: %d", v, withOps, resp.ClusterAuthorizedOperations)
			}
			wantBrokers := 1
			if v >= 2 {
				wantBrokers = 2 // IncludeFencedBrokers exists from v2
			}
			if len(resp.Brokers) != wantBrokers {
				t.Fatalf("v%d: %d brokers, want %d: %+v", v, len(resp.Brokers), wantBrokers, resp.Brokers)
			}
			b := resp.Brokers[0]
			if b.NodeID != 1 || net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != self || b.IsFenced {
				t.Fatalf("v%d broker 1: %+v (listening on %s)", v, b, self)
			}
			if v >= 2 && (resp.Brokers[1].NodeID != 2 || !resp.Brokers[1].IsFenced) {
				t.Fatalf("v%d fenced broker: %+v", v, resp.Brokers[1])
			}
		}
	}
	for _, et := range []int8{endpointTypeController, 7} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(1)
		req.EndpointType = et
		resp := c.roundTrip(req).(*kmsg.DescribeClusterResponse)
		want := kerr.UnsupportedEndpointType.Code
		if et == endpointTypeController {
			want = kerr.MismatchedEndpointType.Code
		}
		if resp.ErrorCode != want || resp.ErrorMessage == nil || len(resp.Brokers) != 0 {
			t.Errorf("endpoint type %d: code %d, %d brokers", et, resp.ErrorCode, len(resp.Brokers))
		}
	}
}

// TestDescribeLogDirsEveryVersion: the data directory with every log's
// size (or only the ones asked for), lag 0 on a leader, and the file
// system's capacity from v4.
func TestDescribeLogDirsEveryVersion(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "dirs", 2, nil)
	createTopic(t, adm, "other", 1, nil)
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	value := make([]byte, 3000)
	rand.Read(value) // incompressible
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "dirs", Partition: 1, Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	absDir, _ := filepath.Abs(dir)
	c := dialRaw(t, n)
	for v := int16(0); v <= kmsg.NewPtrDescribeLogDirsRequest().MaxVersion(); v++ {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.SetVersion(v)
		resp := c.roundTrip(req).(*kmsg.DescribeLogDirsResponse)
		if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		d := resp.Dirs[0]
		if d.ErrorCode != 0 || d.Dir != absDir {
			t.Fatalf("v%d: dir %q code %d, want %q", v, d.Dir, d.ErrorCode, absDir)
		}
		sizes := map[tpKey]int64{}
		for _, tp := range d.Topics {
			for _, p := range tp.Partitions {
				if p.OffsetLag != 0 || p.IsFuture {
					t.Errorf("v%d %s-%d: lag %d future %v", v, tp.Topic, p.Partition, p.OffsetLag, p.IsFuture)
				}
				sizes[tpKey{tp.Topic, p.Partition}] = p.Size
			}
		}
		if len(sizes) != 3 {
			t.Fatalf("v%d: partitions %v, want dirs-0, dirs-1, other-0", v, sizes)
		}
		for k, size := range sizes {
			if want := n.partition(k.topic, k.partition).log.Size(); size != want {
				t.Errorf("v%d %s-%d: size %d, log has %d", v, k.topic, k.partition, size, want)
			}
		}
		if sizes[tpKey{"dirs", 1}] < 3000 || sizes[tpKey{"dirs", 0}] != 0 {
			t.Errorf("v%d: sizes %v", v, sizes)
		}
		if v >= 4 && (d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes) {
			t.Errorf("v%d: total %d usable %d", v, d.TotalBytes, d.UsableBytes)
		}
	}
	// Only what is asked for; unknown names and partitions are left out.
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(4)
	for _, want := range []struct {
		topic string
		parts []int32
	}{{"dirs", []int32{1, 7}}, {"nope", []int32{0}}} {
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = want.topic, want.parts
		req.Topics = append(req.Topics, rt)
	}
	resp := c.roundTrip(req).(*kmsg.DescribeLogDirsResponse)
	d := resp.Dirs[0]
	if len(d.Topics) != 1 || d.Topics[0].Topic != "dirs" || len(d.Topics[0].Partitions) != 1 || d.Topics[0].Partitions[0].Partition != 1 {
		t.Fatalf("filtered: %+v", d.Topics)
	}

	// kadm, as tools call it.
	dirs, err := adm.DescribeBrokerLogDirs(testCtx(t), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	ld, ok := dirs[absDir]
	if !ok || ld.Err != nil {
		t.Fatalf("kadm: %+v", dirs)
	}
	if p, ok := ld.Topics.Lookup("dirs", 1); !ok || p.Size < 3000 {
		t.Fatalf("kadm dirs-1: %+v", p)
	}
}

// TestCreatePartitionsCapsNewPartitionsPerRequest: a request adding more
// than 10000 partitions (Kafka's per-operation cap) gets POLICY_VIOLATION
// for the topics past the cap; the others in the same request go ahead,
// answered in request order.
func TestCreatePartitionsCapsNewPartitionsPerRequest(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "small", 1, nil)
	createTopic(t, adm, "huge", 1, nil)
	req := createPartitionsReq(3, false, "small", 2)
	big := kmsg.NewCreatePartitionsRequestTopic()
	big.Topic, big.Count = "huge", 1+maxNewPartitionsPerRequest
	req.Topics = append(req.Topics, big)
	resp := dialRaw(t, n).roundTrip(req).(*kmsg.CreatePartitionsResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].Topic != "small" || resp.Topics[1].Topic != "huge" {
		t.Fatalf("response topics %+v", resp.Topics)
	}
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.PolicyViolation.Code || resp.Topics[1].ErrorMessage == nil {
		t.Fatalf("codes %d, %d (%v)", resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode, resp.Topics[1].ErrorMessage)
	}
	if partitionCount(n, "small") != 2 || partitionCount(n, "huge") != 1 {
		t.Fatalf("partitions: small %d huge %d", partitionCount(n, "small"), partitionCount(n, "huge"))
	}
	// 2^31-1 alone: refused at once, nothing planned.
	resp = dialRaw(t, n).roundTrip(createPartitionsReq(0, false, "huge", 1<<31-1)).(*kmsg.CreatePartitionsResponse)
	if resp.Topics[0].ErrorCode != kerr.PolicyViolation.Code || partitionCount(n, "huge") != 1 {
		t.Fatalf("max count: code %d, %d partitions", resp.Topics[0].ErrorCode, partitionCount(n, "huge"))
	}
}

// TestAdminAPIsOnABrokerOnlyNode: a broker-only node (controller over TCP)
// serves the admin APIs through the quorum: CreatePartitions and
// AlterConfigs sent to it take effect and are visible on it when answered;
// each broker describes its own broker resource and refuses the other's;
// DescribeCluster on either lists both.
func TestAdminAPIsOnABrokerOnlyNode(t *testing.T) {
	a := startNode(t, t.TempDir(), nil)
	b := startNode(t, t.TempDir(), map[string]string{
		"node.id":                  "2",
		"process.roles":            "broker",
		"listeners":                "PLAINTEXT://127.0.0.1:0",
		"controller.quorum.voters": "1@" + a.Addrs()["CONTROLLER"],
	})
	createTopic(t, newAdmin(t, a), "both", 2, nil)
	cb := dialRaw(t, b)
	resp := cb.roundTrip(createPartitionsReq(3, false, "both", 4)).(*kmsg.CreatePartitionsResponse)
	if resp.Topics[0].ErrorCode != 0 || partitionCount(b, "both") != 4 {
		t.Fatalf("create partitions on the broker-only node: code %d, %d partitions in its view", resp.Topics[0].ErrorCode, partitionCount(b, "both"))
	}
	ar := cb.roundTrip(alterReq(2, false, "both", "retention.ms", "4000000")).(*kmsg.AlterConfigsResponse)
	if ar.Resources[0].ErrorCode != 0 || topicOverrides(b, "both")["retention.ms"] != "4000000" {
		t.Fatalf("alter on the broker-only node: code %d, view %v", ar.Resources[0].ErrorCode, topicOverrides(b, "both"))
	}
	for p := int32(0); p < 4; p++ {
		var hosted *partition
		for _, n := range []*Node{a, b} {
			if hp := n.partition("both", p); hp != nil && hp.leader.Load() {
				hosted = hp
			}
		}
		if hosted == nil {
			eventually(t, fmt.Sprintf("a leader hosting both-%d", p), func() bool {
				for _, n := range []*Node{a, b} {
					if hp := n.partition("both", p); hp != nil && hp.leader.Load() {
						hosted = hp
						return true
					}
				}
				return false
			})
		}
		eventually(t, fmt.Sprintf("both-%d to run with retention.ms 4000000", p), func() bool { return hosted.log.Config().RetentionMs == 4000000 })
	}
	for _, tc := range []struct {
		n          *Node
		own, other string
	}{{a, "1", "2"}, {b, "2", "1"}} {
		c := dialRaw(t, tc.n)
		d := c.roundTrip(describeConfigsReq(4, false, false,
			configResource(kmsg.ConfigResourceTypeBroker, tc.own, "node.id", "process.roles"),
			configResource(kmsg.ConfigResourceTypeBroker, tc.other, "node.id"))).(*kmsg.DescribeConfigsResponse)
		if id := describedConfig(t, d.Resources[0], "node.id"); *id.Value != tc.own {
			t.Fatalf("node %s describes node.id %s", tc.own, *id.Value)
		}
		if d.Resources[1].ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("node %s describing broker %s: code %d", tc.own, tc.other, d.Resources[1].ErrorCode)
		}
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(1)
		req.EndpointType = endpointTypeBroker
		dc := c.roundTrip(req).(*kmsg.DescribeClusterResponse)
		// The quorum's cluster id, on both nodes.
		if len(dc.Brokers) != 2 || dc.ClusterID != tc.n.ClusterID() || dc.ClusterID != a.ClusterID() {
			t.Fatalf("describe cluster on node %s: %+v", tc.own, dc)
		}
	}
}
