package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/deliverycheck"
	"github.com/strata-io/strata/internal/netfault"
	"github.com/strata-io/strata/internal/testutil"
)

// reassign sends one AlterPartitionReassignments through kadm and returns
// the partition's error (nil replicas cancel).
func reassign(t testing.TB, adm *kadm.Client, topic string, p int32, replicas []int32) error {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, replicas)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatalf("AlterPartitionReassignments: %v", err)
	}
	r, ok := res[topic][p]
	if !ok {
		t.Fatalf("AlterPartitionReassignments: no answer for %s-%d in %+v", topic, p, res)
	}
	return r.Err
}

// listReassignments lists topic-p's reassignment through kadm (ok false:
// none in progress).
func listReassignments(t testing.TB, adm *kadm.Client, topic string, p int32) (kadm.ListPartitionReassignmentsResponse, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	res, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {p: {}}})
	if err != nil {
		t.Fatalf("ListPartitionReassignments: %v", err)
	}
	r, ok := res[topic][p]
	return r, ok
}

// logDir is broker id's directory of topic-p's log ("" when it hosts none).
func (c *testCluster) logDir(id int32, topic string, p int32) string {
	if n := c.node(id); n != nil {
		if l, ok := n.store.Get(topic, p); ok {
			return l.Dir()
		}
	}
	return ""
}

// waitLogDir waits until broker id hosts topic-p and returns its log
// directory.
func (c *testCluster) waitLogDir(id int32, topic string, p int32) string {
	c.t.Helper()
	var dir string
	testutil.Eventually(c.t, testWait, func() bool {
		dir = c.logDir(id, topic, p)
		return dir != ""
	}, "broker %d hosts %s-%d", id, topic, p)
	return dir
}

// waitLogGone waits until broker id no longer hosts topic-p and the log
// directory dir (where it was) is gone (Kafka's StopReplica with delete).
func (c *testCluster) waitLogGone(id int32, topic string, p int32, dir string) {
	c.t.Helper()
	if dir == "" {
		c.t.Fatalf("broker %d had no log of %s-%d", id, topic, p)
	}
	if err := testutil.Within(testWait, func() error {
		if d := c.logDir(id, topic, p); d != "" {
			return fmt.Errorf("broker %d still hosts %s-%d in %s", id, topic, p, d)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("broker %d: %s still there (%v)", id, dir, err)
		}
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
}

// TestReassignmentAPIs drives AlterPartitionReassignments and
// ListPartitionReassignments with kadm on four brokers. Broker 4 is cut
// from the leader (2), so a reassignment adding it stays in progress:
// List shows the union replicas with adding and removing, Metadata the
// union; errors are Kafka's; a cancel reverts (and the adding replica's
// log is deleted), a second cancel has nothing to cancel. Healed, the same
// reassignment completes: the leader moves off the removed broker 2 to
// 4, and broker 2's log directory is gone.
func TestReassignmentAPIs(t *testing.T) {
	nw := netfault.New(netfault.Refuse)
	t.Cleanup(func() { nw.Close() })
	c := startProxiedCluster(t, 4, faultSettings, nw)
	const topic = "reassign-apis"
	cl := c.client()
	adm := kadm.NewClient(cl)
	createAssigned(t, cl, topic, nil, []int32{2, 3})
	c.waitFullISR(topic, 0)
	nw.Cut(nodeIP(4), nodeIP(2)) // 4 cannot fetch from the leader

	if err := reassign(t, adm, topic, 0, []int32{4, 3}); err != nil {
		t.Fatalf("reassign to [4 3]: %v", err)
	}
	r, ok := listReassignments(t, adm, topic, 0)
	if !ok || !slices.Equal(r.Replicas, []int32{4, 3, 2}) || !slices.Equal(r.AddingReplicas, []int32{4}) || !slices.Equal(r.RemovingReplicas, []int32{2}) {
		t.Fatalf("ListPartitionReassignments: %+v (found %t), want replicas [4 3 2] adding [4] removing [2]", r, ok)
	}
	// Every partition (null topics), through the raw request: the same one.
	lreq := kmsg.NewPtrListPartitionReassignmentsRequest()
	lresp, err := lreq.RequestWith(context.Background(), cl)
	if err != nil || lresp.ErrorCode != 0 || len(lresp.Topics) != 1 || lresp.Topics[0].Topic != topic || len(lresp.Topics[0].Partitions) != 1 {
		t.Fatalf("ListPartitionReassignments of all: %+v, %v", lresp, err)
	}
	// Metadata shows the union while in progress; the adding replica has
	// opened its log.
	testutil.Eventually(t, testWait, func() bool {
		md, err := adm.Metadata(context.Background(), topic)
		if err != nil {
			return false
		}
		p := md.Topics[topic].Partitions[0]
		return slices.Equal(p.Replicas, []int32{4, 3, 2}) && p.Leader == 2
	}, "Metadata with replicas [4 3 2], leader 2")
	// DescribeTopicPartitions too, from whichever broker answers: each
	// learns the change from its own metadata stream (seen in CI: a
	// broker a moment behind the one Metadata asked).
	testutil.Eventually(t, testWait, func() error {
		dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		dt.Topic = topic
		dreq.Topics = append(dreq.Topics, dt)
		dresp, err := dreq.RequestWith(context.Background(), cl)
		if err != nil || len(dresp.Topics) != 1 || len(dresp.Topics[0].Partitions) != 1 || !slices.Equal(dresp.Topics[0].Partitions[0].Replicas, []int32{4, 3, 2}) {
			return fmt.Errorf("DescribeTopicPartitions: %+v, %v; want replicas [4 3 2]", dresp, err)
		}
		return nil
	}, "DescribeTopicPartitions with replicas [4 3 2]")
	// The leader's gauges (Kafka's): one reassigning partition, not
	// under-replicated (the adding replica does not count as missing).
	testutil.Eventually(t, testWait, func() bool {
		m := scrapeMetrics(t, c.node(2))
		r, _ := m.value("strata_broker_reassigning_partitions")
		u, _ := m.value("strata_broker_under_replicated_partitions")
		rf, _ := m.value("strata_partition_replicas", "topic", topic, "partition", "0")
		return r == 1 && u == 0 && rf == 2
	}, "leader 2 reports one reassigning partition of replication factor 2, not under-replicated")
	dir4 := c.waitLogDir(4, topic, 0) // the adding replica opened its log

	for _, tc := range []struct {
		topic    string
		p        int32
		replicas []int32
		want     error
	}{
		{"no-such-topic", 0, []int32{1}, kerr.UnknownTopicOrPartition},
		{topic, 5, []int32{1}, kerr.UnknownTopicOrPartition},
		{topic, 0, []int32{}, kerr.InvalidReplicaAssignment},
		{topic, 0, []int32{3, 3}, kerr.InvalidReplicaAssignment},
		{topic, 0, []int32{3, 9}, kerr.InvalidReplicaAssignment},
	} {
		if err := reassign(t, adm, tc.topic, tc.p, tc.replicas); !errors.Is(err, tc.want) {
			t.Errorf("reassign %s-%d to %v: %v, want %v", tc.topic, tc.p, tc.replicas, err, tc.want)
		}
	}

	// v1 without AllowReplicationFactorChange (KIP-860): the original
	// replication factor (2) must stay.
	areq := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	areq.AllowReplicationFactorChange = false
	at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	at.Topic = topic
	ap := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	ap.Replicas = []int32{4, 3, 1}
	at.Partitions = append(at.Partitions, ap)
	areq.Topics = append(areq.Topics, at)
	aresp, err := areq.RequestWith(context.Background(), cl)
	if err != nil || len(aresp.Topics) != 1 || len(aresp.Topics[0].Partitions) != 1 ||
		aresp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidReplicationFactor.Code || aresp.AllowReplicationFactorChange {
		t.Fatalf("v1 reassignment changing the replication factor: %+v, %v; want INVALID_REPLICATION_FACTOR", aresp, err)
	}

	// Cancel: back to the original replicas, in the union's order as
	// Kafka's revert leaves them ([3 2]); broker 4 deletes the log it had
	// started.
	if err := reassign(t, adm, topic, 0, nil); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if r, ok := listReassignments(t, adm, topic, 0); ok {
		t.Fatalf("still listed after the cancel: %+v", r)
	}
	st := c.waitPartition(topic, 0, "replicas [3 2]", func(st metadata.PartitionInfo) bool {
		return slices.Equal(st.Replicas, []int32{3, 2}) && !st.Reassigning()
	})
	if st.Leader != 2 {
		t.Fatalf("leader %d after the cancel, want 2", st.Leader)
	}
	c.waitLogGone(4, topic, 0, dir4)
	if err := reassign(t, adm, topic, 0, nil); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}

	// Healed, the reassignment completes: 4 catches up, joins the ISR,
	// the removed leader 2 gives way to 4 (the first of [4 3] in the ISR).
	nw.Heal()
	dir2 := c.waitLogDir(2, topic, 0)
	if err := reassign(t, adm, topic, 0, []int32{4, 3}); err != nil {
		t.Fatalf("reassign to [4 3] again: %v", err)
	}
	st = c.waitPartition(topic, 0, "reassignment to [4 3] complete", func(st metadata.PartitionInfo) bool {
		return slices.Equal(st.Replicas, []int32{4, 3}) && !st.Reassigning()
	})
	if st.Leader != 4 || !slices.Contains(st.ISR, 4) || slices.Contains(st.ISR, 2) {
		t.Fatalf("after the reassignment: %+v, want leader 4, ISR with 4 and without 2", st)
	}
	c.waitLogGone(2, topic, 0, dir2)
	if r, ok := listReassignments(t, adm, topic, 0); ok {
		t.Fatalf("still listed once complete: %+v", r)
	}
	testutil.Eventually(t, testWait, func() bool {
		v, _ := scrapeMetrics(t, c.node(4)).value("strata_broker_reassigning_partitions")
		return v == 0
	}, "new leader 4 reports no reassigning partition")
}

// TestReassignmentUnderLoad moves a partition under an idempotent
// acks=all load from [2 3 4] to the rotated [3 4 1] (the leader 2 is
// removed: leadership moves to 3) and back to [2 3 4]; nothing
// acknowledged is lost or duplicated, the replicas end byte-identical,
// and each removed replica's log directory is deleted.
func TestReassignmentUnderLoad(t *testing.T) {
	c := startCluster(t, 4, faultSettings)
	const topic = "reassign-load"
	createAssigned(t, c.client(), topic, faultTopicConfigs, []int32{2, 3, 4})
	c.waitFullISR(topic, 0)
	adm := kadm.NewClient(c.client())

	rc := deliverycheck.NewRecorder(true)
	cl, load := c.faultProducer(topic, rc, "reassign")
	res := &deliverycheck.FaultResult{Fault: "reassignment [2 3 4] → [3 4 1] → [2 3 4] (in-process)"}
	for _, step := range []struct {
		target  []int32
		removed int32
		leader  int32
	}{
		{[]int32{3, 4, 1}, 2, 3},
		{[]int32{2, 3, 4}, 1, 3},
	} {
		waitAcked(t, load, load.Stats().Acked+500)
		dir := c.waitLogDir(step.removed, topic, 0)
		if err := reassign(t, adm, topic, 0, step.target); err != nil {
			t.Fatalf("reassign to %v: %v", step.target, err)
		}
		st := c.waitPartition(topic, 0, fmt.Sprintf("reassignment to %v complete", step.target), func(st metadata.PartitionInfo) bool {
			return slices.Equal(st.Replicas, step.target) && !st.Reassigning()
		})
		if st.Leader != step.leader {
			t.Fatalf("leader %d after the reassignment to %v, want %d", st.Leader, step.target, step.leader)
		}
		c.waitLogGone(step.removed, topic, 0, dir)
		waitAcked(t, load, load.Stats().Acked+500)
		c.waitFullISR(topic, 0)
		res.Runs++
	}
	finishFaultRun(t, c, cl, topic, load, rc, res)
}

// TestReassignmentAwayFromStoppedBroker: a replica removed while its
// broker is down deletes its log at restart, when its metadata follower
// replays the reassignment (StopReplica with delete, as Kafka).
func TestReassignmentAwayFromStoppedBroker(t *testing.T) {
	c := startCluster(t, 3, faultSettings)
	const topic = "reassign-away"
	createAssigned(t, c.client(), topic, nil, []int32{3, 2})
	c.waitFullISR(topic, 0)
	dir := c.waitLogDir(2, topic, 0)
	c.stop(2)
	if err := reassign(t, kadm.NewClient(c.client()), topic, 0, []int32{3, 1}); err != nil {
		t.Fatalf("reassign to [3 1]: %v", err)
	}
	c.waitPartition(topic, 0, "reassignment to [3 1] complete", func(st metadata.PartitionInfo) bool {
		return slices.Equal(st.Replicas, []int32{3, 1}) && !st.Reassigning()
	})
	c.start(2)
	c.waitLogGone(2, topic, 0, dir)
}

// TestStrayReplicasAtStartFromASnapshot: broker 2 is down while one of
// its partitions is reassigned away and a topic it hosts is deleted, and
// the controller snapshots past both (every 8 entries) and compacts its
// log, so 2 restarts from a snapshot image that never shows either change
// (no delta for reconcile to delete by). Once caught up it deletes the
// removed replica's log (its topic id is the metadata's, the partition
// exists, 2 is not a replica: the data lives on [3 1]), sets the deleted
// topic's log aside as -stray (nothing proves it redundant), and keeps
// the log of the partition it still hosts, with its records.
func TestStrayReplicasAtStartFromASnapshot(t *testing.T) {
	const every = 8
	c := startClusterTuned(t, 3, faultSettings, nil, func(cfg *Config) { cfg.snapshotEntries = every })
	cl := c.client()
	for _, topic := range []string{"away", "gone", "kept"} {
		createAssigned(t, cl, topic, nil, []int32{3, 2})
		c.waitFullISR(topic, 0)
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte(topic)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dirs := map[string]string{}
	for _, topic := range []string{"away", "gone", "kept"} {
		dirs[topic] = c.waitLogDir(2, topic, 0)
		testutil.Eventually(t, testWait, func() bool {
			l, ok := c.node(2).store.Get(topic, 0)
			return ok && l.LogEndOffset() == 1
		}, "broker 2 holds %s-0's record", topic)
	}
	c.stop(2)
	adm := kadm.NewClient(cl)
	if err := reassign(t, adm, "away", 0, []int32{3, 1}); err != nil {
		t.Fatalf("reassign to [3 1]: %v", err)
	}
	c.waitPartition("away", 0, "reassignment to [3 1] complete", func(st metadata.PartitionInfo) bool {
		return slices.Equal(st.Replicas, []int32{3, 1}) && !st.Reassigning()
	})
	if resp, err := adm.DeleteTopics(testCtx(t), "gone"); err != nil || resp["gone"].Err != nil {
		t.Fatalf("delete gone: %v %+v", err, resp)
	}
	testutil.Eventually(t, testWait, func() bool {
		var has bool
		c.ctl.view(func(st *metadata.State) { _, has = st.TopicByName("gone") })
		return !has
	}, "topic gone deleted")
	changed := uint64(c.ctl.appliedOffset())
	// Entries (topics on broker 1 alone) until a snapshot at or past the
	// changes has compacted the log beyond offset 1, where a restarted
	// broker's empty view watches from: it gets the image.
	for i := 0; ; i++ {
		if st := c.ctl.ctl.Status(); st.SnapshotIndex >= changed && st.SnapshotIndex > every {
			break
		}
		if i > 20*every {
			t.Fatalf("no snapshot past offset %d: %+v", changed, c.ctl.ctl.Status())
		}
		createAssigned(t, cl, fmt.Sprintf("filler-%d", i), nil, []int32{1})
	}
	c.start(2)
	c.waitLogGone(2, "away", 0, dirs["away"])
	if err := testutil.Within(testWait, func() error {
		if left, _ := filepath.Glob(filepath.Join(c.dirs[2], "away-0*")); len(left) > 0 {
			return fmt.Errorf("the removed replica's log is still on disk: %v", left)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dirs["gone"]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted topic's log %s is still in place (%v)", dirs["gone"], err)
	}
	strays, _ := filepath.Glob(filepath.Join(c.dirs[2], "gone-0.*-stray"))
	if len(strays) != 1 {
		t.Fatalf("stray dirs %v, want one gone-0.<uuid>-stray", strays)
	}
	if logs, _ := filepath.Glob(filepath.Join(strays[0], "*.log")); len(logs) == 0 {
		t.Fatalf("stray dir %s lost its segments", strays[0])
	}
	if p := c.node(2).partition("kept", 0); p == nil || p.log.Dir() != dirs["kept"] || p.log.LogEndOffset() != 1 {
		t.Fatalf("broker 2 lost the log of kept-0, which it still hosts")
	}
}

// TestKcatMetadataShowsReassignedReplicas: a second client (librdkafka,
// through kcat) sees a reassigned partition's new replicas and leader.
func TestKcatMetadataShowsReassignedReplicas(t *testing.T) {
	kcat := needClient(t, "kcat", "-V")
	c := startCluster(t, 3, faultSettings)
	const topic = "reassign-kcat"
	createAssigned(t, c.client(), topic, nil, []int32{2, 3})
	c.waitFullISR(topic, 0)
	if err := reassign(t, kadm.NewClient(c.client()), topic, 0, []int32{3, 1}); err != nil {
		t.Fatalf("reassign to [3 1]: %v", err)
	}
	c.waitPartition(topic, 0, "reassignment to [3 1] complete", func(st metadata.PartitionInfo) bool {
		return slices.Equal(st.Replicas, []int32{3, 1}) && !st.Reassigning()
	})
	var md struct {
		Topics []struct {
			Partitions []struct {
				Leader   int32                `json:"leader"`
				Replicas []struct{ ID int32 } `json:"replicas"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	var last string
	if err := testutil.Within(testWait, func() error {
		out := runClient(t, nil, kcat, "-b", c.node(1).Addr(), "-L", "-J", "-t", topic)
		last = string(out)
		if err := json.Unmarshal(out, &md); err != nil {
			return err
		}
		if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 {
			return fmt.Errorf("kcat metadata %s", out)
		}
		p := md.Topics[0].Partitions[0]
		var reps []int32
		for _, r := range p.Replicas {
			reps = append(reps, r.ID)
		}
		if p.Leader != 3 || !slices.Equal(reps, []int32{3, 1}) {
			return fmt.Errorf("kcat: leader %d replicas %v, want 3 and [3 1]", p.Leader, reps)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, last)
	}
}

// TestReassignmentOfATieredTopicRebuildsFromTheTier: the reassigned
// replica of a tiered topic copies only local data. The leader's local
// retention has deleted what the tier holds, so the empty adding replica 4
// is told OFFSET_MOVED_TO_TIERED_STORAGE, rebuilds from the tier and
// catches up; the reassignment completes, the removed replica 3 deletes
// its log, the remote segments are untouched and everything reads back
// from offset 0.
func TestReassignmentOfATieredTopicRebuildsFromTheTier(t *testing.T) {
	settings, _ := tierClusterSettings(t, nil)
	c := startCluster(t, 4, settings)
	const topic, total = "reassign-tier", 600
	c.createAssigned(topic, tierTopicConfigs(), []int32{2, 3})
	cl := c.client()
	produceTier(t, cl, topic, 0, total)
	lp := c.node(2).partition(topic, 0)
	rollPartition(t, c.node(2), topic, 0)
	c.waitRemoteEnd(topic, 0, total-1)
	testutil.Eventually(t, testWait, func() bool { return lp.log.LocalLogStartOffset() > 0 }, "the leader's local retention past 0")
	remote := len(c.remoteSegmentsAll(topic, 0))
	dir3 := c.waitLogDir(3, topic, 0)

	if err := reassign(t, kadm.NewClient(cl), topic, 0, []int32{2, 4}); err != nil {
		t.Fatalf("reassign to [2 4]: %v", err)
	}
	st := c.waitPartition(topic, 0, "reassignment to [2 4] complete", func(st metadata.PartitionInfo) bool {
		return slices.Equal(st.Replicas, []int32{2, 4}) && !st.Reassigning()
	})
	if st.Leader != 2 || !slices.Contains(st.ISR, 4) {
		t.Fatalf("after the reassignment: %+v, want leader 2 and 4 in the ISR", st)
	}
	if c.node(4).tier.rebuilds.Load() == 0 {
		t.Fatal("replica 4 caught up without rebuilding from the tier")
	}
	if fp := c.node(4).partition(topic, 0); fp == nil || fp.log.LogEndOffset() != total || fp.log.LocalLogStartOffset() == 0 {
		t.Fatalf("replica 4 holds %v, want a local log ending at %d above a local start past 0", fp, total)
	}
	c.waitLogGone(3, topic, 0, dir3)
	if n := len(c.remoteSegmentsAll(topic, 0)); n != remote {
		t.Fatalf("%d remote segments after the reassignment, %d before", n, remote)
	}
	consumeTier(t, c.client(), topic, total)
}
