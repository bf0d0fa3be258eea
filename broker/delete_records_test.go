package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/storage/vfs"
)

// deleteRecordsTo runs kadm.DeleteRecords for partition 0 of topic and
// returns the partition's low watermark and error.
func deleteRecordsTo(t *testing.T, adm *kadm.Client, topic string, offset int64) (int64, error) {
	t.Helper()
	var os kadm.Offsets
	os.AddOffset(topic, 0, offset, -1)
	resps, err := adm.DeleteRecords(testCtx(t), os)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	r, ok := resps.Lookup(topic, 0)
	if !ok {
		t.Fatalf("delete records: no answer for %s/0", topic)
	}
	return r.LowWatermark, r.Err
}

func startOffset(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	lo, err := adm.ListStartOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := lo.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("list start offset: %+v", o)
	}
	return o.Offset
}

// produceValues produces count records "<tag>-<i>" to partition 0.
func produceValues(t *testing.T, cl *kgo.Client, topic, tag string, count int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range count {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("%s-%d-0123456789", tag, i))})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteRecordsMovesLogStartOffset drives DeleteRecords through kadm:
// the low watermark moves, ListOffsets earliest follows, a fetch below it
// is OFFSET_OUT_OF_RANGE, a consumer from the start begins there, whole
// segments below it are deleted, and it all survives a restart.
func TestDeleteRecordsMovesLogStartOffset(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	adm := newAdmin(t, n)
	segBytes := "300"
	createTopic(t, adm, "del", 1, map[string]*string{"segment.bytes": &segBytes})
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	produceValues(t, cl, "del", "a", 30)
	p := n.partition("del", 0)
	segsBefore := p.log.NumSegments()
	if segsBefore < 4 {
		t.Fatalf("%d segments: the test wants several", segsBefore)
	}

	if lw, err := deleteRecordsTo(t, adm, "del", 12); err != nil || lw != 12 {
		t.Fatalf("delete to 12: low watermark %d, %v", lw, err)
	}
	if got := startOffset(t, adm, "del"); got != 12 {
		t.Fatalf("ListOffsets earliest %d after deleting to 12", got)
	}
	if p.log.NumSegments() >= segsBefore {
		t.Fatalf("%d segments before and after deleting to 12: none removed", segsBefore)
	}
	// The checkpoint is already on disk (a crash now keeps the deletion).
	lsos, err := checkpoint.ReadOffsets(vfs.Default, filepath.Join(dir, storage.LogStartOffsetCheckpointFile))
	if err != nil || lsos[checkpoint.TopicPartition{Topic: "del", Partition: 0}] != 12 {
		t.Fatalf("log-start-offset checkpoint after DeleteRecords: %v, %v", lsos, err)
	}

	c := dialRaw(t, n)
	if pr := fetchPart0(t, c.roundTrip(fetchReq(12, "del", [16]byte{}, 0, 5, 0, 0, 1<<20))); pr.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at 5 below the start: code %d", pr.ErrorCode)
	}
	consumer := newClient(t, n, kgo.ConsumeTopics("del"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := consumer.PollFetches(testCtx(t))
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatalf("consume from the start: %v", errs[0].Err)
	}
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 12 || string(recs[0].Value) != "a-12-0123456789" {
		t.Fatalf("consumer from the start got %d records, first %+v", len(recs), recs)
	}

	// Below the start: nothing changes. Above the high watermark: refused.
	if lw, err := deleteRecordsTo(t, adm, "del", 5); err != nil || lw != 12 {
		t.Fatalf("delete to 5 below the start: low watermark %d, %v", lw, err)
	}
	if _, err := deleteRecordsTo(t, adm, "del", 31); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete to 31 past the high watermark 30: %v", err)
	}
	if got := startOffset(t, adm, "del"); got != 12 {
		t.Fatalf("ListOffsets earliest %d after refused deletions", got)
	}

	// Restart: the start offset stays; then -1 deletes up to the high
	// watermark, and new records follow at the old end.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, nil)
	adm = newAdmin(t, n)
	if got := startOffset(t, adm, "del"); got != 12 {
		t.Fatalf("ListOffsets earliest %d after restart, want 12", got)
	}
	if lw, err := deleteRecordsTo(t, adm, "del", -1); err != nil || lw != 30 {
		t.Fatalf("delete to the high watermark: low watermark %d, %v", lw, err)
	}
	cl = newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceValues(t, cl, "del", "b", 2)
	if got := startOffset(t, adm, "del"); got != 30 {
		t.Fatalf("ListOffsets earliest %d, want 30", got)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, nil)
	if p := n.partition("del", 0); p.log.LogStartOffset() != 30 || p.log.LogEndOffset() != 32 {
		t.Fatalf("after the second restart: log start %d end %d, want 30 and 32", p.log.LogStartOffset(), p.log.LogEndOffset())
	}
}

// TestDeleteRecordsEveryVersionAndErrors drives DeleteRecords v0 to the
// newest with raw requests: low watermarks, OFFSET_OUT_OF_RANGE for
// negative offsets other than -1, unknown topics and partitions, several
// partitions in one request.
func TestDeleteRecordsEveryVersionAndErrors(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"auto.create.topics.enable": "false"})
	createTopic(t, newAdmin(t, n), "delv", 2, nil)
	c := dialRaw(t, n)
	for part := range int32(2) {
		for range 10 {
			code, _ := produceErr(t, c.roundTrip(produceReq(9, "delv", [16]byte{}, part, -1, recordBatch(1000, "x"))))
			if code != 0 {
				t.Fatalf("produce: %d", code)
			}
		}
	}
	type want struct {
		code int16
		lw   int64
	}
	maxV := kmsg.NewPtrDeleteRecordsRequest().MaxVersion()
	for v := int16(0); v <= maxV; v++ {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.SetVersion(v)
		req.TimeoutMillis = 5000
		var add func(topic string, part int32, off int64)
		add = func(topic string, part int32, off int64) {
			for i := range req.Topics {
				if req.Topics[i].Topic == topic {
					p := kmsg.NewDeleteRecordsRequestTopicPartition()
					p.Partition, p.Offset = part, off
					req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
					return
				}
			}
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			add(topic, part, off)
		}
		add("delv", 0, int64(v)+1) // 1, 2, 3: each version moves partition 0 one further
		add("delv", 1, -2)
		add("delv", 7, 1)
		add("nope", 0, 1)
		resp := c.roundTrip(req).(*kmsg.DeleteRecordsResponse)
		got := map[string]want{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				got[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = want{rp.ErrorCode, rp.LowWatermark}
			}
		}
		for k, w := range map[string]want{
			"delv/0": {0, int64(v) + 1},
			"delv/1": {kerr.OffsetOutOfRange.Code, -1},
			"delv/7": {kerr.UnknownTopicOrPartition.Code, -1},
			"nope/0": {kerr.UnknownTopicOrPartition.Code, -1},
		} {
			if got[k] != w {
				t.Errorf("v%d %s: code %d low watermark %d, want %d %d", v, k, got[k].code, got[k].lw, w.code, w.lw)
			}
		}
	}
	if ls := n.partition("delv", 1).log.LogStartOffset(); ls != 0 {
		t.Fatalf("partition 1 start moved to %d by refused requests", ls)
	}

	// A compacted topic's records cannot be deleted by offset.
	compact := "compact"
	adm := newAdmin(t, n)
	createTopic(t, adm, "compacted", 1, map[string]*string{"cleanup.policy": &compact})
	if code, _ := produceErr(t, c.roundTrip(produceReq(9, "compacted", [16]byte{}, 0, -1, recordBatch(1000, "x")))); code != 0 {
		t.Fatalf("produce: %d", code)
	}
	if _, err := deleteRecordsTo(t, adm, "compacted", 1); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("delete records of a compacted topic: %v, want POLICY_VIOLATION", err)
	}
}

// TestDeleteRecordsWakesParkedFetchBelowNewStart: a fetch parked for more
// bytes (MinBytes) at an offset that DeleteRecords then moves the log
// start past answers OFFSET_OUT_OF_RANGE at once, not at MaxWaitMs.
func TestDeleteRecordsWakesParkedFetchBelowNewStart(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "park", 1, nil)
	c := dialRaw(t, n)
	for range 10 {
		if code, _ := produceErr(t, c.roundTrip(produceReq(9, "park", [16]byte{}, 0, -1, recordBatch(1000, "x")))); code != 0 {
			t.Fatalf("produce: %d", code)
		}
	}
	p := n.partition("park", 0)
	start := time.Now()
	fetched := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() {
		fc := dialRaw(t, n)
		req := fetchReq(11, "park", [16]byte{}, 0, 2, 15000, 1<<20, 1<<20)
		fc.send(req)
		_, body, err := fc.readFrame()
		if err != nil {
			close(fetched)
			return
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(11)
		if resp.ReadFrom(body) != nil || len(resp.Topics) != 1 {
			close(fetched)
			return
		}
		fetched <- resp.Topics[0].Partitions[0]
	}()
	if err := testutil.Within(testWait, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.waiters) > 0
	}); err != nil {
		t.Fatal("the fetch never parked")
	}
	if lw, err := deleteRecordsTo(t, adm, "park", 5); err != nil || lw != 5 {
		t.Fatalf("delete to 5: %d %v", lw, err)
	}
	select {
	case fp, ok := <-fetched:
		if !ok || fp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("parked fetch answered %+v", fp)
		}
		if waited := time.Since(start); waited > 10*time.Second {
			t.Fatalf("parked fetch answered after %v: not woken by the deletion", waited)
		}
	case <-time.After(testWait):
		t.Fatal("parked fetch never answered")
	}
}
