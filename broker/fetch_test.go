package broker

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// TestFetchKgoLongConsumeWithSessions runs franz-go's consumer with its
// default fetch sessions while a producer writes in rounds: every record
// arrives once, in offset order per partition, and the consumer really
// fetched incrementally in one session for many epochs.
func TestFetchKgoLongConsumeWithSessions(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	const topic, parts, rounds, perRound = "longconsume", 4, 25, 200
	createTopic(t, newAdmin(t, n), topic, parts, nil)
	prod := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	cons := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(2*time.Second), kgo.FetchMaxPartitionBytes(16<<10))
	ctx := testCtx(t)

	type seen struct {
		next  map[int32]int64
		count int
	}
	got := seen{next: map[int32]int64{}}
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		for {
			fs := cons.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				done <- err
				return
			}
			var bad error
			fs.EachError(func(_ string, _ int32, err error) { bad = err })
			if bad != nil {
				done <- bad
				return
			}
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != got.next[r.Partition] && bad == nil {
					bad = fmt.Errorf("partition %d: offset %d, want %d", r.Partition, r.Offset, got.next[r.Partition])
				}
				got.next[r.Partition] = r.Offset + 1
				got.count++
			})
			c := got.count
			mu.Unlock()
			if bad != nil || c >= rounds*perRound {
				done <- bad
				return
			}
		}
	}()
	for round := range rounds {
		var recs []*kgo.Record
		for i := range perRound {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "round %d record %d", round, i)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		// Let the consumer catch up and park: rounds arrive on live sessions.
		testutil.Eventually(t, testWait, func() bool {
			mu.Lock()
			c := got.count
			mu.Unlock()
			if len(done) > 0 { // finished or failed: the select below says which
				return true
			}
			if c < (round+1)*perRound {
				return false
			}
			for p := int32(0); p < parts; p++ {
				if !parked(n, topic, p) {
					return false
				}
			}
			return true
		}, "the consumer to catch up with round %d and park", round)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("consumer did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	if got.count != rounds*perRound {
		t.Fatalf("consumed %d records, want %d", got.count, rounds*perRound)
	}
	for p := int32(0); p < parts; p++ {
		if want := n.partition(topic, p).log.LogEndOffset(); got.next[p] != want {
			t.Errorf("partition %d consumed to %d, log ends at %d", p, got.next[p], want)
		}
	}
	maxEpoch := int32(0)
	n.fetchSessions.mu.Lock()
	for _, s := range n.fetchSessions.sessions {
		s.mu.Lock()
		maxEpoch = max(maxEpoch, s.epoch)
		s.mu.Unlock()
	}
	n.fetchSessions.mu.Unlock()
	if maxEpoch < rounds {
		t.Fatalf("the consumer's session reached epoch %d over %d rounds: kgo did not fetch incrementally", maxEpoch, rounds)
	}
}

// TestFetchPartitionErrorsAndOffsets checks the per-partition answers:
// OFFSET_OUT_OF_RANGE below the log start and past the log end, leader
// errors by CurrentLeaderEpoch, NOT_LEADER_OR_FOLLOWER, unknown topics,
// partitions and ids, -1 offsets with an error and the high watermark,
// last stable offset and log start offset without.
func TestFetchPartitionErrorsAndOffsets(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "perr", 1, nil)
	c := dialRaw(t, n)
	for i := range 5 {
		producedOne(t, c, "perr", 0, fmt.Sprint("r", i))
	}
	p := n.partition("perr", 0)
	if err := p.log.SetLogStartOffset(2); err != nil {
		t.Fatal(err)
	}
	check := func(name string, req *kmsg.FetchRequest, want *kerr.Error, wantBytes bool) {
		t.Helper()
		got := fetchedParts(t, c.roundTrip(req).(*kmsg.FetchResponse))
		g := got[req.Topics[0].Partitions[0].Partition]
		code := int16(0)
		if want != nil {
			code = want.Code
		}
		if g.code != code {
			t.Errorf("%s: error %v, want %v", name, kerr.ErrorForCode(g.code), want)
		}
		if want != nil && (g.hw != -1 || g.lastStable != -1 || g.start != -1 || g.bytes != 0) {
			t.Errorf("%s: an error answer carries %+v, want -1 offsets and no records", name, g)
		}
		if want == nil && (g.hw != 5 || g.lastStable != 5 || g.start != 2 || (g.bytes > 0) != wantBytes) {
			t.Errorf("%s: answered %+v, want hw 5, last stable 5, log start 2, records %v", name, g, wantBytes)
		}
	}
	at := func(v int16, off int64) *kmsg.FetchRequest {
		return fetchReq(v, "perr", [16]byte{}, 0, off, 0, 0, 1<<20)
	}
	check("below log start", at(12, 1), kerr.OffsetOutOfRange, false)
	check("at log start", at(12, 2), nil, true)
	check("at log end", at(12, 5), nil, false)
	check("past log end", at(12, 6), kerr.OffsetOutOfRange, false)

	p.leaderEpoch.Store(3)
	withEpoch := func(e int32) *kmsg.FetchRequest {
		r := at(12, 2)
		r.Topics[0].Partitions[0].CurrentLeaderEpoch = e
		return r
	}
	check("older leader epoch", withEpoch(2), kerr.FencedLeaderEpoch, false)
	check("newer leader epoch", withEpoch(4), kerr.UnknownLeaderEpoch, false)
	check("current leader epoch", withEpoch(3), nil, true)
	check("leader epoch unknown to client", withEpoch(-1), nil, true)
	p.leaderEpoch.Store(0)

	p.leader.Store(false)
	check("not leader", at(12, 2), kerr.NotLeaderForPartition, false)
	p.leader.Store(true)

	check("unknown topic", fetchReq(12, "nope", [16]byte{}, 0, 0, 0, 0, 1<<20), kerr.UnknownTopicOrPartition, false)
	check("unknown partition", fetchReq(12, "perr", [16]byte{}, 7, 0, 0, 0, 1<<20), kerr.UnknownTopicOrPartition, false)
	check("unknown topic id", fetchReq(13, "", [16]byte{1, 2, 3}, 0, 0, 0, 0, 1<<20), kerr.UnknownTopicID, false)
	check("by topic id", fetchReq(13, "", topicID(t, n, "perr"), 0, 2, 0, 0, 1<<20), nil, true)

	// An error answers a long poll at once, with the other partitions.
	req := fetchReq(12, "perr", [16]byte{}, 0, 5, 20000, 1, 1<<20)
	bad := kmsg.NewFetchRequestTopicPartition()
	bad.Partition, bad.FetchOffset, bad.PartitionMaxBytes, bad.CurrentLeaderEpoch = 9, 0, 1<<20, -1
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, bad)
	start := time.Now()
	got := fetchedParts(t, c.roundTrip(req).(*kmsg.FetchResponse))
	if el := time.Since(start); el > 5*time.Second || got[9].code != kerr.UnknownTopicOrPartition.Code || got[0].code != 0 {
		t.Fatalf("long poll with an unknown partition: %+v after %v", got, el)
	}
}

// TestFetchLongPollWaitsForMinBytesAcrossPartitions parks a fetch whose
// MinBytes needs data on two partitions: one append is not enough (the
// first partition's view is kept while waiting), the second answers it
// with both.
func TestFetchLongPollWaitsForMinBytesAcrossPartitions(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "minbytes", 2, nil)
	c := dialRaw(t, n)
	one := len(recordBatch(0, "x"))
	req := fetchReq(12, "minbytes", [16]byte{}, 0, 0, 20000, int32(one+1), 1<<20)
	p1 := req.Topics[0].Partitions[0]
	p1.Partition = 1
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	corr := c.send(req)
	prod := dialRaw(t, n)
	producedOne(t, prod, "minbytes", 0, "x")

	res := make(chan []byte, 1)
	go func() {
		_, body, err := c.readFrame()
		if err != nil {
			body = nil
		}
		res <- body
	}()
	select {
	case <-res:
		t.Fatal("answered with one partition's bytes, below MinBytes")
	case <-time.After(300 * time.Millisecond):
	}
	producedOne(t, prod, "minbytes", 1, "y")
	var body []byte
	select {
	case body = <-res:
	case <-time.After(5 * time.Second):
		t.Fatal("second append did not answer the fetch")
	}
	if body == nil {
		t.Fatalf("fetch %d: connection failed", corr)
	}
	got := fetchedParts(t, decodeResponse(t, req, body).(*kmsg.FetchResponse))
	if got[0].bytes != one || got[1].bytes != one {
		t.Fatalf("answered %+v, want one batch (%d bytes) from each partition", got, one)
	}
}

// TestFetchLongPollAnswersAtOnceWhenLeadershipMoves parks a fetch on a
// partition with no data, then takes the partition's leadership away as
// reconcile does (leader flag, then a wake): the parked fetch answers
// NOT_LEADER_OR_FOLLOWER at once rather than at MaxWaitMs, although no
// append moved the high watermark.
func TestFetchLongPollAnswersAtOnceWhenLeadershipMoves(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "moves", 1, nil)
	c := dialRaw(t, n)
	req := fetchReq(12, "moves", [16]byte{}, 0, 0, 20000, 1, 1<<20)
	c.send(req)
	waitParked(t, n, "moves", 0)
	p := n.partition("moves", 0)
	p.leader.Store(false)
	defer p.leader.Store(true)
	start := time.Now()
	p.wake()
	_, body, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("answered after %v", el)
	}
	if got := fetchedParts(t, decodeResponse(t, req, body).(*kmsg.FetchResponse)); got[0].code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("answered %+v, want NOT_LEADER_OR_FOLLOWER", got)
	}
}

// TestFetchTopicListedInSeveralRunsAnswersInRequestOrder: librdkafka
// lists a topic's partitions in several runs of one Fetch (a consumer of
// many topics: 0042_many_topics); the response keeps the request's order,
// a new topic entry whenever the topic changes, as Kafka's does. Grouping
// the partitions by topic instead put the record placeholders out of
// order, and the broker closed the connection ("All broker connections
// are down").
func TestFetchTopicListedInSeveralRunsAnswersInRequestOrder(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "runs-a", 2, nil)
	createTopic(t, adm, "runs-b", 2, nil)
	c := dialRaw(t, n)
	order := []struct {
		topic     string
		partition int32
	}{{"runs-a", 0}, {"runs-b", 0}, {"runs-a", 1}, {"runs-b", 1}}
	for _, tp := range order[:4] {
		if code, _ := produceErr(t, c.roundTrip(produceReq(9, tp.topic, [16]byte{}, tp.partition, 1, recordBatch(1, tp.topic)))); code != 0 {
			t.Fatalf("produce %s-%d: %d", tp.topic, tp.partition, code)
		}
	}
	for _, v := range []int16{4, 11, 12, 13} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 50<<20, -1
		for _, tp := range order[:4] {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = tp.topic
			if v >= 13 {
				rt.TopicID = topicID(t, n, tp.topic)
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = tp.partition, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp := c.roundTrip(req).(*kmsg.FetchResponse)
		if len(resp.Topics) != 4 {
			t.Fatalf("v%d: %d topic entries, want 4 (one per run)", v, len(resp.Topics))
		}
		for i, rt := range resp.Topics {
			name := rt.Topic
			if v >= 13 {
				if rt.TopicID != topicID(t, n, order[i].topic) {
					t.Fatalf("v%d: entry %d has another topic id", v, i)
				}
				name = order[i].topic
			}
			if name != order[i].topic || len(rt.Partitions) != 1 || rt.Partitions[0].Partition != order[i].partition {
				t.Fatalf("v%d: entry %d is %s %+v, want %s-%d", v, i, name, rt.Partitions, order[i].topic, order[i].partition)
			}
			p := rt.Partitions[0]
			if p.ErrorCode != 0 || !bytes.Contains(p.RecordBatches, []byte(order[i].topic)) {
				t.Fatalf("v%d: %s-%d: error %d, %d bytes of records", v, order[i].topic, order[i].partition, p.ErrorCode, len(p.RecordBatches))
			}
		}
	}
}
