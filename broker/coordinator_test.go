package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/internal/testutil"
)

// groupTestSettings keep __consumer_offsets small and rebalances quick.
var groupTestSettings = map[string]string{
	"offsets.topic.num.partitions":     "3",
	"group.initial.rebalance.delay.ms": "0",
	"group.min.session.timeout.ms":     "100",
}

func withSettings(extra map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range groupTestSettings {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// findCoordinator asks n for group's coordinator until the answer is not
// retriable (the first one creates __consumer_offsets).
func findCoordinator(t testing.TB, c *rawConn, groupID string) *kmsg.FindCoordinatorResponse {
	t.Helper()
	var resp *kmsg.FindCoordinatorResponse
	testutil.Within(testWait, func() bool { // past the deadline: the last answer
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(0)
		req.CoordinatorKey = groupID
		resp = c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		return resp.ErrorCode != kerr.CoordinatorNotAvailable.Code
	})
	return resp
}

// waitLoaded waits until group's __consumer_offsets partition is loaded
// here.
func waitLoaded(t testing.TB, n *Node, groupID string) {
	t.Helper()
	testutil.Eventually(t, testWait, func() error {
		_, err := n.groups.partitionOf(groupID)
		return err
	}, "group %s to load", groupID)
}

func commitRaw(t *testing.T, c *rawConn, version int16, groupID, topic string, partition int32, offset int64, md *string) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(version)
	req.Group, req.Generation = groupID, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.Metadata, rp.LeaderEpoch = partition, offset, md, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("commit response shape %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func TestFindCoordinatorCreatesOffsetsTopicAndAnswersV0AndBatchedV4(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	c := dialRaw(t, n)
	if n.groups.numPartitions() != 0 {
		t.Fatal("__consumer_offsets exists before anyone asked for a coordinator")
	}
	resp := findCoordinator(t, c, "g")
	addr := n.Addr()
	if resp.ErrorCode != 0 || resp.NodeID != 1 || resp.Host+":"+strconv.Itoa(int(resp.Port)) != addr {
		t.Fatalf("v0: %+v (want node 1 at %s)", resp, addr)
	}
	if got := n.groups.numPartitions(); got != 3 {
		t.Fatalf("__consumer_offsets has %d partitions, want offsets.topic.num.partitions=3", got)
	}

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(4)
	req.CoordinatorKeys = []string{"a", "b", ""}
	r4 := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if len(r4.Coordinators) != 3 {
		t.Fatalf("v4: %d coordinators", len(r4.Coordinators))
	}
	for i, want := range []int16{0, 0, kerr.InvalidRequest.Code} {
		co := r4.Coordinators[i]
		if co.Key != req.CoordinatorKeys[i] || co.ErrorCode != want {
			t.Fatalf("v4 key %q: %+v, want code %d", req.CoordinatorKeys[i], co, want)
		}
		if want == 0 && (co.NodeID != 1 || co.Host+":"+strconv.Itoa(int(co.Port)) != addr) {
			t.Fatalf("v4 key %q: %+v", co.Key, co)
		}
		if want != 0 && (co.NodeID != -1 || co.Port != -1) {
			t.Fatalf("v4 error answer %+v, want node -1 port -1", co)
		}
	}
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(3)
	req.CoordinatorKey, req.CoordinatorType = "txn", 1
	if r := c.roundTrip(req).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 || r.NodeID != 1 {
		t.Fatalf("transaction coordinator: %+v", r) // txn_coordinator_test.go tests it further
	}

	// Internal in Metadata, compacted, and closed to clients' produce.
	adm := newAdmin(t, n)
	md, err := adm.Metadata(testCtx(t), offsetsTopic)
	if err != nil || !md.Topics[offsetsTopic].IsInternal {
		t.Fatalf("metadata: %v internal=%v", err, md.Topics[offsetsTopic].IsInternal)
	}
	cfgs, err := adm.DescribeTopicConfigs(testCtx(t), offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On(offsetsTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cf := range rc.Configs {
		if cf.Key == "cleanup.policy" {
			found = cf.MaybeValue() == "compact"
		}
	}
	if !found {
		t.Fatalf("cleanup.policy of %s is not compact: %+v", offsetsTopic, rc.Configs)
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.SetVersion(9)
	pr.Acks, pr.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = offsetsTopic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = recordBatch(time.Now().UnixMilli(), "x")
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	if r := c.roundTrip(pr).(*kmsg.ProduceResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("client produce to %s: code %d, want INVALID_TOPIC_EXCEPTION", offsetsTopic, r.Topics[0].Partitions[0].ErrorCode)
	}
}

func TestOffsetCommitFetchRoundTripSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, groupTestSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 2, nil)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 5, LeaderEpoch: -1, Metadata: "hello"})
	os.Add(kadm.Offset{Topic: "t", Partition: 1, At: 9, LeaderEpoch: 0})
	resp, err := adm.CommitOffsets(testCtx(t), "g", os)
	if err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v / %v", err, resp.Error())
	}
	check := func(adm *kadm.Client) {
		t.Helper()
		got, err := adm.FetchOffsets(testCtx(t), "g")
		if err != nil || got.Error() != nil {
			t.Fatalf("fetch: %v / %v", err, got.Error())
		}
		o0, ok0 := got.Lookup("t", 0)
		o1, ok1 := got.Lookup("t", 1)
		if !ok0 || !ok1 || o0.At != 5 || o0.Metadata != "hello" || o1.At != 9 || o1.LeaderEpoch != 0 {
			t.Fatalf("fetched %+v %+v", o0, o1)
		}
	}
	check(adm)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := startNode(t, dir, groupTestSettings)
	check(newAdmin(t, n2))
}

func TestOffsetCommitErrors(t *testing.T) {
	n := startNode(t, t.TempDir(), withSettings(map[string]string{"offset.metadata.max.bytes": "4"}))
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	long, short := "12345", "1234"
	for _, tc := range []struct {
		name  string
		group string
		topic string
		part  int32
		md    *string
		want  int16
	}{
		{"ok", "g", "t", 0, &short, 0},
		{"metadata too large", "g", "t", 0, &long, kerr.OffsetMetadataTooLarge.Code},
		{"unknown partition", "g", "t", 7, nil, kerr.UnknownTopicOrPartition.Code},
		{"unknown topic", "g", "nope", 0, nil, kerr.UnknownTopicOrPartition.Code},
		{"empty group id", "", "t", 0, nil, kerr.InvalidGroupID.Code},
	} {
		for _, v := range []int16{0, 2, 8} {
			if got := commitRaw(t, c, v, tc.group, tc.topic, tc.part, 3, tc.md); got != tc.want {
				t.Errorf("%s v%d: code %d, want %d", tc.name, v, got, tc.want)
			}
		}
	}
	// A member commit for a group nobody joined: Kafka's ILLEGAL_GENERATION.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation, req.MemberID = "g2", 3, "m"
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	waitLoaded(t, n, "g2")
	if r := c.roundTrip(req).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("member commit to an unknown group: code %d", r.Topics[0].Partitions[0].ErrorCode)
	}
}

func TestOffsetFetchSeveralGroupsV8(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 3, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g1")
	for _, g := range []string{"g1", "g2", "none"} {
		waitLoaded(t, n, g)
	}
	md := "m"
	if commitRaw(t, c, 8, "g1", "t", 0, 10, &md) != 0 || commitRaw(t, c, 8, "g1", "t", 2, 12, nil) != 0 || commitRaw(t, c, 8, "g2", "t", 1, 21, nil) != 0 {
		t.Fatal("commits failed")
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(8)
	g1 := kmsg.NewOffsetFetchRequestGroup()
	g1.Group = "g1" // Topics nil: everything committed
	g2 := kmsg.NewOffsetFetchRequestGroup()
	g2.Group = "g2"
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = "t", []int32{0, 1}
	g2.Topics = []kmsg.OffsetFetchRequestGroupTopic{gt}
	g3 := kmsg.NewOffsetFetchRequestGroup()
	g3.Group = "none"
	g3.Topics = []kmsg.OffsetFetchRequestGroupTopic{gt}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g1, g2, g3}
	resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 3 {
		t.Fatalf("%d groups answered", len(resp.Groups))
	}
	type po struct {
		p  int32
		o  int64
		md string
	}
	flatten := func(g kmsg.OffsetFetchResponseGroup) []po {
		var out []po
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Metadata == nil {
					out = append(out, po{p.Partition, -99, ""})
					continue
				}
				out = append(out, po{p.Partition, p.Offset, *p.Metadata})
			}
		}
		return out
	}
	want := [][]po{
		{{0, 10, "m"}, {2, 12, ""}},
		{{0, -1, ""}, {1, 21, ""}},
		{{0, -1, ""}, {1, -1, ""}},
	}
	for i, g := range resp.Groups {
		got := flatten(g)
		if g.ErrorCode != 0 || len(got) != len(want[i]) {
			t.Fatalf("group %s: code %d offsets %v, want %v", g.Group, g.ErrorCode, got, want[i])
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Fatalf("group %s: offsets %v, want %v", g.Group, got, want[i])
			}
		}
	}
	// v1 has no top-level error code: a group elsewhere says so per partition.
	n.groups.offsetsPartitionChanged(group.PartitionFor("g1", 3), nil)
	old := kmsg.NewPtrOffsetFetchRequest()
	old.SetVersion(1)
	old.Group = "g1"
	ot := kmsg.NewOffsetFetchRequestTopic()
	ot.Topic, ot.Partitions = "t", []int32{0}
	old.Topics = []kmsg.OffsetFetchRequestTopic{ot}
	r1 := c.roundTrip(old).(*kmsg.OffsetFetchResponse)
	if r1.Topics[0].Partitions[0].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("v1 on a partition not owned: %+v", r1.Topics[0].Partitions[0])
	}
}

func TestOffsetDeleteRules(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	createTopic(t, adm, "u", 1, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	waitLoaded(t, n, "missing")

	del := func(groupID string, topics ...string) *kmsg.OffsetDeleteResponse {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = groupID
		for _, tn := range topics {
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = tn
			rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
			req.Topics = append(req.Topics, rt)
		}
		return c.roundTrip(req).(*kmsg.OffsetDeleteResponse)
	}
	if r := del("missing", "t"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %d", r.ErrorCode)
	}

	// A consumer group member subscribed to t.
	ctx := testCtx(t)
	jr := joinConsumer(t, n, "g", "t")
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(8)
	commit.Group, commit.Generation, commit.MemberID = "g", jr.Generation, jr.MemberID
	for _, tn := range []string{"t", "u"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tn
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 4
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
		commit.Topics = append(commit.Topics, rt)
	}
	cr := c.roundTrip(commit).(*kmsg.OffsetCommitResponse)
	for _, rt := range cr.Topics {
		if rt.Partitions[0].ErrorCode != 0 {
			t.Fatalf("member commit %s: %d", rt.Topic, rt.Partitions[0].ErrorCode)
		}
	}
	r := del("g", "t", "u", "nope")
	if r.ErrorCode != 0 || len(r.Topics) != 3 {
		t.Fatalf("delete in a Stable group: %+v", r)
	}
	for i, want := range []int16{kerr.GroupSubscribedToTopic.Code, 0, kerr.UnknownTopicOrPartition.Code} {
		if got := r.Topics[i].Partitions[0].ErrorCode; got != want {
			t.Fatalf("delete %s: code %d, want %d", r.Topics[i].Topic, got, want)
		}
	}
	if _, ok := n.groups.store.Fetch("g", group.TopicPartition{Topic: "u", Partition: 0}); ok {
		t.Fatal("offset of an unsubscribed topic not deleted")
	}

	// Once the member leaves the group is Empty: everything may go.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.SetVersion(3)
	leave.Group = "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = jr.MemberID
	leave.Members = []kmsg.LeaveGroupRequestMember{lm}
	if lr := n.groups.members.LeaveGroup(ctx, leave); lr.ErrorCode != 0 {
		t.Fatalf("leave: %d", lr.ErrorCode)
	}
	if r := del("g", "t"); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete in an Empty group: %+v", r)
	}
	if _, ok := n.groups.store.Fetch("g", group.TopicPartition{Topic: "t", Partition: 0}); ok {
		t.Fatal("offset not deleted in an Empty group")
	}
}

func TestOffsetsExpireAfterRetentionInEmptyGroups(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, groupTestSettings)
	cfg.OffsetsRetention = 300 * time.Millisecond
	cfg.OffsetsRetentionCheckInterval = 50 * time.Millisecond
	n, err := Open(Options{Config: cfg, Logger: testLogger(), StartTimeout: testWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	if code := commitRaw(t, c, 8, "g", "t", 0, 7, nil); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if _, ok := n.groups.store.Fetch("g", group.TopicPartition{Topic: "t", Partition: 0}); !ok {
		t.Fatal("commit not visible")
	}
	testutil.Eventually(t, testWait, func() error {
		_, ok := n.groups.store.Fetch("g", group.TopicPartition{Topic: "t", Partition: 0})
		_, known := n.groups.members.GroupState("g")
		if ok || known {
			return fmt.Errorf("offset still there after retention (offset kept %v, group kept %v)", ok, known)
		}
		return nil
	}, "the offset and the group to expire")
	n.Close()
	// The expiry was written as tombstones: a reload does not bring it back.
	n2 := startNode(t, dir, groupTestSettings)
	waitLoaded(t, n2, "g")
	if _, ok := n2.groups.store.Fetch("g", group.TopicPartition{Topic: "t", Partition: 0}); ok {
		t.Fatal("expired offset back after restart")
	}
}

func TestOffsetRequestsGetLoadInProgressDuringLoad(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	release := make(chan struct{})
	hook := func(int32) {
		select {
		case <-release:
		case <-time.After(testWait):
		}
	}
	n.groups.loadHook.Store(&hook)
	c := dialRaw(t, n)
	if r := findCoordinator(t, c, "g"); r.ErrorCode != 0 {
		t.Fatalf("find coordinator: %d", r.ErrorCode)
	}
	if code := commitRaw(t, c, 8, "g", "t", 0, 1, nil); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("commit while loading: %d", code)
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(8)
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "g"
	req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	if r := c.roundTrip(req).(*kmsg.OffsetFetchResponse); r.Groups[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("fetch while loading: %d", r.Groups[0].ErrorCode)
	}
	close(release)
	waitLoaded(t, n, "g")
	if code := commitRaw(t, c, 8, "g", "t", 0, 1, nil); code != 0 {
		t.Fatalf("commit after load: %d", code)
	}
}

func TestConsumerGroupResumesAtCommittedOffsetAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	prod := newClient(t, n, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const total = 40
	for i := range total {
		r := &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i % 2)}
		if err := prod.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer := func(n *Node) *kgo.Client {
		return newClient(t, n, kgo.ConsumerGroup("cg"), kgo.ConsumeTopics("t"),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	}
	// First consumer: read until it has 15 records, commit exactly those,
	// then stop without committing the rest it may have buffered.
	seen := map[string]bool{}
	cl := consumer(n)
	var toCommit []*kgo.Record
	for len(toCommit) < 15 {
		fs := cl.PollRecords(testCtx(t), 15-len(toCommit))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { toCommit = append(toCommit, r) })
	}
	if err := cl.CommitRecords(testCtx(t), toCommit...); err != nil {
		t.Fatal(err)
	}
	for _, r := range toCommit {
		seen[string(r.Value)] = true
	}
	cl.Close()

	n.Close()
	n2 := startNode(t, dir, groupTestSettings)
	cl2 := consumer(n2)
	var rest []*kgo.Record
	for len(seen)+len(rest) < total {
		fs := cl2.PollFetches(testCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { rest = append(rest, r) })
	}
	for _, r := range rest {
		if seen[string(r.Value)] {
			t.Fatalf("record %s read again after its offset was committed", r.Value)
		}
		seen[string(r.Value)] = true
	}
	if len(seen) != total {
		t.Fatalf("saw %d distinct records, want %d (a gap)", len(seen), total)
	}
	// The lag gauge: the second consumer has committed nothing, so the
	// lag is HW minus the first consumer's commit.
	if err := cl2.CommitUncommittedOffsets(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	lags := gatherLag(t, n2)
	if len(lags) != 2 || lags["cg/t/0"] != 0 || lags["cg/t/1"] != 0 {
		t.Fatalf("lag after consuming everything: %v (store %+v, rest %d)", lags, n2.groups.store.FetchAll("cg"), len(rest))
	}
}

// gatherLag reads strata_consumer_group_lag from n's registry, keyed
// group/topic/partition.
func gatherLag(t *testing.T, n *Node) map[string]float64 {
	t.Helper()
	g, ok := n.reg.(prometheus.Gatherer)
	if !ok {
		t.Fatal("registry is not a gatherer")
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "strata_consumer_group_lag" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[l["group"]+"/"+l["topic"]+"/"+l["partition"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestConsumerGroupLagGauge(t *testing.T) {
	n := startNode(t, t.TempDir(), groupTestSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	prod := newClient(t, n, kgo.DefaultProduceTopic("t"))
	for i := range 10 {
		if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 3, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(testCtx(t), "lagging", os); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	if got := gatherLag(t, n); got["lagging/t/0"] != 7 {
		t.Fatalf("lag %v, want lagging/t/0 = 7", got)
	}
}

// pyGroupScript is a librdkafka consumer (python3-confluent-kafka) in a
// group: argv bootstrap, group, topic, count. It first prints the
// committed offsets it finds (OffsetFetch through librdkafka's own codec),
// then consumes count records from there, commits synchronously and prints
// the values read and the offsets committed, one JSON line each.
const pyGroupScript = `
import json, sys
import confluent_kafka as ck
bootstrap, group, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = ck.Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": group,
    "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
md = c.list_topics(topic, timeout=10)
tps = [ck.TopicPartition(topic, p) for p in sorted(md.topics[topic].partitions)]
before = c.committed(tps, timeout=10)
print(json.dumps({"committed_before": {str(tp.partition): tp.offset for tp in before}}))
c.subscribe([topic])
vals = []
while len(vals) < count:
    m = c.poll(10)
    if m is None:
        print("timeout", file=sys.stderr); sys.exit(2)
    if m.error():
        print(str(m.error()), file=sys.stderr); sys.exit(3)
    vals.append(m.value().decode())
    c.commit(message=m, asynchronous=False)
after = c.committed(tps, timeout=10)
print(json.dumps({"values": vals, "committed_after": {str(tp.partition): tp.offset for tp in after}}))
c.close()
`

// TestLibrdkafkaCommitsAndResumesWithFranzGo: offsets committed by kgo are
// read by librdkafka (FindCoordinator, OffsetFetch in its codec), which
// resumes there, commits its own progress (OffsetCommit), and kadm reads
// that back.
func TestLibrdkafkaCommitsAndResumesWithFranzGo(t *testing.T) {
	py := needClient(t, systemPython, "-c", "import confluent_kafka")
	n := startNode(t, t.TempDir(), groupTestSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	prod := newClient(t, n, kgo.DefaultProduceTopic("t"))
	for i := range 10 {
		if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "t", Partition: 0, At: 4, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(testCtx(t), "shared", os); err != nil || r.Error() != nil {
		t.Fatalf("kadm commit: %v %v", err, r.Error())
	}
	out := runClient(t, nil, py, "-c", pyGroupScript, n.Addr(), "shared", "t", "3")
	lines := jsonLines[map[string]any](t, out)
	if len(lines) != 2 {
		t.Fatalf("client output: %s", out)
	}
	if got := lines[0]["committed_before"].(map[string]any)["0"]; got != float64(4) {
		t.Fatalf("librdkafka read committed %v, want 4", got)
	}
	vals := lines[1]["values"].([]any)
	if len(vals) != 3 || vals[0] != "4" || vals[2] != "6" {
		t.Fatalf("librdkafka resumed with %v, want 4 5 6", vals)
	}
	if got := lines[1]["committed_after"].(map[string]any)["0"]; got != float64(7) {
		t.Fatalf("librdkafka committed %v, want 7", got)
	}
	got, err := adm.FetchOffsets(testCtx(t), "shared")
	if err != nil || got.Error() != nil {
		t.Fatalf("kadm fetch: %v %v", err, got.Error())
	}
	if o, ok := got.Lookup("t", 0); !ok || o.At != 7 {
		t.Fatalf("kadm reads %+v after librdkafka's commit, want 7", o)
	}
}

// BenchmarkOffsetCommit measures one OffsetCommit round trip over one
// connection: validation, one batch appended to __consumer_offsets, the
// answer (partitions=1: one offset per request; partitions=100: a
// consumer's periodic commit of many partitions).
func BenchmarkOffsetCommit(b *testing.B) {
	for _, parts := range []int32{1, 100} {
		b.Run("partitions="+strconv.Itoa(int(parts)), func(b *testing.B) {
			n := startNode(b, b.TempDir(), groupTestSettings)
			createTopic(b, newAdmin(b, n), "t", parts, nil)
			c := dialRaw(b, n)
			testutil.Eventually(b, testWait, func() bool {
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.CoordinatorKey = "bench"
				return c.roundTrip(req).(*kmsg.FindCoordinatorResponse).ErrorCode == 0
			}, "a coordinator")
			waitLoaded(b, n, "bench")
			req := kmsg.NewPtrOffsetCommitRequest()
			req.SetVersion(8)
			req.Group, req.Generation = "bench", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "t"
			for p := range parts {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
			c.nc.SetDeadline(time.Time{})
			b.ResetTimer()
			for i := range b.N {
				for p := range rt.Partitions {
					rt.Partitions[p].Offset = int64(i)
				}
				r := c.roundTrip(req).(*kmsg.OffsetCommitResponse)
				if r.Topics[0].Partitions[0].ErrorCode != 0 {
					b.Fatalf("commit: %d", r.Topics[0].Partitions[0].ErrorCode)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)*float64(parts)/b.Elapsed().Seconds(), "offsets/s")
		})
	}
}

// TestGroupMetadataLoadsAndDeleteGroupsSurvivesRestart: a consumer group's
// GroupMetadata record brings it back Empty after a restart (the load hands
// it to the membership), and DeleteGroups' tombstones keep it and its
// offsets gone across the next one.
func TestGroupMetadataLoadsAndDeleteGroupsSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, groupTestSettings)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	prod := newClient(t, n, kgo.DefaultProduceTopic("t"))
	if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, n, kgo.ConsumerGroup("dg"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < 1; {
		fs := cl.PollFetches(testCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += len(fs.Records())
	}
	if err := cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cl.Close() // leaves the group: Empty, stored
	n.Close()

	n = startNode(t, dir, groupTestSettings)
	adm := newAdmin(t, n)
	dg, err := adm.DescribeGroups(testCtx(t), "dg")
	if err != nil || dg["dg"].Err != nil || dg["dg"].State != "Empty" || dg["dg"].ProtocolType != "consumer" {
		t.Fatalf("after restart: %v %+v", err, dg["dg"])
	}
	if o, err := adm.FetchOffsets(testCtx(t), "dg"); err != nil || o.Error() != nil {
		t.Fatalf("fetch: %v", err)
	} else if r, ok := o.Lookup("t", 0); !ok || r.At != 1 {
		t.Fatalf("committed %+v, want 1", r)
	}
	del, err := adm.DeleteGroups(testCtx(t), "dg")
	if err != nil || del["dg"].Err != nil {
		t.Fatalf("delete: %v %+v", err, del["dg"])
	}
	n.Close()

	n = startNode(t, dir, groupTestSettings)
	adm = newAdmin(t, n)
	waitLoaded(t, n, "dg")
	listed, err := adm.ListGroups(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["dg"]; ok {
		t.Fatalf("deleted group listed after restart: %+v", listed)
	}
	if o, err := adm.FetchOffsets(testCtx(t), "dg"); err != nil || o.Error() != nil {
		t.Fatalf("fetch: %v", err)
	} else if r, ok := o.Lookup("t", 0); ok && r.At >= 0 {
		t.Fatalf("deleted group's offset back after restart: %+v", r)
	}
}

// joinConsumer makes a one-member consumer group subscribed to topics,
// through the membership state machine in process (two-step join, then
// sync), and returns the join answer (member id, generation).
func joinConsumer(t *testing.T, n *Node, groupID string, topics ...string) *kmsg.JoinGroupResponse {
	t.Helper()
	ctx := testCtx(t)
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(5)
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = groupID, 10000, 10000, "consumer"
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = []kmsg.JoinGroupRequestProtocol{proto}
	jr := n.groups.members.JoinGroup(ctx, join)
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		join.MemberID = jr.MemberID
		jr = n.groups.members.JoinGroup(ctx, join)
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %d", jr.ErrorCode)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(3)
	sync.Group, sync.Generation, sync.MemberID = groupID, jr.Generation, jr.MemberID
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = jr.MemberID, []byte{}
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{sa}
	if sr := n.groups.members.SyncGroup(ctx, sync); sr.ErrorCode != 0 {
		t.Fatalf("sync: %d", sr.ErrorCode)
	}
	return jr
}

// TestOffsetsOfUnsubscribedTopicsExpireInStableGroups: KIP-496. A Stable
// consumer group keeps the offsets of the topics its members subscribe to
// past the retention, and loses the others.
func TestOffsetsOfUnsubscribedTopicsExpireInStableGroups(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), groupTestSettings)
	cfg.OffsetsRetention = 200 * time.Millisecond
	cfg.OffsetsRetentionCheckInterval = 30 * time.Millisecond
	n, err := Open(Options{Config: cfg, Logger: testLogger(), StartTimeout: testWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	createTopic(t, adm, "u", 1, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "s")
	waitLoaded(t, n, "s")
	jr := joinConsumer(t, n, "s", "t")
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(8)
	commit.Group, commit.Generation, commit.MemberID = "s", jr.Generation, jr.MemberID
	for _, tn := range []string{"t", "u"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tn
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
		commit.Topics = append(commit.Topics, rt)
	}
	for _, rt := range c.roundTrip(commit).(*kmsg.OffsetCommitResponse).Topics {
		if rt.Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit %s: %d", rt.Topic, rt.Partitions[0].ErrorCode)
		}
	}
	testutil.Eventually(t, testWait, func() bool {
		_, ok := n.groups.store.Fetch("s", group.TopicPartition{Topic: "u", Partition: 0})
		return !ok
	}, "the offset of an unsubscribed topic to expire")
	// Several retention periods later the subscribed topic's offset stays
	// (the member's heartbeats are not needed: its session is 10s): as
	// many expiry passes as run in three retention periods, each past the
	// retention of both offsets (committed together). The first pass
	// counted may be the one in progress.
	more := uint64(3*cfg.OffsetsRetention/cfg.OffsetsRetentionCheckInterval) + 1
	passes := n.groups.expiryPasses.Load() + more
	testutil.Eventually(t, testWait, func() bool { return n.groups.expiryPasses.Load() >= passes }, "%d more offset expiry passes", more-1)
	if st, _ := n.groups.members.GroupState("s"); st != "Stable" {
		t.Fatalf("group state %s, want Stable", st)
	}
	if _, ok := n.groups.store.Fetch("s", group.TopicPartition{Topic: "t", Partition: 0}); !ok {
		t.Fatal("offset of a subscribed topic expired in a Stable group")
	}
}

// TestOffsetsLoadFromCompactedLog: __consumer_offsets is compacted by the
// storage cleaner (many commits of the same keys shrink to the newest per
// key, a deleted group's tombstones stay until delete.retention.ms), and a
// restarted broker loads the compacted log (offset gaps, rewritten
// segments) to the same committed offsets.
func TestOffsetsLoadFromCompactedLog(t *testing.T) {
	dir := t.TempDir()
	settings := withSettings(map[string]string{"offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "4096"})
	n := startNode(t, dir, settings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 3, nil)
	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	const rounds = 200
	for i := range rounds {
		for p := range int32(3) {
			if code := commitRaw(t, c, 8, "g", "t", p, int64(i*10)+int64(p), nil); code != 0 {
				t.Fatalf("commit: %d", code)
			}
		}
	}
	if code := commitRaw(t, c, 8, "gone", "t", 0, 5, nil); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if r, err := adm.DeleteGroups(testCtx(t), "gone"); err != nil || r["gone"].Err != nil {
		t.Fatalf("delete group: %v %+v", err, r["gone"])
	}
	p := n.partition(offsetsTopic, 0)
	end := p.log.LogEndOffset()
	if runs := n.store.RunCleaner(); runs == 0 {
		t.Fatal("the cleaner did not clean __consumer_offsets")
	}
	st := n.store.CleanerStats()
	if st.BytesWritten*5 > st.BytesRead {
		t.Fatalf("cleaning %d bytes kept %d: not compacted", st.BytesRead, st.BytesWritten)
	}
	if p.log.LogEndOffset() != end {
		t.Fatalf("log end moved %d -> %d", end, p.log.LogEndOffset())
	}
	n.Close()

	n = startNode(t, dir, settings)
	waitLoaded(t, n, "g")
	got := n.groups.store.FetchAll("g")
	if len(got) != 3 {
		t.Fatalf("after compaction and restart: %+v", got)
	}
	for _, o := range got {
		if want := int64((rounds-1)*10) + int64(o.Partition); o.Offset.Offset != want {
			t.Fatalf("t/%d: %d, want %d", o.Partition, o.Offset.Offset, want)
		}
	}
	if len(n.groups.store.FetchAll("gone")) != 0 {
		t.Fatal("deleted group's offsets back after compaction and restart")
	}
	if _, ok := n.groups.members.GroupState("gone"); ok {
		t.Fatal("deleted group back after compaction and restart")
	}
}
