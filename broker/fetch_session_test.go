package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetch builds a Fetch in session (id, epoch) naming the given
// partitions at their offsets (in partition order); MaxWaitMs 0 unless
// changed.
func sessionFetch(version int16, id, epoch int32, topic string, tid [16]byte, offsets map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxBytes = -1, 50<<20
	req.SessionID, req.SessionEpoch = id, epoch
	if len(offsets) == 0 {
		return req
	}
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, tid
	for _, p := range slices.Sorted(mapsKeys(offsets)) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, offsets[p], 1<<20, -1
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

func mapsKeys(m map[int32]int64) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// fetchedPart is what a response said about one partition.
type fetchedPart struct {
	code                  int16
	bytes                 int
	hw, lastStable, start int64
}

// fetchedParts flattens a fetch response by partition; a partition listed
// twice fails the test.
func fetchedParts(t *testing.T, fr *kmsg.FetchResponse) map[int32]fetchedPart {
	t.Helper()
	out := map[int32]fetchedPart{}
	for _, rt := range fr.Topics {
		for _, rp := range rt.Partitions {
			if _, dup := out[rp.Partition]; dup {
				t.Fatalf("partition %d answered twice", rp.Partition)
			}
			out[rp.Partition] = fetchedPart{rp.ErrorCode, len(rp.RecordBatches), rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset}
		}
	}
	return out
}

func producedOne(t *testing.T, c *rawConn, topic string, p int32, val string) {
	t.Helper()
	if code, _ := produceErr(t, c.roundTrip(produceReq(9, topic, [16]byte{}, p, -1, recordBatch(0, val)))); code != 0 {
		t.Fatalf("produce to %s-%d: %v", topic, p, kerr.ErrorForCode(code))
	}
}

// TestFetchSessionIncrementalAnswersOnlyChangedPartitions drives a session
// with raw requests at every session-capable version: the full fetch
// creates it and answers every partition; an incremental fetch answers
// only partitions with new data (or new offsets), honours
// ForgottenTopics, and refuses replayed epochs, unknown sessions and a
// change of topic naming.
func TestFetchSessionIncrementalAnswersOnlyChangedPartitions(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	c := dialRaw(t, n)
	for v := int16(7); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
		topic := fmt.Sprintf("sess-v%d", v)
		createTopic(t, adm, topic, 3, nil)
		var tid [16]byte
		if v >= 13 {
			tid = topicID(t, n, topic)
		}
		for p := int32(0); p < 3; p++ {
			producedOne(t, c, topic, p, "first")
		}
		fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
			t.Helper()
			return c.roundTrip(req).(*kmsg.FetchResponse)
		}

		full := fetch(sessionFetch(v, 0, 0, topic, tid, map[int32]int64{0: 0, 1: 0, 2: 0}))
		if full.ErrorCode != 0 || full.SessionID == 0 {
			t.Fatalf("v%d: full fetch: error %d, session %d: want a new session", v, full.ErrorCode, full.SessionID)
		}
		got := fetchedParts(t, full)
		for p := int32(0); p < 3; p++ {
			if g := got[p]; g.code != 0 || g.bytes == 0 || g.hw != 1 || g.lastStable != 1 || g.start != 0 {
				t.Fatalf("v%d: full fetch partition %d: %+v", v, p, g)
			}
		}
		id := full.SessionID

		// The client moved every offset to 1: nothing new anywhere, so
		// nothing is answered.
		inc := fetch(sessionFetch(v, id, 1, topic, tid, map[int32]int64{0: 1, 1: 1, 2: 1}))
		if inc.ErrorCode != 0 || inc.SessionID != id || len(fetchedParts(t, inc)) != 0 {
			t.Fatalf("v%d: incremental with no news: error %d session %d parts %v", v, inc.ErrorCode, inc.SessionID, fetchedParts(t, inc))
		}

		// New data on partition 1 only: the next incremental fetch (naming
		// no partitions: offsets unchanged) answers partition 1 alone.
		producedOne(t, c, topic, 1, "second")
		inc = fetch(sessionFetch(v, id, 2, topic, tid, nil))
		got = fetchedParts(t, inc)
		if len(got) != 1 || got[1].bytes == 0 || got[1].hw != 2 {
			t.Fatalf("v%d: after one append: answered %+v, want partition 1 with records and hw 2", v, got)
		}

		// Replaying epoch 2 is refused (the response may have been lost:
		// the client starts a new session).
		if inc = fetch(sessionFetch(v, id, 2, topic, tid, nil)); inc.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(inc.Topics) != 0 {
			t.Fatalf("v%d: replayed epoch: error %d, %d topics", v, inc.ErrorCode, len(inc.Topics))
		}
		if inc = fetch(sessionFetch(v, id+1, 1, topic, tid, nil)); inc.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("v%d: unknown session: error %d", v, inc.ErrorCode)
		}

		// Forget partition 2, move partition 1 to 2; then append to 0 and
		// 2: only partition 0 is answered.
		req := sessionFetch(v, id, 3, topic, tid, map[int32]int64{1: 2})
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = topic, tid, []int32{2}
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
		if inc = fetch(req); inc.ErrorCode != 0 || len(fetchedParts(t, inc)) != 0 {
			t.Fatalf("v%d: forget: error %d parts %v", v, inc.ErrorCode, fetchedParts(t, inc))
		}
		producedOne(t, c, topic, 0, "third")
		producedOne(t, c, topic, 2, "third")
		got = fetchedParts(t, fetch(sessionFetch(v, id, 4, topic, tid, nil)))
		if len(got) != 1 || got[0].bytes == 0 || got[0].hw != 2 {
			t.Fatalf("v%d: after forgetting 2: answered %+v, want partition 0 alone", v, got)
		}

		// A session keeps the topic naming it was created with.
		other := int16(12)
		if v < 13 {
			other = 13
		}
		if other <= kmsg.NewPtrFetchRequest().MaxVersion() {
			if inc = fetch(sessionFetch(other, id, 5, topic, topicID(t, n, topic), nil)); inc.ErrorCode != kerr.FetchSessionTopicIDError.Code {
				t.Fatalf("v%d session fetched at v%d: error %d, want FETCH_SESSION_TOPIC_ID_ERROR", v, other, inc.ErrorCode)
			}
		}

		// Epoch -1 closes the session and fetches without one.
		closing := fetch(sessionFetch(v, id, -1, topic, tid, map[int32]int64{0: 0}))
		if closing.ErrorCode != 0 || closing.SessionID != 0 || fetchedParts(t, closing)[0].bytes == 0 {
			t.Fatalf("v%d: closing fetch: error %d session %d", v, closing.ErrorCode, closing.SessionID)
		}
		if n.fetchSessions.get(id) != nil {
			t.Fatalf("v%d: session %d still cached after epoch -1", v, id)
		}
	}
}

// TestFetchSessionIncrementalLongPollWokenByAppend parks an incremental
// fetch (MaxWaitMs 20s, MinBytes 1) and checks that an append to one of
// the session's partitions answers it at once, with that partition alone.
func TestFetchSessionIncrementalLongPollWokenByAppend(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "sesspoll", 4, nil)
	c := dialRaw(t, n)
	full := c.roundTrip(sessionFetch(12, 0, 0, "sesspoll", [16]byte{}, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0})).(*kmsg.FetchResponse)
	if full.SessionID == 0 || len(fetchedParts(t, full)) != 4 {
		t.Fatalf("full fetch: session %d parts %v", full.SessionID, fetchedParts(t, full))
	}
	req := sessionFetch(12, full.SessionID, 1, "", [16]byte{}, nil)
	req.MaxWaitMillis, req.MinBytes = 20000, 1
	corr := c.send(req)
	waitParked(t, n, "sesspoll", 2)
	start := time.Now()
	producedOne(t, dialRaw(t, n), "sesspoll", 2, "wake")
	got, body, err := c.readFrame()
	if err != nil || got != corr {
		t.Fatalf("long poll: corr %d err %v", got, err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("append answered the parked fetch after %v", el)
	}
	parts := fetchedParts(t, decodeResponse(t, req, body).(*kmsg.FetchResponse))
	if len(parts) != 1 || parts[2].bytes == 0 {
		t.Fatalf("woken incremental fetch answered %+v, want partition 2 alone", parts)
	}
}

// TestFetchSessionCacheBoundedBySlots: with one slot, a second consumer's
// equal-sized session does not evict the first (it is answered without a
// session); with no slots no session is made.
func TestFetchSessionCacheBoundedBySlots(t *testing.T) {
	for _, slots := range []int{0, 1} {
		n := startNode(t, t.TempDir(), map[string]string{"max.incremental.fetch.session.cache.slots": fmt.Sprint(slots)})
		createTopic(t, newAdmin(t, n), "slots", 1, nil)
		c := dialRaw(t, n)
		first := c.roundTrip(sessionFetch(12, 0, 0, "slots", [16]byte{}, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
		second := c.roundTrip(sessionFetch(12, 0, 0, "slots", [16]byte{}, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
		if first.ErrorCode != 0 || second.ErrorCode != 0 {
			t.Fatalf("slots=%d: errors %d %d", slots, first.ErrorCode, second.ErrorCode)
		}
		if (first.SessionID != 0) != (slots == 1) || second.SessionID != 0 || n.fetchSessions.len() != slots {
			t.Fatalf("slots=%d: sessions %d and %d, %d cached", slots, first.SessionID, second.SessionID, n.fetchSessions.len())
		}
	}
}

// TestFetchSessionCacheEvictsByKafkasRules exercises eviction on a cache
// with a moveable clock: a stale least-recently-used session goes first;
// otherwise a session that is not recently created gives way to one worth
// more (a follower's over a consumer's, then more partitions); recently
// created sessions are safe from all but staleness.
func TestFetchSessionCacheEvictsByKafkasRules(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	c := newFetchSessionCache(2)
	c.now = func() time.Time { return now }
	parts := func(n int) []*sessionPart {
		var out []*sessionPart
		for i := range n {
			out = append(out, &sessionPart{key: sessionKey{topic: "t", part: int32(i)}, partition: int32(i)})
		}
		return out
	}
	a := c.create(false, false, parts(1))
	now = now.Add(time.Second)
	b := c.create(false, false, parts(3))
	if a == nil || b == nil || a.id == b.id || a.id <= 0 || b.id <= 0 {
		t.Fatalf("sessions %v %v", a, b)
	}
	// Full; both recently created: a bigger or privileged newcomer gets
	// no room.
	if s := c.create(true, false, parts(10)); s != nil {
		t.Fatal("a recently created session was evicted")
	}
	// Past the protection window, a used b stays fresh while a went
	// stale: a is evicted even by a smaller session.
	now = now.Add(fetchSessionEvictAfter)
	c.touch(b)
	d := c.create(false, false, parts(1))
	if d == nil || c.get(a.id) != nil || c.get(b.id) == nil {
		t.Fatalf("stale session a not evicted: d=%v a cached=%v", d, c.get(a.id) != nil)
	}
	// b (3 partitions, not recent, fresh) and d (recent): an equal-sized
	// consumer session does not evict b, a bigger one does.
	now = now.Add(time.Second)
	c.touch(b)
	c.touch(d)
	if s := c.create(false, false, parts(3)); s != nil {
		t.Fatal("an equal-sized session evicted another")
	}
	e := c.create(false, false, parts(4))
	if e == nil || c.get(b.id) != nil || c.get(d.id) == nil {
		t.Fatal("a bigger session did not evict the smaller old one")
	}
	// Once d is old, a follower's one-partition session evicts it (the
	// cheapest non-recent consumer session), however small.
	now = now.Add(fetchSessionEvictAfter - time.Second)
	c.touch(d)
	c.touch(e)
	f := c.create(true, false, parts(1))
	if f == nil || c.get(d.id) != nil || c.get(e.id) == nil {
		t.Fatalf("follower session: f=%v, d cached=%v, e cached=%v", f, c.get(d.id) != nil, c.get(e.id) != nil)
	}
	if c.len() != 2 {
		t.Fatalf("%d sessions cached with 2 slots", c.len())
	}
}

// TestFetchSessionTopicRecreatedUnderItsName: a v13+ session names its
// topic by id; once the topic is deleted its partition answers
// UNKNOWN_TOPIC_OR_PARTITION, and once a new topic takes the name,
// INCONSISTENT_TOPIC_ID (the session's id is not the log's), never the new
// topic's records.
func TestFetchSessionTopicRecreatedUnderItsName(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "again", 1, nil)
	c := dialRaw(t, n)
	producedOne(t, c, "again", 0, "old")
	v := kmsg.NewPtrFetchRequest().MaxVersion()
	old := topicID(t, n, "again")
	full := c.roundTrip(sessionFetch(v, 0, 0, "", old, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if full.SessionID == 0 || fetchedParts(t, full)[0].bytes == 0 {
		t.Fatalf("full fetch: session %d parts %+v", full.SessionID, fetchedParts(t, full))
	}
	if _, err := adm.DeleteTopics(testCtx(t), "again"); err != nil {
		t.Fatal(err)
	}
	got := fetchedParts(t, c.roundTrip(sessionFetch(v, full.SessionID, 1, "", old, nil)).(*kmsg.FetchResponse))
	if got[0].code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("deleted topic: answered %+v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	createTopic(t, adm, "again", 1, nil)
	producedOne(t, c, "again", 0, "new")
	got = fetchedParts(t, c.roundTrip(sessionFetch(v, full.SessionID, 2, "", old, nil)).(*kmsg.FetchResponse))
	if g := got[0]; g.code != kerr.InconsistentTopicID.Code || g.bytes != 0 || g.hw != -1 {
		t.Fatalf("re-created topic: answered %+v, want INCONSISTENT_TOPIC_ID without records", got)
	}
}

// TestFetchSessionRotatesPartitionsWithDataToTheEnd: under a response byte
// limit that admits one batch, a session's partitions take turns: the one
// that returned records moves behind the others (KIP-227), so incremental
// fetches that change nothing serve partition 1, then 2, then 0 again.
func TestFetchSessionRotatesPartitionsWithDataToTheEnd(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "turns", 3, nil)
	c := dialRaw(t, n)
	for p := int32(0); p < 3; p++ {
		producedOne(t, c, "turns", p, string(make([]byte, 1000)))
	}
	served := func(fr *kmsg.FetchResponse) []int32 {
		var out []int32
		for p, g := range fetchedParts(t, fr) {
			if g.bytes > 0 {
				out = append(out, p)
			}
		}
		return out
	}
	req := sessionFetch(12, 0, 0, "turns", [16]byte{}, map[int32]int64{0: 0, 1: 0, 2: 0})
	req.MaxBytes = 1
	full := c.roundTrip(req).(*kmsg.FetchResponse)
	if got := served(full); full.SessionID == 0 || len(got) != 1 || got[0] != 0 {
		t.Fatalf("full fetch: session %d served %v, want partition 0 alone", full.SessionID, got)
	}
	// A full fetch keeps the request's order; from then on each partition
	// served moves to the end.
	for epoch, want := range []int32{0, 1, 2, 0, 1} {
		req := sessionFetch(12, full.SessionID, int32(epoch)+1, "", [16]byte{}, nil)
		req.MaxBytes = 1
		if got := served(c.roundTrip(req).(*kmsg.FetchResponse)); len(got) != 1 || got[0] != want {
			t.Fatalf("incremental epoch %d served %v, want partition %d", epoch+1, got, want)
		}
	}
}

// TestFetchSessionResolvesTopicIDLearnedLater: a partition that entered a
// session by a topic id this broker did not know yet (a follower that
// learned of a new topic before its leader did) is resolved on a later
// fetch, as Kafka's maybeResolveUnknownName, instead of answering
// UNKNOWN_TOPIC_ID for the session's life (a follower stalled by it).
func TestFetchSessionResolvesTopicIDLearnedLater(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	c := dialRaw(t, n)
	const topic = "late-id"
	v := kmsg.NewPtrFetchRequest().MaxVersion()
	createTopic(t, adm, topic, 1, nil)
	tid := topicID(t, n, topic)
	full := c.roundTrip(sessionFetch(v, 0, 0, topic, tid, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("full fetch: error %d, session %d", full.ErrorCode, full.SessionID)
	}
	// As if the id had been unknown when the partition entered.
	s := n.fetchSessions.get(full.SessionID)
	s.mu.Lock()
	for _, sp := range s.parts {
		sp.topic = ""
	}
	s.mu.Unlock()
	producedOne(t, c, topic, 0, "later")
	inc := c.roundTrip(sessionFetch(v, full.SessionID, 1, topic, tid, nil)).(*kmsg.FetchResponse)
	got := fetchedParts(t, inc)
	if inc.ErrorCode != 0 || got[0].code != 0 || got[0].bytes == 0 {
		t.Fatalf("incremental fetch after the id became known: error %d, answered %+v", inc.ErrorCode, got)
	}
}
