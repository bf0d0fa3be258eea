package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/internal/testutil"
)

var shareProps = map[string]string{"share.coordinator.state.topic.num.partitions": "3"}

// shareRPCs drives the share-state RPCs of one node with a kgo client.
type shareRPCs struct {
	t  *testing.T
	cl *kgo.Client
}

func (s shareRPCs) initialize(k share.Key, stateEpoch int32, start int64) int16 {
	s.t.Helper()
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewInitializeShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, stateEpoch, start
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(s.t), s.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		s.t.Fatalf("initialize: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (s shareRPCs) read(k share.Key, leaderEpoch int32) kmsg.ReadShareGroupStateResponseTopicPartition {
	s.t.Helper()
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(s.t), s.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		s.t.Fatalf("read: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0]
}

func (s shareRPCs) write(k share.Key, stateEpoch, leaderEpoch int32, start int64, batches ...share.StateBatch) int16 {
	s.t.Helper()
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.Partition, stateEpoch, leaderEpoch, start
	for _, b := range batches {
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.FirstOffset, b.LastOffset, int8(b.DeliveryState), b.DeliveryCount
		rp.StateBatches = append(rp.StateBatches, sb)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(s.t), s.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		s.t.Fatalf("write: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (s shareRPCs) delete(k share.Key) int16 {
	s.t.Helper()
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewDeleteShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	rp.Partition = k.Partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(s.t), s.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		s.t.Fatalf("delete: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (s shareRPCs) summary(k share.Key) kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
	s.t.Helper()
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(s.t), s.cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		s.t.Fatalf("summary: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0]
}

// waitShareCoordinator polls FindCoordinator (key type SHARE) for k until
// it is answered without an error (the first lookup creates
// __share_group_state), and returns the coordinator's node id.
func waitShareCoordinator(t *testing.T, cl *kgo.Client, k share.Key) int32 {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 2
		req.CoordinatorKeys = []string{shareCoordinatorKey(k)}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			return resp.Coordinators[0].NodeID
		}
		if time.Now().After(deadline) {
			t.Fatalf("find share coordinator: %v %+v", err, resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitShareLoaded polls until the summary of k is answered without a
// coordinator error (the state partition is loaded).
func (s shareRPCs) waitLoaded(k share.Key) {
	s.t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		code := s.summary(k).ErrorCode
		if code == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("share coordinator not loaded: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantCode(t *testing.T, what string, got int16, want error) {
	t.Helper()
	if w := errCode(want); got != w {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestShareStateRPCRoundTrip: the share-state RPCs against one node, the
// coordinator of every key: initialize, read (recording a new leader
// epoch), write, summary, fencing by state and leader epoch, a reset
// (initialize at a higher state epoch), delete, and Kafka's answers for
// uninitialized and unknown share-partitions.
func TestShareStateRPCRoundTrip(t *testing.T) {
	n := startNode(t, t.TempDir(), shareProps)
	cl := newClient(t, n)
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	id := topicID(t, n, "t")
	k := share.Key{Group: "g", TopicID: id, Partition: 0}
	if got := waitShareCoordinator(t, cl, k); got != n.cfg.NodeID {
		t.Fatalf("coordinator %d, want %d", got, n.cfg.NodeID)
	}
	s := shareRPCs{t, cl}
	s.waitLoaded(k)

	if sum := s.summary(k); sum.ErrorCode != 0 || sum.StartOffset != -1 {
		t.Fatalf("summary before initialize: %+v", sum)
	}
	wantCode(t, "read before initialize", s.read(k, 0).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "write before initialize", s.write(k, 0, 0, 0), kerr.InvalidRequest)

	wantCode(t, "initialize", s.initialize(k, 0, 5), nil)
	r := s.read(k, 1)
	if r.ErrorCode != 0 || r.StateEpoch != 0 || r.StartOffset != 5 || len(r.StateBatches) != 0 {
		t.Fatalf("read: %+v", r)
	}
	wantCode(t, "write", s.write(k, 0, 1, -1,
		share.StateBatch{FirstOffset: 5, LastOffset: 7, DeliveryState: share.Acknowledged, DeliveryCount: 1},
		share.StateBatch{FirstOffset: 8, LastOffset: 9, DeliveryState: share.Available, DeliveryCount: 2}), nil)
	r = s.read(k, 1)
	if r.ErrorCode != 0 || r.StartOffset != 5 || len(r.StateBatches) != 2 || r.StateBatches[0].LastOffset != 7 ||
		r.StateBatches[1].DeliveryCount != 2 || r.StateBatches[1].DeliveryState != int8(share.Available) {
		t.Fatalf("read after write: %+v", r)
	}
	wantCode(t, "read at an older leader epoch", s.read(k, 0).ErrorCode, kerr.FencedLeaderEpoch)
	wantCode(t, "write at an older leader epoch", s.write(k, 0, 0, 10), kerr.FencedLeaderEpoch)
	wantCode(t, "write at another state epoch", s.write(k, 1, 1, 10), kerr.FencedStateEpoch)
	wantCode(t, "write with a reversed batch", s.write(k, 0, 1, -1, share.StateBatch{FirstOffset: 9, LastOffset: 8, DeliveryState: share.Archived}), kerr.InvalidRequest)
	wantCode(t, "write moving the start", s.write(k, 0, 2, 8), nil)
	if sum := s.summary(k); sum.ErrorCode != 0 || sum.StartOffset != 8 || sum.LeaderEpoch != 2 || sum.StateEpoch != 0 {
		t.Fatalf("summary: %+v", sum)
	}

	// A reset: a higher state epoch fences the old leader's writes.
	wantCode(t, "reset", s.initialize(k, 1, 3), nil)
	wantCode(t, "write of the old state epoch", s.write(k, 0, 2, -1), kerr.FencedStateEpoch)
	wantCode(t, "initialize below the stored state epoch", s.initialize(k, 0, 0), kerr.FencedStateEpoch)
	if r := s.read(k, -1); r.ErrorCode != 0 || r.StateEpoch != 1 || r.StartOffset != 3 || len(r.StateBatches) != 0 {
		t.Fatalf("read after reset: %+v", r)
	}

	wantCode(t, "delete", s.delete(k), nil)
	wantCode(t, "read after delete", s.read(k, 0).ErrorCode, kerr.InvalidRequest)
	wantCode(t, "delete again", s.delete(k), nil)

	unknown := share.Key{Group: "g", TopicID: [16]byte{1, 2, 3}, Partition: 0}
	wantCode(t, "initialize of an unknown topic", s.initialize(unknown, 0, 0), kerr.UnknownTopicOrPartition)
	wantCode(t, "read of a partition beyond the topic", s.read(share.Key{Group: "g", TopicID: id, Partition: 2}, 0).ErrorCode, kerr.UnknownTopicOrPartition)
}

// TestShareStateSurvivesRestart: every acknowledged write is read back
// after the node restarts on its data dir (the coordinator replays
// __share_group_state), including updates past a snapshot and a deleted
// key staying deleted.
func TestShareStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, shareProps)
	cl := newClient(t, n)
	createTopic(t, newAdmin(t, n), "t", 3, nil)
	id := topicID(t, n, "t")
	keys := []share.Key{{Group: "a", TopicID: id, Partition: 0}, {Group: "a", TopicID: id, Partition: 1}, {Group: "b", TopicID: id, Partition: 2}}
	waitShareCoordinator(t, cl, keys[0])
	s := shareRPCs{t, cl}
	for _, k := range keys {
		s.waitLoaded(k)
		wantCode(t, "initialize", s.initialize(k, 0, 0), nil)
		for i := int64(0); i < 5; i++ {
			wantCode(t, "write", s.write(k, 0, 1, -1, share.StateBatch{FirstOffset: i, LastOffset: i, DeliveryState: share.Acknowledged, DeliveryCount: 1}), nil)
		}
	}
	wantCode(t, "advance", s.write(keys[0], 0, 1, 3), nil)
	wantCode(t, "delete", s.delete(keys[2]), nil)
	before := map[share.Key]kmsg.ReadShareGroupStateResponseTopicPartition{}
	for _, k := range keys {
		before[k] = s.read(k, 1)
	}
	cl.Close()
	n.Close()

	n = startNode(t, dir, shareProps)
	cl = newClient(t, n)
	s = shareRPCs{t, cl}
	for _, k := range keys {
		s.waitLoaded(k)
		if got, want := s.read(k, 1), before[k]; !sameShareState(got, want) {
			t.Fatalf("%v after restart: %+v, before %+v", k, got, want)
		}
	}
	if r := before[keys[0]]; r.StartOffset != 3 || len(r.StateBatches) != 1 || r.StateBatches[0].FirstOffset != 3 || r.StateBatches[0].LastOffset != 4 {
		t.Fatalf("state before the restart: %+v", r)
	}
	wantCode(t, "deleted key after restart", before[keys[2]].ErrorCode, kerr.InvalidRequest)
}

// sameShareState reports whether two ReadShareGroupState answers give the
// same state: error, start offset, state epoch and every batch.
func sameShareState(got, want kmsg.ReadShareGroupStateResponseTopicPartition) bool {
	if got.ErrorCode != want.ErrorCode || got.StartOffset != want.StartOffset || got.StateEpoch != want.StateEpoch || len(got.StateBatches) != len(want.StateBatches) {
		return false
	}
	for i, g := range got.StateBatches {
		w := want.StateBatches[i]
		if g.FirstOffset != w.FirstOffset || g.LastOffset != w.LastOffset || g.DeliveryState != w.DeliveryState || g.DeliveryCount != w.DeliveryCount {
			return false
		}
	}
	return true
}

// TestSharePersisterLocal: the node's persister (in process when it
// coordinates the key) honours the share.Persister contract: ErrNoState
// before Initialize, the state after Write, fencing errors as kerr.
func TestSharePersisterLocal(t *testing.T) {
	n := startNode(t, t.TempDir(), shareProps)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	k := share.Key{Group: "g", TopicID: topicID(t, n, "t"), Partition: 0}
	ctx := testCtx(t)
	p := n.sharePersister
	if _, err := p.Read(ctx, k, 0); !errors.Is(err, share.ErrNoState) {
		t.Fatalf("read before initialize: %v", err)
	}
	if _, err := p.Summary(ctx, k); !errors.Is(err, share.ErrNoState) {
		t.Fatalf("summary before initialize: %v", err)
	}
	if err := p.Initialize(ctx, k, 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := p.Write(ctx, k, 0, 1, share.Update{StartOffset: -1, DeliveryCompleteCount: 1,
		Batches: []share.StateBatch{{FirstOffset: 10, LastOffset: 10, DeliveryState: share.Acknowledged, DeliveryCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	st, err := p.Read(ctx, k, 1)
	if err != nil || st.StartOffset != 10 || len(st.Batches) != 1 || st.Batches[0].DeliveryState != share.Acknowledged {
		t.Fatalf("read: %+v %v", st, err)
	}
	if err := p.Write(ctx, k, 0, 0, share.Update{StartOffset: -1}); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("stale leader's write: %v", err)
	}
	if err := p.Write(ctx, k, 3, 1, share.Update{StartOffset: -1}); !errors.Is(err, kerr.FencedStateEpoch) {
		t.Fatalf("write of another state epoch: %v", err)
	}
	sum, err := p.Summary(ctx, k)
	if err != nil || sum.StartOffset != 10 || sum.LeaderEpoch != 1 || sum.DeliveryCompleteCount != 1 {
		t.Fatalf("summary: %+v %v", sum, err)
	}
	if err := p.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Read(ctx, k, 1); !errors.Is(err, share.ErrNoState) {
		t.Fatalf("read after delete: %v", err)
	}
}

// TestSharePartitionForIsKafkas: the partition of a share key is
// Utils.abs(String.hashCode(key)) % partitions with Kafka's abs (Math.abs,
// MIN_VALUE → 0): values of Java's String.hashCode.
func TestSharePartitionForIsKafkas(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int32
	}{
		{"hello", 99162322},
		{"polygenelubricants", 0}, // hashCode is Integer.MIN_VALUE
		{"zzzzzz", 685785664},     // hashCode -685785664: Math.abs, not a mask of the sign bit
	} {
		if got := javaAbsHash(c.s); got != c.want {
			t.Errorf("javaAbsHash(%q) = %d, want %d", c.s, got, c.want)
		}
	}
	id := [16]byte{0x12, 0x34}
	k := share.Key{Group: "g", TopicID: id, Partition: 7}
	if s := shareCoordinatorKey(k); s != "g:EjQAAAAAAAAAAAAAAAAAAA:7" {
		t.Fatalf("coordinator key %q", s)
	}
	if back, ok := parseShareCoordinatorKey(shareCoordinatorKey(k)); !ok || back != k {
		t.Fatalf("parse: %+v %v", back, ok)
	}
	if back, ok := parseShareCoordinatorKey("a:b:EjQAAAAAAAAAAAAAAAAAAA:7"); !ok || back.Group != "a:b" || back.Partition != 7 || back.TopicID != id {
		t.Fatalf("a group id with ':' (parsed from the right, Kafka 4.2): %+v %v", back, ok)
	}
	for _, bad := range []string{"", "g", "g:x:1", ":EjQAAAAAAAAAAAAAAAAAAA:1", "g:EjQAAAAAAAAAAAAAAAAAAA:-1", "g:EjQAAAAAAAAAAAAAAAAAAA:1:2"} {
		if _, ok := parseShareCoordinatorKey(bad); ok {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

// TestShareStateFailedAppendIsNotVisible: a write refused before it
// reaches the log (the ISR below min ISR, here an append hook) is answered
// with its error and leaves no trace in the coordinator's state, neither a
// write of an existing key nor the initialization of a new one; while a
// partition (re)loads, its keys get COORDINATOR_LOAD_IN_PROGRESS.
func TestShareStateFailedAppendIsNotVisible(t *testing.T) {
	n := startNode(t, t.TempDir(), shareProps)
	cl := newClient(t, n)
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	id := topicID(t, n, "t")
	k, fresh := share.Key{Group: "g", TopicID: id, Partition: 0}, share.Key{Group: "g", TopicID: id, Partition: 1}
	waitShareCoordinator(t, cl, k)
	s := shareRPCs{t, cl}
	s.waitLoaded(k)
	s.waitLoaded(fresh)
	wantCode(t, "initialize", s.initialize(k, 0, 0), nil)
	wantCode(t, "write", s.write(k, 0, 1, -1, share.StateBatch{FirstOffset: 0, LastOffset: 0, DeliveryState: share.Acknowledged, DeliveryCount: 1}), nil)

	fail := func(int32) error { return kerr.NotEnoughReplicas }
	n.shares.appendHook.Store(&fail)
	wantCode(t, "refused write", s.write(k, 0, 2, 5, share.StateBatch{FirstOffset: 5, LastOffset: 6, DeliveryState: share.Archived, DeliveryCount: 3}), kerr.NotEnoughReplicas)
	wantCode(t, "refused initialize", s.initialize(fresh, 0, 7), kerr.NotEnoughReplicas)
	n.shares.appendHook.Store(nil)

	r := s.read(k, -1)
	if r.ErrorCode != 0 || r.StartOffset != 0 || len(r.StateBatches) != 1 || r.StateBatches[0].LastOffset != 0 {
		t.Fatalf("after a refused write: %+v", r)
	}
	if sum := s.summary(k); sum.LeaderEpoch != 1 {
		t.Fatalf("leader epoch after a refused write: %+v", sum)
	}
	wantCode(t, "read of a refused initialize", s.read(fresh, 0).ErrorCode, kerr.InvalidRequest)

	// A reload: Loading until the replay is done.
	idx, _ := n.shares.partitionOf(k)
	release := make(chan struct{})
	hook := func(int32) { <-release }
	n.shares.loadHook.Store(&hook)
	n.shares.mu.Lock()
	sp := n.shares.parts[idx]
	n.shares.mu.Unlock()
	sp.mu.Lock()
	sp.loaded = false
	n.shares.reload(sp)
	sp.mu.Unlock()
	wantCode(t, "summary while loading", s.summary(k).ErrorCode, kerr.CoordinatorLoadInProgress)
	n.shares.loadHook.Store(nil)
	close(release)
	s.waitLoaded(k)
	if r := s.read(k, -1); r.ErrorCode != 0 || len(r.StateBatches) != 1 {
		t.Fatalf("after the reload: %+v", r)
	}
}

// BenchmarkSharePersisterWrite: acknowledged WriteShareGroupState through
// the node's persister on one node (in process: a journal step, an append
// and the wait for the HW), one share-partition written sequentially.
func BenchmarkSharePersisterWrite(b *testing.B) {
	n := startNode(b, b.TempDir(), shareProps)
	createTopic(b, newAdmin(b, n), "t", 1, nil)
	k := share.Key{Group: "g", TopicID: topicID(b, n, "t"), Partition: 0}
	ctx := testCtx(b)
	if err := n.sharePersister.Initialize(ctx, k, 0, 0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		u := share.Update{StartOffset: -1, DeliveryCompleteCount: 1,
			Batches: []share.StateBatch{{FirstOffset: int64(i), LastOffset: int64(i), DeliveryState: share.Acknowledged, DeliveryCount: 1}}}
		if err := n.sharePersister.Write(ctx, k, 0, 0, u); err != nil {
			b.Fatal(err)
		}
	}
}

// TestShareStateTopicCreated: the first FindCoordinator of a share key
// creates __share_group_state as Kafka configures it (partitions from
// share.coordinator.state.topic.num.partitions, the replication factor and
// min ISR capped at the live brokers, cleanup.policy=delete with no
// retention — pruned by the coordinator, never compacted —, its segment bytes); it is
// internal in Metadata and clients cannot produce to it.
func TestShareStateTopicCreated(t *testing.T) {
	n := startNode(t, t.TempDir(), shareProps)
	cl := newClient(t, n)
	adm := kadm.NewClient(cl)
	createTopic(t, adm, "t", 1, nil)
	waitShareCoordinator(t, cl, share.Key{Group: "g", TopicID: topicID(t, n, "t")})
	ctx := testCtx(t)
	td, err := adm.ListTopicsWithInternal(ctx, shareStateTopic)
	if err != nil || td[shareStateTopic].Err != nil {
		t.Fatalf("metadata: %v %v", err, td[shareStateTopic].Err)
	}
	if d := td[shareStateTopic]; !d.IsInternal || len(d.Partitions) != 3 || len(d.Partitions[0].Replicas) != 1 {
		t.Fatalf("topic: %+v", d)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, shareStateTopic)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc[0].Configs {
		if c.Value != nil {
			got[c.Key] = *c.Value
		}
	}
	for k, v := range map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1", "min.insync.replicas": "1", "segment.bytes": "104857600", "compression.type": "uncompressed"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: shareStateTopic, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to %s: %v", shareStateTopic, err)
	}
}

// TestShareStatePruned: with cleanup.policy=delete and no retention, the
// coordinator prunes __share_group_state itself: the log start moves up
// to the lowest current snapshot of a live share-partition, never past
// it, and a reload (a restart, from what is left) gives every
// share-partition the state it had, its deltas since its snapshot
// included. A topic an earlier version created compacted (where
// compaction keeps a share-partition's last delta and loses the rest) is
// set to delete.
func TestShareStatePruned(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{
		"share.coordinator.state.topic.num.partitions":           "1",
		"share.coordinator.state.topic.segment.bytes":            "2048", // several segments: whole ones go
		"share.coordinator.state.topic.prune.interval.ms":        "50",
		"share.coordinator.snapshot.update.records.per.snapshot": "4",
	}
	n := startNode(t, dir, props)
	cl := newClient(t, n)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 3, nil)
	id := topicID(t, n, "t")
	// hot is written often, cold once after its initialization: cold's
	// snapshot holds the log start back until it is written again.
	hot, cold := share.Key{Group: "hot", TopicID: id, Partition: 0}, share.Key{Group: "cold", TopicID: id, Partition: 1}
	waitShareCoordinator(t, cl, hot)
	s := shareRPCs{t, cl}
	s.waitLoaded(hot)
	wantCode(t, "initialize cold", s.initialize(cold, 0, 0), nil)
	wantCode(t, "write cold", s.write(cold, 0, 1, -1, share.StateBatch{FirstOffset: 0, LastOffset: 1, DeliveryState: share.Acknowledged, DeliveryCount: 1}), nil)
	wantCode(t, "initialize hot", s.initialize(hot, 0, 0), nil)
	p := n.partition(shareStateTopic, 0)
	coldSnap := int64(0) // cold's snapshot is the log's first record
	write := func(k share.Key, from, to int64) {
		t.Helper()
		for i := from; i < to; i++ {
			wantCode(t, "write", s.write(k, 0, 1, -1, share.StateBatch{FirstOffset: i, LastOffset: i, DeliveryState: share.Acknowledged, DeliveryCount: int16(1 + (i/20)%3)}), nil)
		}
	}
	write(hot, 0, 60)
	// Held at cold's snapshot however long the coordinator prunes.
	before := n.shares.pruneRounds.Load()
	testutil.Eventually(t, testWait, func() bool { return n.shares.pruneRounds.Load() > before+2 }, "prune rounds")
	if ls := p.log.LogStartOffset(); ls != coldSnap {
		t.Fatalf("log start %d with cold's snapshot at %d: pruned past a live snapshot", ls, coldSnap)
	}
	// Five writes to cold: a new snapshot of it (4 updates per snapshot)
	// and an update after it; then hot again. Now the log start follows
	// the lower of the two snapshots.
	write(cold, 2, 7)
	write(hot, 60, 70)
	testutil.Eventually(t, testWait, func() bool { return p.log.LogStartOffset() > 60 }, "the log start past both keys' old records (at %d)", p.log.LogStartOffset())
	// Whole segments below the log start are gone (how many are left
	// depends on where the snapshots fell, not checked; Eventually: a
	// prune moves the start before it deletes).
	testutil.Eventually(t, testWait, func() bool { return p.log.Segments()[0].NextOffset > p.log.LogStartOffset() },
		"no segment below the log start %d (first %+v)", p.log.LogStartOffset(), p.log.Segments()[0])
	want := map[share.Key]kmsg.ReadShareGroupStateResponseTopicPartition{hot: s.read(hot, 1), cold: s.read(cold, 1)}
	cl.Close()
	n.Close()

	n = startNode(t, dir, props)
	cl = newClient(t, n)
	s = shareRPCs{t, cl}
	for k, w := range want {
		s.waitLoaded(k)
		if got := s.read(k, 1); got.ErrorCode != 0 || !sameShareState(got, w) {
			t.Errorf("%s after pruning and a restart: start %d %v (%d), want start %d %v", k.Group, got.StartOffset, got.StateBatches, got.ErrorCode, w.StartOffset, w.StateBatches)
		}
	}
	if got := want[hot].StateBatches; len(got) == 0 || got[0].FirstOffset != 0 || got[len(got)-1].LastOffset != 69 {
		t.Errorf("hot before the restart: %+v", got)
	}

	// Compacted by an earlier version: set back to delete.
	ctx := testCtx(t)
	adm = newAdmin(t, n)
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}, shareStateTopic); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testWait, func() bool {
		rc, err := adm.DescribeTopicConfigs(ctx, shareStateTopic)
		if err != nil || len(rc) != 1 {
			return false
		}
		v, err := rc[0].Configs, rc[0].Err
		for _, c := range v {
			if c.Key == "cleanup.policy" && c.Value != nil {
				return err == nil && *c.Value == "delete"
			}
		}
		return false
	}, "cleanup.policy of %s set back to delete", shareStateTopic)
}
