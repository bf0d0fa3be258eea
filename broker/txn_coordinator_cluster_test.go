package broker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/txncoord"
	"github.com/strata-io/strata/controller/metadata"
)

// markersAnswer answers every partition of req with code.
func markersAnswer(req *kmsg.WriteTxnMarkersRequest, code int16) *kmsg.WriteTxnMarkersResponse {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// markerLog records the markers a node's sender sent (through its hook).
type markerLog struct {
	mu   sync.Mutex
	seen []kmsg.WriteTxnMarkersRequestMarker
	hold atomic.Bool // answer REQUEST_TIMED_OUT (retried) instead of success
}

func (l *markerLog) install(n *Node) {
	h := func(dest int32, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
		if l.hold.Load() {
			return markersAnswer(req, kerr.RequestTimedOut.Code)
		}
		l.mu.Lock()
		l.seen = append(l.seen, req.Markers...)
		l.mu.Unlock()
		return markersAnswer(req, 0)
	}
	n.txns.markers.sendHook.Store(&h)
}

func (l *markerLog) markers() []kmsg.WriteTxnMarkersRequestMarker {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]kmsg.WriteTxnMarkersRequestMarker(nil), l.seen...)
}

// txnIDLedBy returns a transactional id whose __transaction_state
// partition is led by a broker other than not, and that broker.
func (c *testCluster) txnIDLedBy(prefix string, not int32) (string, int32) {
	c.t.Helper()
	for i := 0; i < 1000; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if l := c.leaderOf(txnStateTopic, txncoord.PartitionFor(id, 3)); l > 0 && l != not {
			return id, l
		}
	}
	c.t.Fatalf("no transactional id led elsewhere than %d", not)
	return "", 0
}

// TestTxnCoordinatorFailoverFinishesMarkers: a 3-node cluster; the
// coordinator of a transaction commits it (PrepareCommit durable on the
// ISR) but cannot deliver its markers (held), then stops. The new leader
// of the __transaction_state partition loads it at a higher coordinator
// epoch, sends the commit markers itself and completes the transaction.
// The partition side is faked by the senders' hooks (the markers'
// delivery is txn_markers.go's).
func TestTxnCoordinatorFailoverFinishesMarkers(t *testing.T) {
	c := startCluster(t, 3, txnProps)
	logs := map[int32]*markerLog{}
	for id := int32(1); id <= 3; id++ {
		logs[id] = &markerLog{}
		logs[id].install(c.node(id))
	}
	c.createTopicRF("t", 3, 3)
	adm := kadm.NewClient(c.client())
	ctx := testCtx(t)
	deadline := time.Now().Add(testWait)
	for {
		r := adm.FindTxnCoordinators(ctx, "any")
		if r["any"].Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("find coordinator: %v", r["any"].Err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	id, coord := c.txnIDLedBy("fo", 1)
	c.waitFullISR(txnStateTopic, txncoord.PartitionFor(id, 3))
	logs[coord].hold.Store(true)

	cl := txnProducer(t, c.seeds(), id)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	before := waitTxnState(t, adm, id, "PrepareCommit")
	if before.Coordinator != coord {
		t.Fatalf("coordinator %d, want %d", before.Coordinator, coord)
	}

	c.stop(coord)
	adm = kadm.NewClient(c.client()) // kgo keeps a coordinator it cannot dial
	after := waitTxnState(t, adm, id, "CompleteCommit")
	if after.Coordinator == coord || after.ProducerID != before.ProducerID || after.ProducerEpoch != before.ProducerEpoch {
		t.Fatalf("after the failover: %+v (before %+v)", after, before)
	}
	ms := logs[after.Coordinator].markers()
	parts := map[int32]bool{}
	for _, m := range ms {
		if !m.Committed || m.ProducerID != before.ProducerID || m.ProducerEpoch != before.ProducerEpoch || m.CoordinatorEpoch < 1 {
			t.Fatalf("marker %+v", m)
		}
		for _, tp := range m.Topics {
			for _, p := range tp.Partitions {
				parts[p] = true
			}
		}
	}
	if len(parts) != 3 {
		t.Fatalf("the new coordinator sent markers for %v, want the 3 partitions", parts)
	}
}

// TestTxnVerifyPartitionsRemoteCoordinator: a broker that does not
// coordinate a transactional id asks its coordinator over the
// inter-broker listener (AddPartitionsToTxn v4+ VerifyOnly) whether
// partitions are in the ongoing transaction.
func TestTxnVerifyPartitionsRemoteCoordinator(t *testing.T) {
	c := startCluster(t, 3, txnProps)
	c.createTopicRF("t", 2, 1)
	adm := kadm.NewClient(c.client())
	ctx := testCtx(t)
	deadline := time.Now().Add(testWait)
	for adm.FindTxnCoordinators(ctx, "any")["any"].Err != nil {
		if time.Now().After(deadline) {
			t.Fatal("no transaction coordinator")
		}
		time.Sleep(20 * time.Millisecond)
	}
	id, coord := c.txnIDLedBy("vr", 0)
	other := int32(1)
	if coord == 1 {
		other = 2
	}
	cl := txnProducer(t, c.seeds(), id)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d := waitTxnState(t, adm, id, "Ongoing")
	n := c.node(other)
	var st txncoord.PartitionState
	n.txns.locked(func(tc *txncoord.Coordinator) { st, _ = tc.PartitionState(txncoord.PartitionFor(id, 3)) })
	if st != txncoord.NotOwned {
		t.Fatalf("node %d serves the partition of %s", other, id)
	}
	codes := n.verifyTxnPartitions(ctx, id, d.ProducerID, d.ProducerEpoch, map[string][]int32{"t": {0, 1}})
	if codes["t"][0] != 0 || codes["t"][1] != kerr.TransactionAbortable.Code {
		t.Fatalf("remote verify: %v", codes)
	}
	codes = n.verifyTxnPartitions(ctx, id, d.ProducerID, d.ProducerEpoch-1, map[string][]int32{"t": {0}})
	if codes["t"][0] != kerr.ProducerFenced.Code {
		t.Fatalf("remote verify, old epoch: %v", codes)
	}
}

// TestTxnCoordinatorCompleteRetriesBackOff: the CompleteCommit append of
// a transaction whose markers are all written fails while the
// __transaction_state partition's ISR is below its min ISR (2 of 3); the
// coordinator retries it every 100 ms (not in a spin), and completes once
// a replica is back in the ISR.
func TestTxnCoordinatorCompleteRetriesBackOff(t *testing.T) {
	c := startCluster(t, 3, txnProps)
	var log markerLog
	log.install(c.node(1))
	c.createTopicAssigned("t", [][]int32{{1}}) // led by the broker that stays
	adm := kadm.NewClient(c.client(kgo.SeedBrokers(c.node(1).Addr())))
	ctx := testCtx(t)
	deadline := time.Now().Add(testWait)
	for adm.FindTxnCoordinators(ctx, "any")["any"].Err != nil {
		if time.Now().After(deadline) {
			t.Fatal("no transaction coordinator")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var id string
	for i := 0; ; i++ {
		id = fmt.Sprintf("bo-%d", i)
		if c.leaderOf(txnStateTopic, txncoord.PartitionFor(id, 3)) == 1 {
			break
		}
	}
	part := txncoord.PartitionFor(id, 3)
	c.waitFullISR(txnStateTopic, part)
	log.hold.Store(true)
	cl := txnProducer(t, c.seeds(), id)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, adm, id, "PrepareCommit")
	cl.Close()
	c.stop(2)
	c.stop(3)
	c.waitPartition(txnStateTopic, part, "ISR {1}", func(p metadata.PartitionInfo) bool { return len(p.ISR) == 1 })

	tc := c.node(1).txns
	before := tc.writes.Load()
	start := time.Now()
	log.hold.Store(false) // the markers succeed: CompleteCommit is appended, and refused
	for tc.writes.Load()-before < 5 {
		if time.Since(start) > testWait {
			t.Fatalf("%d CompleteCommit appends tried, want retries", tc.writes.Load()-before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("5 CompleteCommit appends tried in %v: the retries do not back off", took)
	}
	if d := waitTxnState(t, adm, id, ""); d.State != "PrepareCommit" {
		t.Fatalf("state %s with the ISR below min ISR", d.State)
	}
	c.start(2)
	waitTxnState(t, adm, id, "CompleteCommit")
}
