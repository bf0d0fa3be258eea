package broker

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/batch"
)

// A compacted topic end to end through franz-go: keyed updates and
// tombstones produced with kgo's defaults (idempotent, snappy), the
// segments cleaned, and a consumer from offset 0 sees exactly the newest
// value of every key, across the offset gaps and the empty batches the
// cleaner leaves; keyless records are refused.
func TestCompactedTopicConsumerSeesNewestValuePerKey(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"log.cleaner.backoff.ms": "3600000"})
	adm := newAdmin(t, n)
	str := func(s string) *string { return &s }
	createTopic(t, adm, "kv", 1, map[string]*string{
		"cleanup.policy": str("compact"), "segment.bytes": str("4096"), "min.cleanable.dirty.ratio": str("0.01"),
	})
	cl := newClient(t, n, kgo.ProducerLinger(0))
	ctx := testCtx(t)
	model := map[string]string{}
	const produced = 600
	for i := range produced {
		k := fmt.Sprintf("k%02d", i%25)
		r := &kgo.Record{Topic: "kv", Key: []byte(k)}
		if i%50 == 49 {
			delete(model, k) // a tombstone
		} else {
			r.Value = fmt.Appendf(nil, "v%d", i)
			model[k] = string(r.Value)
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kv", Value: []byte("no key")}).FirstErr(); err == nil {
		t.Fatal("a keyless record was accepted on a compacted topic")
	}
	l, ok := n.store.Get("kv", 0)
	if !ok {
		t.Fatal("no log for kv-0")
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	before := l.Size()
	if runs := n.store.RunCleaner(); runs == 0 {
		t.Fatal("the cleaner did not run")
	}
	if l.Size()*3 > before {
		t.Fatalf("log %d bytes after cleaning, %d before", l.Size(), before)
	}

	cons := newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kv": {0: kgo.NewOffset().AtStart()}}))
	got := map[string]string{}
	seen, last := 0, int64(-1)
	for last < produced-1 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed up to offset %d of %d: %v", last, produced-1, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			seen++
			if r.Value == nil {
				delete(got, string(r.Key))
			} else {
				got[string(r.Key)] = string(r.Value)
			}
		})
	}
	if len(got) != len(model) {
		t.Fatalf("%d keys consumed, want %d", len(got), len(model))
	}
	for k, v := range model {
		if got[k] != v {
			t.Fatalf("key %s: consumed %q, newest produced %q", k, got[k], v)
		}
	}
	if seen >= produced/3 {
		t.Fatalf("consumed %d records of %d produced: not compacted", seen, produced)
	}
	s := scrapeMetrics(t, n)
	if s.get(t, "strata_log_cleaner_runs_total") < 1 || s.get(t, "strata_log_cleaner_written_bytes_total") <= 0 ||
		s.get(t, "strata_log_cleaner_read_bytes_total") < float64(before) {
		t.Fatal("log cleaner counters did not move")
	}
	if r := s.get(t, "strata_log_cleaner_dirty_ratio", "topic", "kv", "partition", "0"); r != 0 {
		t.Fatalf("dirty ratio %v right after a full cleaning", r)
	}

	// The cleaned log survives a restart, and a new consumer reads the
	// same newest values.
	dir := n.cfg.LogDir
	n.Close()
	n = startNode(t, dir, map[string]string{"log.cleaner.backoff.ms": "3600000"})
	cons = newClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kv": {0: kgo.NewOffset().AtStart()}}))
	ctx = testCtx(t)
	again := map[string]string{}
	for last = -1; last < produced-1; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("after restart consumed up to offset %d of %d: %v", last, produced-1, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch after restart: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			last = r.Offset
			if r.Value == nil {
				delete(again, string(r.Key))
			} else {
				again[string(r.Key)] = string(r.Value)
			}
		})
	}
	if fmt.Sprint(again) != fmt.Sprint(model) {
		t.Fatalf("after restart: %v, want %v", again, model)
	}
}

// keyedBatch builds an uncompressed v2 batch without a producer id, one
// record per key with the key as its value, as a plain (non-idempotent)
// producer such as segmentio/kafka-go's Writer sends it.
func keyedBatch(keys ...string) []byte {
	var recs []byte
	for i, k := range keys {
		r := kmsg.Record{OffsetDelta: int32(i), Key: []byte(k), Value: []byte(k)}
		body := r.AppendTo(nil) // Length 0 is a one-byte varint
		r.Length = int32(len(body) - 1)
		recs = r.AppendTo(recs)
	}
	ts := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		LastOffsetDelta: int32(len(keys) - 1), FirstTimestamp: ts, MaxTimestamp: ts,
		NumRecords: int32(len(keys)), Records: recs,
	}
	rb.Length = int32(61 + len(recs) - 12)
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestFetchCompactedLogServesNoEmptyBatches is segmentio/kafka-go's
// TestReaderReadCompactedMessage at the protocol level: keys written three
// to a batch by a plain producer into 200-byte segments, runs of a
// duplicated key between them, the log compacted, then read from offset 0
// with 200-byte fetches. Every fetch must make progress with whole batches
// that hold records: Kafka's cleaner drops a batch left with no records
// (unless it is an idempotent producer's last), and kafka-go's reader,
// given a batch of zero records, parses the next batch's bytes as a
// record and never gets past it. Every key is read exactly once.
func TestFetchCompactedLogServesNoEmptyBatches(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"log.cleaner.backoff.ms": "3600000"})
	adm := newAdmin(t, n)
	str := func(s string) *string { return &s }
	createTopic(t, adm, "compacted", 1, map[string]*string{
		"cleanup.policy": str("compact"), "segment.bytes": str("200"), "min.cleanable.dirty.ratio": str("0.01"),
	})
	var keys []string
	for i, k := 0, 0; i < 5; i++ {
		for range 30 {
			keys = append(keys, fmt.Sprintf("%04d", k))
			k++
			for range i {
				keys = append(keys, "dup_")
			}
		}
	}
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("e-%02d", i))
	}
	unique := map[string]bool{}
	c := dialRaw(t, n)
	for i := 0; i < len(keys); i += 3 {
		chunk := keys[i:min(i+3, len(keys))]
		for _, k := range chunk {
			unique[k] = true
		}
		if code, _ := produceErr(t, c.roundTrip(produceReq(7, "compacted", [16]byte{}, 0, 1, keyedBatch(chunk...)))); code != 0 {
			t.Fatalf("produce batch %d: error %d", i/3, code)
		}
	}
	l, ok := n.store.Get("compacted", 0)
	if !ok {
		t.Fatal("no log for compacted-0")
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if runs := n.store.RunCleaner(); runs == 0 {
		t.Fatal("the cleaner did not run")
	}

	hw := n.partition("compacted", 0).hw.Load()
	seen := map[string]int{}
	for offset, fetches := int64(0), 0; offset < hw; fetches++ {
		if fetches > len(keys) {
			t.Fatalf("%d fetches and still at offset %d of %d", fetches, offset, hw)
		}
		req := fetchReq(10, "compacted", [16]byte{}, 0, offset, 100, 1, 200)
		req.MaxBytes = 200
		p := fetchPart0(t, c.roundTrip(req))
		if p.ErrorCode != 0 {
			t.Fatalf("fetch at %d: error %d", offset, p.ErrorCode)
		}
		if len(p.RecordBatches) == 0 {
			t.Fatalf("fetch at %d (high watermark %d): no batches", offset, hw)
		}
		for b := p.RecordBatches; len(b) > 0; {
			h, err := batch.ParseHeader(b)
			if err != nil || h.Size() > len(b) {
				t.Fatalf("fetch at %d: a partial or bad batch (%d bytes left): %v", offset, len(b), err)
			}
			if h.NumRecords == 0 {
				t.Fatalf("fetch at %d: batch %d-%d has no records (and no producer id)", offset, h.BaseOffset, h.LastOffset())
			}
			err = batch.Records(b[:h.Size()], func(r batch.Record) error {
				if h.BaseOffset+int64(r.OffsetDelta) >= offset {
					seen[string(r.Key)]++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			b = b[h.Size():]
			offset = h.LastOffset() + 1
		}
	}
	if len(seen) != len(unique) {
		t.Fatalf("read %d distinct keys, %d written", len(seen), len(unique))
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("key %s read %d times after compaction", k, c)
		}
	}
}

// TestProduceKeylessToCompactedTopicReportsRecordErrors: as Kafka
// (LogValidator, KIP-467), a batch holding records without a key bound for
// a compacted topic fails whole with INVALID_RECORD and nothing of it is
// appended; from Produce v8 the response lists each keyless record's index
// in the batch (RecordErrors) and Kafka's ErrorMessage, which librdkafka
// (2.4+) uses to fail exactly those records with INVALID_RECORD and the
// others with _INVALID_DIFFERENT_RECORD (0011_produce_batch).
func TestProduceKeylessToCompactedTopicReportsRecordErrors(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	str := func(s string) *string { return &s }
	createTopic(t, newAdmin(t, n), "keyed", 1, map[string]*string{"cleanup.policy": str("compact")})
	c := dialRaw(t, n)
	// Ten records; 0, 4 and 9 have no key.
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	b := keyedBatch(keys...)
	var recs []byte
	for i, k := range keys {
		r := kmsg.Record{OffsetDelta: int32(i), Key: []byte(k), Value: []byte("v")}
		if i == 0 || i == 4 || i == 9 {
			r.Key = nil
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	rb.Records = recs
	rb.Length = int32(61 + len(recs) - 12)
	b = rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))

	const msg = "Compacted topic cannot accept message without key in topic partition keyed-0."
	for _, v := range []int16{7, 8, 9, 12} {
		resp := c.roundTrip(produceReq(v, "keyed", [16]byte{}, 0, -1, b)).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.InvalidRecord.Code || p.BaseOffset != -1 {
			t.Fatalf("v%d: error %d base offset %d, want INVALID_RECORD and -1", v, p.ErrorCode, p.BaseOffset)
		}
		if v < 8 {
			continue // no RecordErrors or ErrorMessage before v8
		}
		var got []int32
		for _, er := range p.ErrorRecords {
			got = append(got, er.RelativeOffset)
			if er.ErrorMessage == nil || *er.ErrorMessage != msg {
				t.Errorf("v%d: record %d message %v, want %q", v, er.RelativeOffset, er.ErrorMessage, msg)
			}
		}
		if fmt.Sprint(got) != "[0 4 9]" {
			t.Errorf("v%d: RecordErrors at %v, want [0 4 9]", v, got)
		}
		want := "One or more records have been rejected due to 3 record errors in total, and only showing the first three errors at most: " +
			"[RecordError(batchIndex=0, message='" + msg + "'), RecordError(batchIndex=4, message='" + msg + "'), RecordError(batchIndex=9, message='" + msg + "')]"
		if p.ErrorMessage == nil || *p.ErrorMessage != want {
			t.Errorf("v%d: ErrorMessage %v, want %q", v, p.ErrorMessage, want)
		}
	}
	if hw := n.partition("keyed", 0).hw.Load(); hw != 0 {
		t.Fatalf("high watermark %d after refused batches: something was appended", hw)
	}
	// The same batch with every key is appended.
	if code, base := produceErr(t, c.roundTrip(produceReq(9, "keyed", [16]byte{}, 0, -1, keyedBatch(keys...)))); code != 0 || base != 0 {
		t.Fatalf("keyed batch: error %d base %d", code, base)
	}
}
