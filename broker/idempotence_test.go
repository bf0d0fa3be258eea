package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/producer"
)

// producerBatch builds an uncompressed v2 batch of an idempotent producer:
// id, epoch and the base sequence of its first record.
func producerBatch(id int64, epoch int16, seq int32, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Key: []byte("k"), Value: []byte(v)}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1)
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, ProducerID: id, ProducerEpoch: epoch, FirstSequence: seq,
		LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: now, MaxTimestamp: now + int64(len(values)-1),
		NumRecords: int32(len(values)), Records: recs,
	}
	rb.Length = int32(61 + len(recs) - 12)
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// initProducerID asks the node for a new producer id (epoch 0).
func initProducerID(t *testing.T, c *rawConn) int64 {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID < 0 {
		t.Fatalf("init producer id: %+v", resp)
	}
	return resp.ProducerID
}

// produceOne sends one Produce v9 with acks=-1 to partition 0 of topic and
// returns the partition's error code and base offset.
func produceOne(t *testing.T, c *rawConn, topic string, records []byte) (*kerr.Error, int64) {
	t.Helper()
	code, off := produceErr(t, c.roundTrip(produceReq(9, topic, [16]byte{}, 0, -1, records)))
	if code == 0 {
		return nil, off
	}
	return kerr.ErrorForCode(code).(*kerr.Error), off
}

func expectProduce(t *testing.T, c *rawConn, topic string, records []byte, want *kerr.Error, wantOffset int64) {
	t.Helper()
	got, off := produceOne(t, c, topic, records)
	if got != want || (want == nil && off != wantOffset) {
		t.Fatalf("produce: %v at offset %d, want %v at %d", got, off, want, wantOffset)
	}
}

func leo(n *Node, topic string) int64 { return n.partition(topic, 0).log.LogEndOffset() }

func TestIdempotentProduceDuplicateGetsOriginalOffset(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "dup", 1, nil)
	c := dialRaw(t, n)
	pid := initProducerID(t, c)
	other := initProducerID(t, c)

	b0 := producerBatch(pid, 0, 0, "a", "b", "c")
	expectProduce(t, c, "dup", b0, nil, 0)
	expectProduce(t, c, "dup", producerBatch(other, 0, 0, "x"), nil, 3)
	b1 := producerBatch(pid, 0, 3, "d", "e")
	expectProduce(t, c, "dup", b1, nil, 4)
	// Retries of both batches: acknowledged where they were first written,
	// and nothing appended.
	expectProduce(t, c, "dup", producerBatch(pid, 0, 0, "a", "b", "c"), nil, 0)
	expectProduce(t, c, "dup", producerBatch(pid, 0, 3, "d", "e"), nil, 4)
	if got := leo(n, "dup"); got != 6 {
		t.Fatalf("log end offset %d after duplicates, want 6", got)
	}
	// The producer continues where it was.
	expectProduce(t, c, "dup", producerBatch(pid, 0, 5, "f"), nil, 6)

	// Only the last five batches are remembered: after five more, the
	// first one is neither a duplicate nor in sequence.
	for i := range 5 {
		expectProduce(t, c, "dup", producerBatch(pid, 0, int32(6+i), "g"), nil, int64(7+i))
	}
	expectProduce(t, c, "dup", producerBatch(pid, 0, 0, "a", "b", "c"), kerr.OutOfOrderSequenceNumber, 0)
	expectProduce(t, c, "dup", producerBatch(pid, 0, 10, "g"), nil, 11) // the last one still is a duplicate
	if got := leo(n, "dup"); got != 12 {
		t.Fatalf("log end offset %d, want 12", got)
	}
}

func TestIdempotentProduceSequenceGapIsOutOfOrder(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "gap", 1, nil)
	c := dialRaw(t, n)
	pid := initProducerID(t, c)

	// A producer the partition does not know is accepted at any sequence
	// (KIP-360: its state may have expired).
	expectProduce(t, c, "gap", producerBatch(pid, 0, 7, "a", "b"), nil, 0)
	expectProduce(t, c, "gap", producerBatch(pid, 0, 10, "c"), kerr.OutOfOrderSequenceNumber, 0)
	expectProduce(t, c, "gap", producerBatch(pid, 0, 8, "c"), kerr.OutOfOrderSequenceNumber, 0) // overlaps, not a duplicate
	if got := leo(n, "gap"); got != 2 {
		t.Fatalf("log end offset %d after refused batches, want 2", got)
	}
	expectProduce(t, c, "gap", producerBatch(pid, 0, 9, "c"), nil, 2)
	// Error messages reach v8+ clients.
	pr := c.roundTrip(produceReq(9, "gap", [16]byte{}, 0, -1, producerBatch(pid, 0, 99, "z"))).(*kmsg.ProduceResponse)
	if msg := pr.Topics[0].Partitions[0].ErrorMessage; msg == nil || !strings.Contains(*msg, "sequence") {
		t.Fatalf("error message %v", msg)
	}
}

func TestIdempotentProduceStaleEpochIsInvalidProducerEpoch(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "epoch", 1, nil)
	c := dialRaw(t, n)
	pid := initProducerID(t, c)

	expectProduce(t, c, "epoch", producerBatch(pid, 0, 0, "a"), nil, 0)
	// KIP-360 re-init bumps the epoch; the new epoch starts at sequence 0.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.ProducerID, req.ProducerEpoch = pid, 0
	if r := c.roundTrip(req).(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 || r.ProducerEpoch != 1 {
		t.Fatalf("bump: %+v", r)
	}
	expectProduce(t, c, "epoch", producerBatch(pid, 1, 3, "b"), kerr.OutOfOrderSequenceNumber, 0)
	expectProduce(t, c, "epoch", producerBatch(pid, 1, 0, "b"), nil, 1)
	// The fenced epoch is refused, even in sequence, even as a retry of
	// its own last batch.
	expectProduce(t, c, "epoch", producerBatch(pid, 0, 1, "zombie"), kerr.InvalidProducerEpoch, 0)
	expectProduce(t, c, "epoch", producerBatch(pid, 0, 0, "a"), kerr.InvalidProducerEpoch, 0)
	if got := leo(n, "epoch"); got != 2 {
		t.Fatalf("log end offset %d, want 2", got)
	}
}

// TestProduceOneBatchPerPartitionWithBaseOffsetZero: Kafka's LogValidator
// takes exactly one v2 batch per partition, and UnifiedLog wants a
// client's batch at base offset 0; both are INVALID_RECORD. Invalid
// batches are answered as invalid even when the producer state would call
// them duplicates.
func TestProduceOneBatchPerPartitionWithBaseOffsetZero(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "one", 1, nil)
	c := dialRaw(t, n)
	pid := initProducerID(t, c)

	two := append(recordBatch(1000, "a"), recordBatch(1000, "b")...)
	expectProduce(t, c, "one", two, kerr.InvalidRecord, 0)
	twoIdem := append(producerBatch(pid, 0, 0, "a"), producerBatch(pid, 0, 1, "b")...)
	expectProduce(t, c, "one", twoIdem, kerr.InvalidRecord, 0)
	based := recordBatch(1000, "a")
	binary.BigEndian.PutUint64(based, 42)
	expectProduce(t, c, "one", based, kerr.InvalidRecord, 0)
	if got := leo(n, "one"); got != 0 {
		t.Fatalf("log end offset %d after invalid record sets, want 0", got)
	}
	// The refused two-batch set left no producer state behind: sequence
	// 0 is new, not a duplicate.
	expectProduce(t, c, "one", producerBatch(pid, 0, 0, "a"), nil, 0)

	corruptDup := producerBatch(pid, 0, 0, "a")
	corruptDup[len(corruptDup)-1] ^= 0xff
	expectProduce(t, c, "one", corruptDup, kerr.CorruptMessage, 0)
	corruptGap := producerBatch(pid, 0, 50, "a")
	corruptGap[len(corruptGap)-1] ^= 0xff
	expectProduce(t, c, "one", corruptGap, kerr.CorruptMessage, 0)
	if got := leo(n, "one"); got != 1 {
		t.Fatalf("log end offset %d, want 1", got)
	}
}

// dropResponses installs a produce hook that closes the connection after
// the appends of every produce request whose number (from 1) drop says,
// so the client never sees the answer and retries batches that were
// written. It returns how many responses were dropped so far.
func dropResponses(n *Node, drop func(req int) bool) *atomic.Int32 {
	var seen, dropped atomic.Int32
	h := produceHookFunc(func(req *kmsg.ProduceRequest) error {
		if drop(int(seen.Add(1))) {
			dropped.Add(1)
			return errors.New("test: produce response dropped")
		}
		return nil
	})
	n.produceHook.Store(&h)
	return &dropped
}

// consumeValues reads partition 0 of topic from offset 0 up to the high
// watermark with a fresh client and returns the values in offset order,
// failing on any offset gap.
func consumeValues(t *testing.T, n *Node, topic string) []string {
	t.Helper()
	want := n.partition(topic, 0).hw.Load()
	cl := newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	var vals []string
	ctx := testCtx(t)
	for int64(len(vals)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(vals), want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(len(vals)) {
				t.Fatalf("offset %d after %d records: not dense", r.Offset, len(vals))
			}
			vals = append(vals, string(r.Value))
		})
	}
	return vals
}

// checkExactlyOnce fails unless vals holds each of the count values
// "<tag>-<i>" exactly once, in order.
func checkExactlyOnce(t *testing.T, vals []string, tag string, count int) {
	t.Helper()
	if len(vals) != count {
		seen := map[string]int{}
		for _, v := range vals {
			if seen[v]++; seen[v] == 2 {
				t.Errorf("%s written twice", v)
			}
		}
		t.Fatalf("%d records in the log, produced %d", len(vals), count)
	}
	for i, v := range vals {
		if want := fmt.Sprintf("%s-%d", tag, i); v != want {
			t.Fatalf("offset %d holds %s, want %s", i, v, want)
		}
	}
}

// TestIdempotentKgoProducerExactlyOnceAcrossLostResponses: franz-go's
// default (idempotent) producer whose produce responses are lost after the
// appends retries the same sequences; the log holds every record once.
func TestIdempotentKgoProducerExactlyOnceAcrossLostResponses(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "exactly", 1, nil)
	dropped := dropResponses(n, func(i int) bool { return i%3 == 1 && i < 40 }) // the 1st, 4th, 7th, ... request
	cl := newClient(t, n, kgo.ProducerLinger(0), kgo.RetryBackoffFn(fastBackoff), kgo.MetadataMinAge(10*time.Millisecond))
	const count = 300
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for i := range count {
		wg.Add(1)
		cl.Produce(testCtx(t), &kgo.Record{Topic: "exactly", Value: []byte(fmt.Sprintf("v-%d", i))}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		})
		if i%50 == 49 {
			wg.Wait() // several rounds, so later batches are retried too
		}
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if dropped.Load() < 3 {
		t.Fatalf("only %d responses dropped: the test provoked too few retries", dropped.Load())
	}
	n.produceHook.Store(nil)
	checkExactlyOnce(t, consumeValues(t, n, "exactly"), "v", count)
}

// fastBackoff keeps kgo's retries quick in tests that make it retry
// (with MetadataMinAge: kgo waits 5s by default before refreshing metadata
// again, which it wants after a failed produce).
func fastBackoff(int) time.Duration { return 10 * time.Millisecond }

// restartableNode is a node on a fixed directory that a test restarts,
// with a dialer that always reaches the node running now (its port
// changes on each start), so one kgo client outlives the restarts.
type restartableNode struct {
	t     *testing.T
	dir   string
	extra map[string]string
	mu    sync.Mutex
	n     *Node
}

func (r *restartableNode) node() *Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *restartableNode) restart() {
	r.t.Helper()
	r.mu.Lock()
	old := r.n
	r.mu.Unlock()
	if old != nil {
		if err := old.Close(); err != nil {
			r.t.Fatalf("close: %v", err)
		}
	}
	n := startNode(r.t, r.dir, r.extra)
	r.mu.Lock()
	r.n = n
	r.mu.Unlock()
}

func (r *restartableNode) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, r.node().Addr())
}

// TestIdempotentKgoProducerExactlyOnceAcrossRestarts: one franz-go
// producer keeps producing while the node restarts under it, twice; before
// each restart the last produce's response is lost, so the producer
// retries that batch against the restarted node, which knows it from the
// producer state it rebuilt (the .snapshot of the last roll plus the
// batches after it). The log holds every record once, offsets dense, and
// no OUT_OF_ORDER_SEQUENCE_NUMBER reaches the producer.
func TestIdempotentKgoProducerExactlyOnceAcrossRestarts(t *testing.T) {
	rn := &restartableNode{t: t, dir: t.TempDir()}
	rn.restart()
	segBytes := "2048"
	createTopic(t, newAdmin(t, rn.node()), "restart", 1, map[string]*string{"segment.bytes": &segBytes})
	cl, err := kgo.NewClient(kgo.SeedBrokers(rn.node().Addr()), kgo.Dialer(rn.dial), kgo.RetryTimeout(testWait),
		kgo.ProducerLinger(0), kgo.RecordRetries(1000), kgo.RetryBackoffFn(fastBackoff), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	const rounds, perRound = 3, 40
	i := 0
	produce := func(count int) {
		t.Helper()
		for range count {
			r := &kgo.Record{Topic: "restart", Value: []byte(fmt.Sprintf("r-%d", i))}
			i++
			if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", r.Value, err)
			}
		}
	}
	for round := range rounds {
		produce(perRound)
		if round == rounds-1 {
			break
		}
		// Lose the response of the next produce, and restart the node
		// while the producer waits to retry it.
		n := rn.node()
		lost := make(chan struct{})
		var once sync.Once
		h := produceHookFunc(func(*kmsg.ProduceRequest) error {
			once.Do(func() { close(lost) })
			return errors.New("test: response lost")
		})
		n.produceHook.Store(&h)
		r := &kgo.Record{Topic: "restart", Value: []byte(fmt.Sprintf("r-%d", i))}
		i++
		done := make(chan error, 1)
		cl.Produce(testCtx(t), r, func(_ *kgo.Record, err error) { done <- err })
		select {
		case <-lost:
		case <-time.After(testWait):
			t.Fatal("the produce never reached the node")
		}
		before := n.partition("restart", 0).log.LogEndOffset()
		rn.restart()
		if got := leo(rn.node(), "restart"); got != before {
			t.Fatalf("log end offset %d after restart, %d before", got, before)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("retried produce across the restart: %v", err)
			}
		case <-time.After(testWait):
			t.Fatal("retried produce never completed")
		}
		if r.Offset != before-1 {
			t.Fatalf("retry acknowledged at %d, the batch was written at %d", r.Offset, before-1)
		}
	}
	n := rn.node()
	if segs := n.partition("restart", 0).log.NumSegments(); segs < 3 {
		t.Fatalf("%d segments: segment.bytes should have rolled the log (and written snapshots)", segs)
	}
	checkExactlyOnce(t, consumeValues(t, n, "restart"), "r", i)
}

// TestIdempotentStateRestoredFromSnapshotAndReplay restarts a node whose
// producer's recent batches lie partly in the latest .snapshot (taken at a
// roll) and partly after it (replayed from the log): every one of the last
// five batches is still recognised as a duplicate, and the sequence goes
// on. Then the same with the snapshots removed (replay of the whole log),
// and without the clean-shutdown marker (storage recovers every log by
// rescanning first, as after a crash).
func TestIdempotentStateRestoredFromSnapshotAndReplay(t *testing.T) {
	for _, tc := range []struct{ removeSnapshots, unclean bool }{{false, false}, {true, false}, {false, true}} {
		removeSnapshots := tc.removeSnapshots
		t.Run(fmt.Sprintf("removeSnapshots=%v/unclean=%v", removeSnapshots, tc.unclean), func(t *testing.T) {
			dir := t.TempDir()
			n := startNode(t, dir, nil)
			segBytes := "400" // a roll every three or four batches
			createTopic(t, newAdmin(t, n), "snap", 1, map[string]*string{"segment.bytes": &segBytes})
			c := dialRaw(t, n)
			pid := initProducerID(t, c)
			var batches [][]byte
			var offsets []int64
			for i := range 20 {
				b := producerBatch(pid, 0, int32(i), fmt.Sprintf("value-%02d-0123456789", i))
				expectProduce(t, c, "snap", b, nil, int64(i))
				batches, offsets = append(batches, b), append(offsets, int64(i))
			}
			p := n.partition("snap", 0)
			// A roll's snapshot is written by its fsyncs, in the
			// background (storage's rollsync.go): wait for the latest.
			testutil.Eventually(t, testWait, func() bool {
				return p.log.RecoveryPoint() >= p.log.Segments()[p.log.NumSegments()-1].BaseOffset
			}, "the rolls' fsyncs and snapshots")
			snapOff, snap, ok, err := p.log.LatestProducerSnapshot()
			if err != nil || !ok {
				t.Fatalf("no producer snapshot after %d segments: %v", p.log.NumSegments(), err)
			}
			st := producer.New(producer.Options{})
			if err := st.Restore(snap); err != nil {
				t.Fatal(err)
			}
			e, ok := st.Entry(pid)
			if !ok || len(e.Batches) == 0 || e.Batches[len(e.Batches)-1].LastOffset >= snapOff {
				t.Fatalf("snapshot at %d: producer entry %+v", snapOff, e)
			}
			if snapOff > offsets[17] {
				t.Fatalf("snapshot at %d holds all of the last five batches: the test wants some replayed", snapOff)
			}
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			if removeSnapshots {
				files, _ := filepath.Glob(filepath.Join(dir, "snap-0", "*.snapshot"))
				if len(files) == 0 {
					t.Fatal("no .snapshot files to remove")
				}
				for _, f := range files {
					os.Remove(f)
				}
			}
			if tc.unclean {
				if err := os.Remove(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
					t.Fatalf("no clean-shutdown marker to remove: %v", err)
				}
			}

			n2 := startNode(t, dir, nil)
			c2 := dialRaw(t, n2)
			end := leo(n2, "snap")
			for i := 15; i < 20; i++ {
				expectProduce(t, c2, "snap", batches[i], nil, offsets[i])
			}
			expectProduce(t, c2, "snap", batches[14], kerr.OutOfOrderSequenceNumber, 0)
			expectProduce(t, c2, "snap", producerBatch(pid, 0, 21, "gap"), kerr.OutOfOrderSequenceNumber, 0)
			if got := leo(n2, "snap"); got != end {
				t.Fatalf("log end offset %d after duplicates, want %d", got, end)
			}
			expectProduce(t, c2, "snap", producerBatch(pid, 0, 20, "next"), nil, end)
		})
	}
}

// TestIdempotentCleanShutdownSnapshotSkipsReplay: a clean shutdown writes
// the producer snapshot at the log end, so the restart restores it and
// replays no batch header (before: every batch of the active segment), and
// duplicates are still acknowledged at their offsets.
func TestIdempotentCleanShutdownSnapshotSkipsReplay(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	createTopic(t, newAdmin(t, n), "snapend", 1, nil)
	c := dialRaw(t, n)
	pid := initProducerID(t, c)
	var batches [][]byte
	for i := range 8 {
		b := producerBatch(pid, 0, int32(i), fmt.Sprintf("value-%02d", i))
		expectProduce(t, c, "snapend", b, nil, int64(i))
		batches = append(batches, b)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := storage.OpenLog(storage.LogOptions{Dir: filepath.Join(dir, "snapend-0"), Topic: "snapend", CleanShutdown: true, RecoveryPoint: 8})
	if err != nil {
		t.Fatal(err)
	}
	off, snap, ok, err := l.LatestProducerSnapshot()
	if err != nil || !ok || off != 8 {
		l.Close()
		t.Fatalf("latest producer snapshot after a clean shutdown: offset %d ok %v err %v, want offset 8", off, ok, err)
	}
	_, res, err := producer.Load(producer.Options{}, off, snap, time.Now().UnixMilli(), func(from int64, apply func(batch.Header) error) error {
		return replayBatchHeaders(l, from, apply)
	})
	l.Close()
	if err != nil || res.Replayed != 0 || res.SnapshotErr != nil {
		t.Fatalf("load after a clean shutdown: replayed %d batches, snapshot error %v, err %v; want 0", res.Replayed, res.SnapshotErr, err)
	}
	n2 := startNode(t, dir, nil)
	c2 := dialRaw(t, n2)
	for i := 3; i < 8; i++ {
		expectProduce(t, c2, "snapend", batches[i], nil, int64(i))
	}
	expectProduce(t, c2, "snapend", producerBatch(pid, 0, 8, "next"), nil, 8)
}

// TestIdempotentConcurrentProducersOnePartition: several idempotent
// producers on their own connections, each retrying every batch once,
// write one partition at once; every batch lands once, and every retry is
// acknowledged at its batch's offset.
func TestIdempotentConcurrentProducersOnePartition(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "conc", 1, nil)
	const producers, batches = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		c := dialRaw(t, n)
		pid := initProducerID(t, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				v := fmt.Sprintf("p%d-%d", p, i)
				first := produceReq(9, "conc", [16]byte{}, 0, -1, producerBatch(pid, 0, int32(i), v))
				retry := produceReq(9, "conc", [16]byte{}, 0, -1, producerBatch(pid, 0, int32(i), v))
				// Pipelined: the retry is sent before the first answer.
				frames := append(frameRequest(first, int32(2*i)), frameRequest(retry, int32(2*i+1))...)
				if _, err := c.nc.Write(frames); err != nil {
					errs <- err
					return
				}
				var offs [2]int64
				for k := range 2 {
					_, body, err := c.readFrame()
					if err != nil {
						errs <- err
						return
					}
					resp := kmsg.NewPtrProduceResponse()
					resp.SetVersion(9)
					if err := resp.ReadFrom(body[1:]); err != nil { // flexible header: an empty tag section
						errs <- err
						return
					}
					rp := resp.Topics[0].Partitions[0]
					if rp.ErrorCode != 0 {
						errs <- fmt.Errorf("%s: %v", v, kerr.ErrorForCode(rp.ErrorCode))
						return
					}
					offs[k] = rp.BaseOffset
				}
				if offs[0] != offs[1] {
					errs <- fmt.Errorf("%s written at %d, retry acknowledged at %d", v, offs[0], offs[1])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	vals := consumeValues(t, n, "conc")
	if len(vals) != producers*batches {
		t.Fatalf("%d records, want %d", len(vals), producers*batches)
	}
	next := make([]int, producers)
	for _, v := range vals {
		var p, i int
		if _, err := fmt.Sscanf(v, "p%d-%d", &p, &i); err != nil || i != next[p] {
			t.Fatalf("record %q out of order (next of producer %d is %d)", v, p, next[p])
		}
		next[p]++
	}
}

// TestReplayBatchHeadersReadsEveryBatchOnce replays a log of small and
// large batches (some larger than the 64 KiB read window, some straddling
// it) over several segments, from the start and from inside a batch: every
// batch's header arrives once, in order, with its producer fields.
func TestReplayBatchHeadersReadsEveryBatchOnce(t *testing.T) {
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	l, err := storage.OpenLog(storage.LogOptions{Dir: filepath.Join(t.TempDir(), "r-0"), Topic: "r", Partition: 0, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type appended struct {
		base int64
		seq  int32
	}
	var want []appended
	seq := int32(0)
	for i := range 4000 {
		size := 10 + (i*7919)%300 // small, varied: some headers straddle the window
		if i%397 == 0 {
			size = 150 << 10 // larger than the window
		}
		b := producerBatch(7, 0, seq, strings.Repeat("v", size), "w")
		info, err := l.Append(b, storage.AppendOptions{AssignOffsets: true})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, appended{info.FirstOffset, seq})
		seq += 2
	}
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments, want several", l.NumSegments())
	}
	for _, from := range []int64{0, want[1234].base + 1, want[3999].base} {
		var got []appended
		err := replayBatchHeaders(l, from, func(h batch.Header) error {
			if h.ProducerID != 7 || h.NumRecords != 2 {
				return fmt.Errorf("header at %d: producer %d, %d records", h.BaseOffset, h.ProducerID, h.NumRecords)
			}
			got = append(got, appended{h.BaseOffset, h.BaseSequence})
			return nil
		})
		if err != nil {
			t.Fatalf("replay from %d: %v", from, err)
		}
		first := 0
		for first < len(want) && want[first].base+1 < from { // the batch holding from comes first
			first++
		}
		if fmt.Sprint(got) != fmt.Sprint(want[first:]) {
			t.Fatalf("replay from %d: %d headers, want %d (first %v, want %v)", from, len(got), len(want)-first, got[:min(3, len(got))], want[first:first+min(3, len(want)-first)])
		}
	}
}

// TestIdempotentDuplicateAnswersTheOriginalLogAppendTime: on a
// LogAppendTime topic a duplicate is answered with the append time of the
// batch it repeats, also after a restart (the state rebuilt from the log
// keeps the stored time); on a CreateTime topic with -1.
func TestIdempotentDuplicateAnswersTheOriginalLogAppendTime(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	lat := "LogAppendTime"
	adm := newAdmin(t, n)
	createTopic(t, adm, "lat", 1, map[string]*string{"message.timestamp.type": &lat})
	createTopic(t, adm, "ct", 1, nil)
	c := dialRaw(t, n)
	pid := initProducerID(t, c)
	produce := func(c *rawConn, topic string, b []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		p := c.roundTrip(produceReq(9, topic, [16]byte{}, 0, -1, b)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("produce to %s: %v", topic, kerr.ErrorForCode(p.ErrorCode))
		}
		return p
	}
	var firsts []kmsg.ProduceResponseTopicPartition
	var sent [][]byte
	for i := range 3 {
		b := producerBatch(pid, 0, int32(i), "v")
		sent = append(sent, b)
		firsts = append(firsts, produce(c, "lat", b))
		time.Sleep(2 * time.Millisecond) // distinct append times
	}
	if firsts[0].LogAppendTime <= 0 {
		t.Fatalf("LogAppendTime topic answered %d", firsts[0].LogAppendTime)
	}
	check := func(c *rawConn) {
		t.Helper()
		for i, b := range sent {
			if d := produce(c, "lat", b); d.BaseOffset != firsts[i].BaseOffset || d.LogAppendTime != firsts[i].LogAppendTime {
				t.Fatalf("duplicate %d answered offset %d time %d, first answer %d %d", i, d.BaseOffset, d.LogAppendTime, firsts[i].BaseOffset, firsts[i].LogAppendTime)
			}
		}
	}
	check(c)
	ct := producerBatch(pid, 0, 0, "v")
	produce(c, "ct", ct)
	if d := produce(c, "ct", ct); d.BaseOffset != 0 || d.LogAppendTime != -1 {
		t.Fatalf("CreateTime duplicate: offset %d time %d", d.BaseOffset, d.LogAppendTime)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, nil)
	check(dialRaw(t, n))
}
