package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/producer"
)

// txnBatch is producerBatch with the transactional attribute (0x10).
func txnBatch(id int64, epoch int16, seq int32, values ...string) []byte {
	b := producerBatch(id, epoch, seq, values...)
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|0x10)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// allowVerify makes the node's KIP-890 verification answer code for
// every partition (T3a's coordinator answers in production) and counts
// the calls.
func allowVerify(n *Node, code int16) *atomic.Int32 {
	var calls atomic.Int32
	h := txnVerifyFunc(func(_ context.Context, _ string, _ int64, _ int16, tps map[string][]int32) map[string]map[int32]int16 {
		calls.Add(1)
		out := map[string]map[int32]int16{}
		for t, ps := range tps {
			out[t] = map[int32]int16{}
			for _, p := range ps {
				out[t][p] = code
			}
		}
		return out
	})
	n.txnVerifyHook.Store(&h)
	return &calls
}

// txnProduce sends one transactional Produce (version v, acks=-1) to
// partition 0 of topic and returns the partition's code and base offset.
func txnProduce(t *testing.T, c *rawConn, v int16, txnID *string, topic string, records []byte) (int16, int64) {
	t.Helper()
	req := produceReq(v, topic, [16]byte{}, 0, -1, records)
	req.TransactionID = txnID
	return produceErr(t, c.roundTrip(req))
}

// markersReq is a WriteTxnMarkers v1 request of one marker for partition
// 0 of topic.
func markersReq(topic string, m producer.Marker) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.CoordinatorEpoch, rm.Committed = m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	rm.Topics = append(rm.Topics, rt)
	req.Markers = append(req.Markers, rm)
	return req
}

// writeMarker sends a WriteTxnMarkers over c and returns the partition's
// code.
func writeMarker(t *testing.T, c *rawConn, topic string, m producer.Marker) int16 {
	t.Helper()
	resp := c.roundTrip(markersReq(topic, m)).(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		t.Fatalf("WriteTxnMarkers response shape: %+v", resp)
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// fetchIso fetches partition 0 of topic from offset with isolation level
// iso (Fetch v11).
func fetchIso(t *testing.T, c *rawConn, topic string, offset int64, iso int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchReq(11, topic, [16]byte{}, 0, offset, 0, 1, 1<<20)
	req.IsolationLevel = iso
	p := fetchPart0(t, c.roundTrip(req))
	if p.ErrorCode != 0 {
		t.Fatalf("fetch: error %d", p.ErrorCode)
	}
	return p
}

// latestOffset is ListOffsets v5's latest offset with isolation level iso.
func latestOffset(t *testing.T, c *rawConn, topic string, iso int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(5)
	req.ReplicaID, req.IsolationLevel = -1, iso
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.ListOffsetsResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets: error %d", p.ErrorCode)
	}
	return p.Offset
}

// batchValues decodes the record values of a fetch's record batches,
// skipping control batches.
func batchValues(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		size := 12 + int(binary.BigEndian.Uint32(b[8:]))
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:size]); err != nil {
			t.Fatal(err)
		}
		b = b[size:]
		if rb.Attributes&0x20 != 0 {
			continue
		}
		recs := rb.Records
		for range rb.NumRecords {
			var r kmsg.Record
			l, n := binary.Varint(recs)
			if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
				t.Fatal(err)
			}
			recs = recs[n+int(l):]
			out = append(out, string(r.Value))
		}
	}
	return out
}

// consumeCommitted reads topic (one partition) from the start with a
// franz-go consumer at isolation level iso until it has seen want
// records, and returns their values.
func consumeIso(t *testing.T, opts []kgo.Opt, topic string, committed bool, want int) []string {
	t.Helper()
	opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	} else {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %q, want %d records", out, want)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// TestTxnReadCommittedStopsAtLSOAndListsAborted drives a partition
// through an aborted and a committed transaction with raw Produce and
// WriteTxnMarkers requests: a read_committed fetch stops at the first
// open transaction, ListOffsets' latest follows the LSO, the aborted
// transaction is listed, and franz-go's read_committed consumer drops its
// records while read_uncommitted sees them all.
func TestTxnReadCommittedStopsAtLSOAndListsAborted(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "rc", 1, nil)
	allowVerify(n, 0)
	c := dialRaw(t, n)
	aborter, committer, plain := initProducerID(t, c), initProducerID(t, c), initProducerID(t, c)
	txnID := kmsg.StringPtr("tx")

	if code, off := txnProduce(t, c, 9, txnID, "rc", txnBatch(aborter, 0, 0, "a1", "a2")); code != 0 || off != 0 {
		t.Fatalf("txn produce: code %d offset %d", code, off)
	}
	expectProduce(t, c, "rc", producerBatch(plain, 0, 0, "p1"), nil, 2)
	if code, off := txnProduce(t, c, 9, txnID, "rc", txnBatch(committer, 0, 0, "c1")); code != 0 || off != 3 {
		t.Fatalf("txn produce: code %d offset %d", code, off)
	}

	// Open transactions at 0 and 3: nothing is stable.
	p := fetchIso(t, c, "rc", 0, 1)
	if p.LastStableOffset != 0 || p.HighWatermark != 4 || len(p.RecordBatches) != 0 || p.AbortedTransactions == nil {
		t.Fatalf("read_committed with open txn: lso %d hw %d %d bytes aborted %v", p.LastStableOffset, p.HighWatermark, len(p.RecordBatches), p.AbortedTransactions)
	}
	if u := fetchIso(t, c, "rc", 0, 0); u.LastStableOffset != 0 || u.AbortedTransactions != nil || len(batchValues(t, u.RecordBatches)) != 4 {
		t.Fatalf("read_uncommitted: lso %d aborted %v values %q", u.LastStableOffset, u.AbortedTransactions, batchValues(t, u.RecordBatches))
	}
	// Between the LSO and the HW: nothing yet, not out of range.
	if p := fetchIso(t, c, "rc", 2, 1); len(p.RecordBatches) != 0 || p.LastStableOffset != 0 {
		t.Fatalf("read_committed at 2 above the LSO: %d bytes, lso %d", len(p.RecordBatches), p.LastStableOffset)
	}
	if got := latestOffset(t, c, "rc", 1); got != 0 {
		t.Fatalf("read_committed latest %d, want the LSO 0", got)
	}
	if got := latestOffset(t, c, "rc", 0); got != 4 {
		t.Fatalf("read_uncommitted latest %d, want the HW 4", got)
	}

	if code := writeMarker(t, c, "rc", producer.Marker{ProducerID: aborter, CoordinatorEpoch: 1}); code != 0 {
		t.Fatalf("abort marker: code %d", code)
	}
	// The committer's transaction (first offset 3) still holds the LSO.
	p = fetchIso(t, c, "rc", 0, 1)
	if p.LastStableOffset != 3 || p.HighWatermark != 5 {
		t.Fatalf("after abort: lso %d hw %d", p.LastStableOffset, p.HighWatermark)
	}
	if got := batchValues(t, p.RecordBatches); !slices.Equal(got, []string{"a1", "a2", "p1"}) {
		t.Fatalf("read_committed below the LSO: %q", got)
	}
	if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != aborter || p.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("aborted transactions %+v", p.AbortedTransactions)
	}
	if code := writeMarker(t, c, "rc", producer.Marker{ProducerID: committer, CoordinatorEpoch: 1, Commit: true}); code != 0 {
		t.Fatalf("commit marker: code %d", code)
	}
	p = fetchIso(t, c, "rc", 0, 1)
	if p.LastStableOffset != 6 || p.HighWatermark != 6 {
		t.Fatalf("after commit: lso %d hw %d", p.LastStableOffset, p.HighWatermark)
	}
	// A fetch past the aborted range lists nothing.
	if p := fetchIso(t, c, "rc", 5, 1); len(p.AbortedTransactions) != 0 {
		t.Fatalf("fetch from 5: aborted %+v", p.AbortedTransactions)
	}
	if got := latestOffset(t, c, "rc", 1); got != 6 {
		t.Fatalf("read_committed latest %d after the markers, want 6", got)
	}

	opts := []kgo.Opt{kgo.SeedBrokers(n.Addr())}
	if got := consumeIso(t, opts, "rc", true, 2); !slices.Equal(got, []string{"p1", "c1"}) {
		t.Fatalf("franz-go read_committed: %q", got)
	}
	if got := consumeIso(t, opts, "rc", false, 4); !slices.Equal(got, []string{"a1", "a2", "p1", "c1"}) {
		t.Fatalf("franz-go read_uncommitted: %q", got)
	}
}

// TestTxnMarkersFencingAndErrors checks WriteTxnMarkers' per-partition
// answers: Kafka's fencing of an older coordinator epoch and an older
// producer epoch (nothing written), unknown partitions, and the versions
// advertised.
func TestTxnMarkersFencingAndErrors(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "mk", 1, nil)
	allowVerify(n, 0)
	c := dialRaw(t, n)
	pid := initProducerID(t, c)

	if code, _ := txnProduce(t, c, 9, kmsg.StringPtr("tx"), "mk", txnBatch(pid, 3, 0, "a")); code != 0 {
		t.Fatalf("txn produce: code %d", code)
	}
	if code := writeMarker(t, c, "mk", producer.Marker{ProducerID: pid, ProducerEpoch: 3, CoordinatorEpoch: 5, Commit: true}); code != 0 {
		t.Fatalf("commit marker: code %d", code)
	}
	end := leo(n, "mk")
	if code := writeMarker(t, c, "mk", producer.Marker{ProducerID: pid, ProducerEpoch: 3, CoordinatorEpoch: 4}); code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("older coordinator epoch: code %d, want TRANSACTION_COORDINATOR_FENCED", code)
	}
	if code := writeMarker(t, c, "mk", producer.Marker{ProducerID: pid, ProducerEpoch: 2, CoordinatorEpoch: 5}); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("older producer epoch: code %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if got := leo(n, "mk"); got != end {
		t.Fatalf("fenced markers were written: log end %d, want %d", got, end)
	}
	// A fencing marker at a bumped epoch: the old epoch's batches are refused.
	if code := writeMarker(t, c, "mk", producer.Marker{ProducerID: pid, ProducerEpoch: 4, CoordinatorEpoch: 5}); code != 0 {
		t.Fatalf("fencing marker: code %d", code)
	}
	if code, _ := txnProduce(t, c, 9, kmsg.StringPtr("tx"), "mk", txnBatch(pid, 3, 1, "late")); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("fenced producer's batch: code %d, want INVALID_PRODUCER_EPOCH", code)
	}
	// The idempotence table saw the marker too: the old epoch's plain
	// batches are refused, the new epoch starts at sequence 0.
	expectProduce(t, c, "mk", producerBatch(pid, 3, 1, "late"), kerr.InvalidProducerEpoch, 0)
	if code, off := txnProduce(t, c, 9, kmsg.StringPtr("tx"), "mk", txnBatch(pid, 4, 0, "new")); code != 0 || off != end+1 {
		t.Fatalf("new epoch's first batch: code %d offset %d, want offset %d", code, off, end+1)
	}
	if code := writeMarker(t, c, "nope", producer.Marker{ProducerID: pid, ProducerEpoch: 4}); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: code %d", code)
	}

	av := c.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	want := map[int16]int16{27: 1, 61: 0}
	for _, k := range av.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MaxVersion != w {
				t.Fatalf("api %d advertised up to v%d, want v%d", k.ApiKey, k.MaxVersion, w)
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) > 0 {
		t.Fatalf("not advertised: %v", want)
	}
}

// TestTxnProduceChecks covers Kafka's produce-side checks of
// transactional batches: a transactional id is required, KIP-890
// verification answers by version, a verified partition is not verified
// again while its transaction is open, and a marker ends the verification.
func TestTxnProduceChecks(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "pc", 1, nil)
	c := dialRaw(t, n)
	pid := initProducerID(t, c)
	txnID := kmsg.StringPtr("tx")

	if code, _ := txnProduce(t, c, 9, nil, "pc", txnBatch(pid, 0, 0, "a")); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("no transactional id: code %d, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", code)
	}
	allowVerify(n, kerr.InvalidTxnState.Code)
	if code, _ := txnProduce(t, c, 10, txnID, "pc", txnBatch(pid, 0, 0, "a")); code != kerr.InvalidTxnState.Code {
		t.Fatalf("not in txn, v10: code %d, want INVALID_TXN_STATE", code)
	}
	if code, _ := txnProduce(t, c, 11, txnID, "pc", txnBatch(pid, 0, 0, "a")); code != kerr.TransactionAbortable.Code {
		t.Fatalf("not in txn, v11: code %d, want TRANSACTION_ABORTABLE", code)
	}
	allowVerify(n, kerr.ConcurrentTransactions.Code)
	if code, _ := txnProduce(t, c, 11, txnID, "pc", txnBatch(pid, 0, 0, "a")); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("coordinator busy: code %d, want NOT_ENOUGH_REPLICAS", code)
	}
	allowVerify(n, kerr.ProducerFenced.Code)
	if code, _ := txnProduce(t, c, 11, txnID, "pc", txnBatch(pid, 0, 0, "a")); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("fenced: code %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if got := leo(n, "pc"); got != 0 {
		t.Fatalf("refused batches appended: log end %d", got)
	}
	// Idempotent batches need no verification.
	expectProduce(t, c, "pc", producerBatch(initProducerID(t, c), 0, 0, "plain"), nil, 0)

	calls := allowVerify(n, 0)
	if code, off := txnProduce(t, c, 11, txnID, "pc", txnBatch(pid, 0, 0, "a")); code != 0 || off != 1 {
		t.Fatalf("verified: code %d offset %d", code, off)
	}
	if code, off := txnProduce(t, c, 11, txnID, "pc", txnBatch(pid, 0, 1, "b")); code != 0 || off != 2 {
		t.Fatalf("in txn: code %d offset %d", code, off)
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("%d verifications, want 1 (the open transaction needs none)", got)
	}
	if code := writeMarker(t, c, "pc", producer.Marker{ProducerID: pid}); code != 0 {
		t.Fatalf("abort marker: code %d", code)
	}
	// The next transaction is verified again; a coordinator that does not
	// list the partition refuses the late batch.
	allowVerify(n, kerr.TransactionAbortable.Code)
	if code, _ := txnProduce(t, c, 11, txnID, "pc", txnBatch(pid, 0, 2, "late")); code != kerr.TransactionAbortable.Code {
		t.Fatalf("late batch after abort: code %d, want TRANSACTION_ABORTABLE", code)
	}
}

// TestTxnVerificationGuardDroppedByMarker is KAFKA-14884: a produce
// verified before an ABORT marker must not append after it (into no
// transaction, or the next one).
func TestTxnVerificationGuardDroppedByMarker(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "race", 1, nil)
	c := dialRaw(t, n)
	pid := initProducerID(t, c)
	p := n.partition("race", 0)
	epoch := p.leaderEpoch.Load()
	now := time.Now().UnixMilli()

	guard := p.verified.add(pid, 0, epoch)
	if _, err := p.appendMarker(producer.Marker{ProducerID: pid}, epoch); err != nil {
		t.Fatal(err)
	}
	_, err := p.appendRecords(txnBatch(pid, 0, 0, "late"), epoch, now, &txnAppend{guard: guard, version: 11})
	if !errors.Is(err, kerr.TransactionAbortable) {
		t.Fatalf("append with a guard from before the marker: %v, want TRANSACTION_ABORTABLE", err)
	}
	if _, err := p.appendRecords(txnBatch(pid, 0, 0, "late"), epoch, now, &txnAppend{guard: guard, version: 9}); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("v9: %v, want INVALID_TXN_STATE", err)
	}
	// A fresh verification appends.
	guard = p.verified.add(pid, 0, epoch)
	if _, err := p.appendRecords(txnBatch(pid, 0, 0, "ok"), epoch, now, &txnAppend{guard: guard, version: 11}); err != nil {
		t.Fatal(err)
	}
	if f, ok := p.log.OngoingTxn(pid); !ok || f != 1 {
		t.Fatalf("ongoing txn %d %v, want at 1", f, ok)
	}

	// A guard holds in the leader epoch it was made in only: markers of
	// a later leadership reach this log by replication, which drops no
	// guard.
	other := initProducerID(t, c)
	guard = p.verified.add(other, 0, epoch-1)
	if g := p.verified.cached(other, 0, epoch); g != 0 {
		t.Fatalf("a guard of leader epoch %d is cached in epoch %d", epoch-1, epoch)
	}
	if _, err := p.appendRecords(txnBatch(other, 0, 0, "stale"), epoch, now, &txnAppend{guard: guard, version: 11}); !errors.Is(err, kerr.TransactionAbortable) {
		t.Fatalf("append with a guard of an earlier leader epoch: %v, want TRANSACTION_ABORTABLE", err)
	}
}

// TestTxnDescribeProducers checks DescribeProducers (KIP-664): the open
// transaction's first offset while it is open, the marker's coordinator
// epoch after it.
func TestTxnDescribeProducers(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "dp", 1, nil)
	allowVerify(n, 0)
	c := dialRaw(t, n)
	idem, txn := initProducerID(t, c), initProducerID(t, c)
	expectProduce(t, c, "dp", producerBatch(idem, 0, 0, "a", "b"), nil, 0)
	if code, _ := txnProduce(t, c, 9, kmsg.StringPtr("tx"), "dp", txnBatch(txn, 2, 0, "t")); code != 0 {
		t.Fatalf("txn produce: code %d", code)
	}
	describe := func() kmsg.DescribeProducersResponseTopicPartition {
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = "dp", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.DescribeProducersResponse)
		return resp.Topics[0].Partitions[0]
	}
	p := describe()
	if p.ErrorCode != 0 || len(p.ActiveProducers) != 2 {
		t.Fatalf("describe producers: %+v", p)
	}
	byID := map[int64]kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
	for _, ap := range p.ActiveProducers {
		byID[ap.ProducerID] = ap
	}
	if a := byID[idem]; a.LastSequence != 1 || a.CurrentTxnStartOffset != -1 || a.CoordinatorEpoch != -1 || a.LastTimestamp <= 0 {
		t.Fatalf("idempotent producer: %+v", a)
	}
	if a := byID[txn]; a.ProducerEpoch != 2 || a.LastSequence != 0 || a.CurrentTxnStartOffset != 2 {
		t.Fatalf("transactional producer: %+v", a)
	}
	if code := writeMarker(t, c, "dp", producer.Marker{ProducerID: txn, ProducerEpoch: 2, CoordinatorEpoch: 7, Commit: true}); code != 0 {
		t.Fatalf("marker: code %d", code)
	}
	for _, ap := range describe().ActiveProducers {
		if ap.ProducerID == txn && (ap.CurrentTxnStartOffset != -1 || ap.CoordinatorEpoch != 7) {
			t.Fatalf("after commit: %+v", ap)
		}
	}

	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "nope", []int32{0}
	req.Topics = append(req.Topics, rt)
	if code := c.roundTrip(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: code %d", code)
	}
}

// TestTxnMarkersReplicatedToNewLeader runs transactions on an RF=3
// partition through the leader (markers by writeTxnMarkers, the call the
// coordinator makes for local leaders, answered after the ISR has them),
// stops the leader with one transaction still open, and checks that the
// new leader's LSO and aborted list are the old one's, so a read_committed
// consumer of the new leader sees only the committed records.
func TestTxnMarkersReplicatedToNewLeader(t *testing.T) {
	c := startCluster(t, 3, nil)
	c.createAssigned("rtx", nil, []int32{2, 3, 1})
	c.waitFullISR("rtx", 0)
	if l := c.waitLeader("rtx", 0, -1); l != 2 {
		t.Fatalf("leader %d, want the preferred 2", l)
	}
	old := c.node(2)
	allowVerify(old, 0)
	rc := dialRaw(t, old)
	aborter, committer, open := initProducerID(t, rc), initProducerID(t, rc), initProducerID(t, rc)
	txnID := kmsg.StringPtr("tx")
	for _, b := range [][]byte{
		txnBatch(aborter, 0, 0, "a1", "a2"),
		txnBatch(committer, 0, 0, "c1"),
		producerBatch(initProducerID(t, rc), 0, 0, "p1"),
	} {
		if code, _ := txnProduce(t, rc, 9, txnID, "rtx", b); code != 0 {
			t.Fatalf("produce: code %d", code)
		}
	}
	ctx := testCtx(t)
	for _, m := range []producer.Marker{{ProducerID: aborter}, {ProducerID: committer, Commit: true}} {
		resp := old.writeTxnMarkers(ctx, markersReq("rtx", m))
		if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("marker %+v: code %d", m, code)
		}
		// acks=all: answered once the HW passed the marker.
		p := old.partition("rtx", 0)
		if hw, end := p.hw.Load(), p.log.LogEndOffset(); hw != end {
			t.Fatalf("marker answered at HW %d, log end %d", hw, end)
		}
	}
	if code, off := txnProduce(t, rc, 9, txnID, "rtx", txnBatch(open, 0, 0, "o1")); code != 0 || off != 6 {
		t.Fatalf("open txn produce: code %d offset %d", code, off)
	}
	op := old.partition("rtx", 0)
	testutil.Eventually(t, testWait, func() bool { return op.hw.Load() == op.log.LogEndOffset() }, "HW at the log end")
	wantLSO := op.log.LastStableOffset()
	wantAborted := op.log.AbortedTxns(0, op.log.LogEndOffset())
	if wantLSO != 6 || len(wantAborted) != 1 {
		t.Fatalf("old leader: LSO %d aborted %+v", wantLSO, wantAborted)
	}

	// KIP-392: a follower serving a read_committed consumer stops at its
	// own LSO (bounded by the HW it learnt from the leader) and lists the
	// aborted transaction too.
	fc := dialRaw(t, c.node(3))
	testutil.Eventually(t, testWait, func() error {
		req := fetchReq(11, "rtx", [16]byte{}, 0, 0, 0, 1, 1<<20)
		req.IsolationLevel = 1
		fp := fetchPart0(t, fc.roundTrip(req))
		if fp.ErrorCode != 0 || fp.LastStableOffset != wantLSO || len(fp.AbortedTransactions) != 1 {
			return fmt.Errorf("follower read: code %d lso %d aborted %+v", fp.ErrorCode, fp.LastStableOffset, fp.AbortedTransactions)
		}
		if got := batchValues(t, fp.RecordBatches); !slices.Equal(got, []string{"a1", "a2", "c1", "p1"}) {
			return fmt.Errorf("follower read: %q", got)
		}
		return nil
	}, "a read_committed read from the follower")

	c.stop(2)
	leader := c.waitLeader("rtx", 0, 2)
	np := c.node(leader).partition("rtx", 0)
	testutil.Eventually(t, testWait, func() error {
		if got := np.log.LastStableOffset(); got != wantLSO {
			return fmt.Errorf("new leader %d: LSO %d, want %d (hw %d)", leader, got, wantLSO, np.hw.Load())
		}
		return nil
	}, "the new leader's LSO")
	if got := np.log.AbortedTxns(0, np.log.LogEndOffset()); !slices.Equal(got, wantAborted) {
		t.Fatalf("new leader's aborted list %+v, want %+v", got, wantAborted)
	}
	if f, ok := np.log.OngoingTxn(open); !ok || f != 6 {
		t.Fatalf("new leader: open txn %d %v, want at 6", f, ok)
	}
	got := consumeIso(t, []kgo.Opt{kgo.SeedBrokers(c.seeds()...)}, "rtx", true, 2)
	if !slices.Equal(got, []string{"c1", "p1"}) {
		t.Fatalf("read_committed from the new leader: %q", got)
	}
	// The open transaction ends on the new leader.
	resp := c.node(leader).writeTxnMarkers(ctx, markersReq("rtx", producer.Marker{ProducerID: open, Commit: true}))
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit on the new leader: code %d", code)
	}
	if got := np.log.LastStableOffset(); got != np.log.LogEndOffset() {
		t.Fatalf("LSO %d after the commit, log end %d", got, np.log.LogEndOffset())
	}
}

// TestTxnKcatReadCommittedNeverShowsAborted: kcat (librdkafka,
// read_committed by default) consumes to the end of a partition holding an
// aborted transaction, a committed one and one still open, and shows only
// the committed and plain records, stopping at the LSO; with
// isolation.level=read_uncommitted it shows every record below the HW.
func TestTxnKcatReadCommittedNeverShowsAborted(t *testing.T) {
	kcat := needClient(t, "kcat", "-V")
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "kc-txn", 1, nil)
	allowVerify(n, 0)
	c := dialRaw(t, n)
	aborter, committer, open := initProducerID(t, c), initProducerID(t, c), initProducerID(t, c)
	txnID := kmsg.StringPtr("tx")
	for _, b := range [][]byte{
		txnBatch(aborter, 0, 0, "a1", "a2"),
		producerBatch(initProducerID(t, c), 0, 0, "p1"),
		txnBatch(committer, 0, 0, "c1"),
		txnBatch(aborter, 0, 2, "a3"),
	} {
		if code, _ := txnProduce(t, c, 9, txnID, "kc-txn", b); code != 0 {
			t.Fatalf("produce: code %d", code)
		}
	}
	for _, m := range []producer.Marker{{ProducerID: committer, Commit: true}, {ProducerID: aborter}} {
		if code := writeMarker(t, c, "kc-txn", m); code != 0 {
			t.Fatalf("marker: code %d", code)
		}
	}
	if code, _ := txnProduce(t, c, 9, txnID, "kc-txn", txnBatch(open, 0, 0, "o1")); code != 0 {
		t.Fatalf("produce: code %d", code)
	}
	payloads := func(recs []kcatRecord) []string {
		var out []string
		for _, r := range recs {
			if r.Payload != nil {
				out = append(out, *r.Payload)
			}
		}
		return out
	}
	if got := payloads(kcatConsume(t, kcat, n.Addr(), "kc-txn", "-o", "beginning")); !slices.Equal(got, []string{"p1", "c1"}) {
		t.Fatalf("kcat read_committed: %q, want [p1 c1]", got)
	}
	got := payloads(kcatConsume(t, kcat, n.Addr(), "kc-txn", "-o", "beginning", "-X", "isolation.level=read_uncommitted"))
	if !slices.Equal(got, []string{"a1", "a2", "p1", "c1", "a3", "o1"}) {
		t.Fatalf("kcat read_uncommitted: %q", got)
	}
}

// TestTxnDelayedProduceAfterAbortRefused is KIP-890 part 1 against the
// real coordinator: a transactional batch of a franz-go producer's
// aborted transaction that arrives late is refused (INVALID_TXN_STATE to
// Produce v9, TRANSACTION_ABORTABLE to v11), as is one for a partition
// the ongoing transaction did not add; nothing reaches the log, and the
// producer's next transaction commits without them.
func TestTxnDelayedProduceAfterAbortRefused(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 2, nil)
	cl := txnProducer(t, []string{n.Addr()}, "tx-late")
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, adm, "tx-late", "CompleteAbort")
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n)
	txnID := kmsg.StringPtr("tx-late")
	end0, end1 := leo(n, "t"), n.partition("t", 1).log.LogEndOffset()
	late := func(v int16, part int32) int16 {
		req := produceReq(v, "t", [16]byte{}, part, -1, txnBatch(pid, epoch, 1, "late"))
		req.TransactionID = txnID
		code, _ := produceErr(t, c.roundTrip(req))
		return code
	}
	if code := late(9, 0); code != kerr.InvalidTxnState.Code {
		t.Fatalf("late batch after the abort, v9: code %d, want INVALID_TXN_STATE", code)
	}
	if code := late(11, 0); code != kerr.TransactionAbortable.Code {
		t.Fatalf("late batch after the abort, v11: code %d, want TRANSACTION_ABORTABLE", code)
	}

	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("committed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, adm, "tx-late", "Ongoing")
	if code := late(11, 1); code != kerr.TransactionAbortable.Code {
		t.Fatalf("batch for a partition not in the transaction: code %d, want TRANSACTION_ABORTABLE", code)
	}
	if got := n.partition("t", 1).log.LogEndOffset(); got != end1 {
		t.Fatalf("partition 1 log end %d, want %d", got, end1)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// EndTxn answers once PrepareCommit is durable; the markers follow.
	testutil.Eventually(t, testWait, func() error {
		if got := leo(n, "t"); got != end0+2 {
			return fmt.Errorf("partition 0 log end %d, want %d (the committed record and its marker)", got, end0+2)
		}
		return nil
	}, "the commit marker")
	got := consumeIso(t, []kgo.Opt{kgo.SeedBrokers(n.Addr())}, "t", true, 1)
	if !slices.Equal(got, []string{"committed"}) {
		t.Fatalf("read_committed: %q", got)
	}
}
